package bench

import (
	"context"
	"crypto/tls"
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
func BenchmarkAcquireReleaseTLS(b *testing.B) {
	for _, n := range []int{1, 64} {
		b.Run(fmt.Sprintf("sessions=%d", n), func(b *testing.B) {
			addr, tc := startTLSCell(b)
			acquireReleaseBy(b, dialWith(b, client.Config{Servers: []string{addr}, TLS: tc}, n))
		})
	}
}

// startTLSCell starts a one-server cell with TLS and returns its address
// and a client TLS configuration for it.
func startTLSCell(b *testing.B) (string, *tls.Config) {
	files, clients := cell.DevTLS(b, "client")
	s := benchServer(b, "bench", freeAddr(b), freeAddr(b), nil, func(c *server.Config) {
		c.TLS = files
		c.Admins = []string{"client"} // the root's ACLs are the admins' (an admin's calls skip ACL checks: this measures TLS)
	})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := s.WaitMaster(ctx); err != nil {
		b.Fatal(err)
	}
	return s.RPCAddr(), clients["client"]
}
