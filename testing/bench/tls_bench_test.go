package bench

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/chubby-dev/chubby/client"
	"github.com/chubby-dev/chubby/server"
	"github.com/chubby-dev/chubby/testing/cell"
)

// BenchmarkAcquireReleaseTLS: BenchmarkAcquireRelease's cycles on a
// one-server cell with mutual TLS (certificates from internal/devca), to
// set against the plaintext figures (issue 11: at least 85 % of them).
// acl=off: the client is an admin (its calls skip ACL checks: TLS alone);
// acl=on: the client is an ordinary principal that an admin granted read
// and write on the root through an ACL file, so every Acquire and Release
// is checked against it.
func BenchmarkAcquireReleaseTLS(b *testing.B) {
	for _, acl := range []bool{false, true} {
		for _, n := range []int{1, 64} {
			b.Run(fmt.Sprintf("acl=%s/sessions=%d", onOff(acl), n), func(b *testing.B) {
				addr, tc := startTLSCell(b, acl)
				acquireReleaseBy(b, dialWith(b, client.Config{Servers: []string{addr}, TLS: tc}, n))
			})
		}
	}
}

func onOff(on bool) string {
	if on {
		return "on"
	}
	return "off"
}

// startTLSCell starts a one-server cell with TLS and returns its address
// and a client TLS configuration for it: of an admin, or with acl of an
// ordinary principal granted read and write on the root.
func startTLSCell(b *testing.B, acl bool) (string, *tls.Config) {
	files, clients := cell.DevTLS(b, "client", "admin", "other")
	s := benchServer(b, "bench", freeAddr(b), freeAddr(b), nil, func(c *server.Config) {
		c.TLS = files
		c.Admins = []string{"admin"}
		if !acl {
			c.Admins = append(c.Admins, "client")
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := s.WaitMaster(ctx); err != nil {
		b.Fatal(err)
	}
	if acl {
		admin := dialWith(b, client.Config{Servers: []string{s.RPCAddr()}, TLS: clients["admin"]}, 1)[0]
		if _, err := admin.WriteFile(ctx, "/ls/local/acl/bench", []byte("client\n")); err != nil {
			b.Fatal(err)
		}
		root, err := admin.Open(ctx, "/ls/local")
		if err != nil {
			b.Fatal(err)
		}
		if _, err := root.SetACL(ctx, client.ACL{Read: "bench", Write: "bench"}); err != nil {
			b.Fatal(err)
		}
		// The checks are on: a principal the ACL file does not name is refused.
		other := dialWith(b, client.Config{Servers: []string{s.RPCAddr()}, TLS: clients["other"]}, 1)[0]
		if _, err := other.Open(ctx, "/ls/local/other", client.Create()); !errors.Is(err, client.ErrPermission) {
			b.Fatalf("a principal without a grant creating a node: %v; want permission denied", err)
		}
	}
	return s.RPCAddr(), clients["client"]
}
