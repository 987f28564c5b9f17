package cell

import (
	"crypto/tls"
	"crypto/x509"
	"os"
	"path/filepath"
	"testing"

	"github.com/chubby-dev/chubby/internal/devca"
	"github.com/chubby-dev/chubby/server"
	"github.com/chubby-dev/chubby/wire"
)

// DevTLS issues, from a new CA for cell "local" in a temporary directory,
// a server certificate and one client certificate per name in clients. It
// returns the server's TLS files (for server.Config.TLS) and each client's
// TLS configuration by name (for client.Config.TLS).
func DevTLS(t testing.TB, clients ...string) (*server.TLSFiles, map[string]*tls.Config) {
	t.Helper()
	dir := t.TempDir()
	if err := devca.CreateCA(dir, "local", 1); err != nil {
		t.Fatal(err)
	}
	cert, key, err := devca.CreateCert(dir, devca.CertRequest{Name: "server", Server: true, Days: 1})
	if err != nil {
		t.Fatal(err)
	}
	out := make(map[string]*tls.Config, len(clients))
	for _, name := range clients {
		if _, _, err := devca.CreateCert(dir, devca.CertRequest{Name: name, Days: 1}); err != nil {
			t.Fatal(err)
		}
		if out[name], err = devca.TLSConfig(dir, name); err != nil {
			t.Fatal(err)
		}
	}
	return &server.TLSFiles{CA: filepath.Join(dir, devca.CAFile), Cert: cert, Key: key}, out
}

// ProxiesAs starts one proxy per server, in index order, for a client
// whose TLS configuration is tc (nil: Proxies). With tc the servers must
// run with TLS (server.Config.TLS, as WithServerConfig sets it): each
// proxy accepts TLS with its server's certificate, requiring a client
// certificate of the server's CA, and dials its server with tc (see
// ProxyTLS), so the server sees tc's principal. Pause and StallLeaseClock
// hold them as they hold Proxy's.
func (c *Cluster) ProxiesAs(t testing.TB, tc *tls.Config) []*Proxy {
	t.Helper()
	if tc == nil {
		return c.Proxies(t)
	}
	out := make([]*Proxy, len(c.nodes))
	for i, nd := range c.nodes {
		files := nd.cfg.TLS
		if files == nil {
			t.Fatalf("cell: ProxiesAs: node%d has no TLS (server.Config.TLS)", i)
		}
		pair, err := tls.LoadX509KeyPair(files.Cert, files.Key)
		if err != nil {
			t.Fatalf("cell: ProxiesAs: node%d's certificate: %v", i, err)
		}
		caPEM, err := os.ReadFile(files.CA)
		if err != nil {
			t.Fatalf("cell: ProxiesAs: node%d's CA: %v", i, err)
		}
		roots := x509.NewCertPool()
		if !roots.AppendCertsFromPEM(caPEM) {
			t.Fatalf("cell: ProxiesAs: no certificate in %s", files.CA)
		}
		in := &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{pair},
			ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: roots}
		dial := tc.Clone()
		if dial.ServerName == "" {
			dial.ServerName = wire.ServerName(c.name)
		}
		out[i] = c.link(i, ProxyTLS(t, c.Addr(i), in, dial))
	}
	return out
}
