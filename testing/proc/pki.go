package proc

import (
	"crypto/tls"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chubby-dev/chubby/internal/devca"
)

// PKI is a directory of TLS material made the way an operator makes it,
// with chubbyd's own commands: `chubbyd tls ca create` for the cell, `tls
// cert create -server` for each server, `tls cert create` for each client.
// The files have devca's names: ca.pem, NAME.pem, NAME-key.pem.
type PKI struct{ Dir string }

// NewPKI makes a PKI for cell with server certificates for servers and
// client certificates for clients, in a temporary directory.
func NewPKI(t testing.TB, cell string, servers []string, clients ...string) PKI {
	t.Helper()
	p := PKI{Dir: t.TempDir()}
	chubbyd := func(args ...string) {
		t.Helper()
		if r := RunChubbyd(t, 15*time.Second, args...); r.Code != 0 {
			t.Fatalf("chubbyd %s: %s", strings.Join(args, " "), r)
		}
	}
	chubbyd("tls", "ca", "create", "-dir", p.Dir, "-cell", cell)
	for _, s := range servers {
		chubbyd("tls", "cert", "create", "-dir", p.Dir, "-name", s, "-server")
	}
	for _, c := range clients {
		chubbyd("tls", "cert", "create", "-dir", p.Dir, "-name", c)
	}
	return p
}

// NewGossipKey writes a gossip key from `chubbyd keygen` to a file and
// returns its path.
func NewGossipKey(t testing.TB) string {
	t.Helper()
	keyFile := filepath.Join(t.TempDir(), "gossip.key")
	key := strings.TrimSpace(RunChubbyd(t, 10*time.Second, "keygen").Stdout)
	if err := os.WriteFile(keyFile, []byte(key+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return keyFile
}

// CA, Cert and Key are the paths of the CA's certificate and of name's
// certificate and key.
func (p PKI) CA() string              { return filepath.Join(p.Dir, devca.CAFile) }
func (p PKI) Cert(name string) string { return filepath.Join(p.Dir, name+".pem") }
func (p PKI) Key(name string) string  { return filepath.Join(p.Dir, name+"-key.pem") }

// TLSArgs are chubbyd's TLS flags for server name's files.
func (p PKI) TLSArgs(name string) []string {
	return []string{"-tls-ca", p.CA(), "-tls-cert", p.Cert(name), "-tls-key", p.Key(name)}
}

// ShArgs are chubbysh's TLS flags for client name.
func (p PKI) ShArgs(name string) []string {
	return []string{"-ca", p.CA(), "-cert", p.Cert(name), "-key", p.Key(name)}
}

// ShEnv is chubbysh's TLS environment for client name (CellOptions.ShEnv).
func (p PKI) ShEnv(name string) []string {
	return []string{"CHUBBY_CACERT=" + p.CA(), "CHUBBY_CERT=" + p.Cert(name), "CHUBBY_KEY=" + p.Key(name)}
}

// TLSConfig is client name's TLS configuration; serverName, if not empty,
// is the name the server's certificate must carry (to reach a server by
// address, as HTTPS and raw connections do).
func (p PKI) TLSConfig(t testing.TB, name, serverName string) *tls.Config {
	t.Helper()
	tc, err := devca.TLSConfig(p.Dir, name)
	if err != nil {
		t.Fatal(err)
	}
	if serverName != "" {
		tc.ServerName = serverName
	}
	return tc
}
