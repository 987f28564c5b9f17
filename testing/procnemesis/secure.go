package procnemesis

import (
	"crypto/tls"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chubby-dev/chubby/internal/devca"
	"github.com/chubby-dev/chubby/testing/proc"
	"github.com/chubby-dev/chubby/wire"
)

// The principals of a secure run (TestProcNemesisTLS): the cell's admin
// (chubbyd's default -acl-admins), who grants; the workloads' clients;
// one granted nothing.
const (
	adminName    = "admin"
	workerName   = "worker"
	intruderName = "intruder"
)

// PKI is a secure run's material, made the way an operator makes it, with
// chubbyd's own commands: `chubbyd tls ca create` for the cell, `tls cert
// create -server` for each server n1..nN, `tls cert create` for admin,
// worker and intruder, and `chubbyd keygen` for the gossip key. The files
// are in Dir with devca's names (ca.pem, NAME.pem, NAME-key.pem).
type PKI struct {
	Dir       string
	GossipKey string // the key file
}

// NewPKI makes a PKI for cell "local" and n servers in a temporary
// directory.
func NewPKI(t testing.TB, n int) *PKI {
	t.Helper()
	p := &PKI{Dir: t.TempDir()}
	chubbyd := func(args ...string) string {
		t.Helper()
		r := proc.RunChubbyd(t, 15*time.Second, args...)
		if r.Code != 0 {
			t.Fatalf("chubbyd %s: %s", strings.Join(args, " "), r)
		}
		return r.Stdout
	}
	chubbyd("tls", "ca", "create", "-dir", p.Dir, "-cell", "local")
	for i := range n {
		chubbyd("tls", "cert", "create", "-dir", p.Dir, "-name", serverName(i), "-server")
	}
	for _, c := range []string{adminName, workerName, intruderName} {
		chubbyd("tls", "cert", "create", "-dir", p.Dir, "-name", c)
	}
	p.GossipKey = filepath.Join(p.Dir, "gossip.key")
	if err := os.WriteFile(p.GossipKey, []byte(strings.TrimSpace(chubbyd("keygen"))+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func serverName(i int) string { return nodeName(i) }

func (p *PKI) ca() string              { return filepath.Join(p.Dir, devca.CAFile) }
func (p *PKI) cert(name string) string { return filepath.Join(p.Dir, name+".pem") }
func (p *PKI) key(name string) string  { return filepath.Join(p.Dir, name+"-key.pem") }

// TLS is the client configuration of principal name (for client.Config.TLS:
// the server verified by its role name).
func (p *PKI) TLS(t testing.TB, name string) *tls.Config {
	t.Helper()
	tc, err := devca.TLSConfig(p.Dir, name)
	if err != nil {
		t.Fatal(err)
	}
	return tc
}

// HTTPS is the configuration of name for the servers' HTTPS endpoints
// (reached by address, verified by the role name).
func (p *PKI) HTTPS(t testing.TB, name string) *tls.Config {
	tc := p.TLS(t, name)
	tc.ServerName = wire.ServerName("local")
	return tc
}

// cellOptions puts TLS on every link of the cell (client RPC, raft, HTTP)
// and the gossip key on gossip; the harness's own calls are admin's.
func (p *PKI) cellOptions(t testing.TB, o proc.CellOptions) proc.CellOptions {
	o.ClientTLS = p.HTTPS(t, adminName)
	o.ShEnv = []string{"CHUBBY_CACERT=" + p.ca(), "CHUBBY_CERT=" + p.cert(adminName), "CHUBBY_KEY=" + p.key(adminName)}
	o.ExtraArgs = append(o.ExtraArgs, "-gossip-key-file", p.GossipKey)
	args := o.ServerArgs
	o.ServerArgs = func(s *proc.Server, all []*proc.Server) []string {
		var out []string
		if args != nil {
			out = args(s, all)
		}
		return append(out, "-tls-ca", p.ca(), "-tls-cert", p.cert(s.NodeID), "-tls-key", p.key(s.NodeID))
	}
	return o
}
