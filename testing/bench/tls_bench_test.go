package bench

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
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
	cliCert, cliKey, err := devca.CreateCert(dir, devca.CertRequest{Name: "client", Days: 1})
	if err != nil {
		b.Fatal(err)
	}
	ca := filepath.Join(dir, devca.CAFile)
	s := benchServer(b, "bench", freeAddr(b), freeAddr(b), nil, func(c *server.Config) {
		c.TLS = &server.TLSFiles{CA: ca, Cert: srvCert, Key: srvKey}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := s.WaitMaster(ctx); err != nil {
		b.Fatal(err)
	}
	pair, err := tls.LoadX509KeyPair(cliCert, cliKey)
	if err != nil {
		b.Fatal(err)
	}
	pem, err := os.ReadFile(ca)
	if err != nil {
		b.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(pem)
	return s.RPCAddr(), &tls.Config{Certificates: []tls.Certificate{pair}, RootCAs: roots}
}
