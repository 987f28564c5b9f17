package cell

import (
	"crypto/tls"
	"path/filepath"
	"testing"

	"github.com/chubby-dev/chubby/internal/devca"
	"github.com/chubby-dev/chubby/server"
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
