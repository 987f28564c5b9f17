package wire

import "strings"

// ServerName is the DNS name every server certificate of cell carries (the
// role name): a TLS client verifies it rather than the address it dialled,
// and a certificate without it is not a server's — it may neither serve
// clients nor speak raft.
func ServerName(cell string) string { return "server." + cell + ".chubby" }

// IsServerName reports whether a DNS name is some cell's server role name.
func IsServerName(name string) bool {
	return strings.HasPrefix(name, "server.") && strings.HasSuffix(name, ".chubby")
}
