package bench

import (
	"context"
	"crypto/tls"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/chubby-dev/chubby/client"
	"github.com/chubby-dev/chubby/internal/devca"
	"github.com/chubby-dev/chubby/server"
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
	dir := b.TempDir()
	if err := devca.CreateCA(dir, "local", 1); err != nil {
		b.Fatal(err)
	}
	srvCert, srvKey, err := devca.CreateCert(dir, devca.CertRequest{Name: "bench", Server: true, Days: 1})
	if err != nil {
		b.Fatal(err)
	}
	if _, _, err := devca.CreateCert(dir, devca.CertRequest{Name: "client", Days: 1}); err != nil {
		b.Fatal(err)
	}
	s := benchServer(b, "bench", freeAddr(b), freeAddr(b), nil, func(c *server.Config) {
		c.TLS = &server.TLSFiles{CA: filepath.Join(dir, devca.CAFile), Cert: srvCert, Key: srvKey}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := s.WaitMaster(ctx); err != nil {
		b.Fatal(err)
	}
	tc, err := devca.TLSConfig(dir, "client")
	if err != nil {
		b.Fatal(err)
	}
	return s.RPCAddr(), tc
}
