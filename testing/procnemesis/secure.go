package procnemesis

import (
	"crypto/tls"
	"testing"

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
// chubbyd's own commands (proc.NewPKI): a server certificate for each
// server n1..nN, client certificates for admin, worker and intruder, and
// a gossip key from `chubbyd keygen`.
type PKI struct {
	proc.PKI
	GossipKey string // the key file
}

// NewPKI makes a PKI for cell "local" and n servers in a temporary
// directory.
func NewPKI(t testing.TB, n int) *PKI {
	t.Helper()
	servers := make([]string, n)
	for i := range servers {
		servers[i] = nodeName(i)
	}
	return &PKI{PKI: proc.NewPKI(t, "local", servers, adminName, workerName, intruderName), GossipKey: proc.NewGossipKey(t)}
}

// TLS is the client configuration of principal name (for client.Config.TLS:
// the server verified by its role name).
func (p *PKI) TLS(t testing.TB, name string) *tls.Config { return p.TLSConfig(t, name, "") }

// HTTPS is the configuration of name for the servers' HTTPS endpoints
// (reached by address, verified by the role name).
func (p *PKI) HTTPS(t testing.TB, name string) *tls.Config {
	return p.TLSConfig(t, name, wire.ServerName("local"))
}

// cellOptions puts TLS on every link of the cell (client RPC, raft, HTTP)
// and the gossip key on gossip; the harness's own calls are admin's.
func (p *PKI) cellOptions(t testing.TB, o proc.CellOptions) proc.CellOptions {
	o.ClientTLS = p.HTTPS(t, adminName)
	o.ShEnv = p.ShEnv(adminName)
	o.ExtraArgs = append(o.ExtraArgs, "-gossip-key-file", p.GossipKey)
	args := o.ServerArgs
	o.ServerArgs = func(s *proc.Server, all []*proc.Server) []string {
		var out []string
		if args != nil {
			out = args(s, all)
		}
		return append(out, p.TLSArgs(s.NodeID)...)
	}
	return o
}
