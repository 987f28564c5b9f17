package server

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"slices"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"

	"github.com/chubby-dev/chubby/fs"
	"github.com/chubby-dev/chubby/wire"
)

// TLSFiles names a server's TLS material, PEM files: the CA that signs
// every certificate of the cell, and this server's certificate (issued with
// `chubbyd tls cert create -server`: it carries the role name
// server.CELL.chubby) and key. With them every link is mutual TLS: the
// client RPC port (a client's principal is its certificate's common name)
// and the raft transport (only certificates with the role name may connect
// or be dialled, so a client certificate cannot pass as a server).
type TLSFiles struct{ CA, Cert, Key string }

// AnonymousPrincipal is every caller's principal on a cell without TLS.
const AnonymousPrincipal = "anonymous"

// tlsMaterial holds the loaded certificate and CA; reload swaps them for
// new handshakes while existing connections go on.
type tlsMaterial struct {
	files TLSFiles
	role  string // the server role name of this cell
	cur   atomic.Pointer[tlsState]
}

type tlsState struct {
	cert  tls.Certificate
	roots *x509.CertPool
}

func loadTLS(files TLSFiles, cell string) (*tlsMaterial, error) {
	m := &tlsMaterial{files: files, role: wire.ServerName(cell)}
	return m, m.reload()
}

// reload reads the files again.
func (m *tlsMaterial) reload() error {
	cert, err := tls.LoadX509KeyPair(m.files.Cert, m.files.Key)
	if err != nil {
		return fmt.Errorf("tls: certificate %s, key %s: %w", m.files.Cert, m.files.Key, err)
	}
	caPEM, err := os.ReadFile(m.files.CA)
	if err != nil {
		return fmt.Errorf("tls: CA: %w", err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(caPEM) {
		return fmt.Errorf("tls: CA %s holds no PEM certificate", m.files.CA)
	}
	leaf, err := x509.ParseCertificate(cert.Certificate[0])
	if err != nil {
		return fmt.Errorf("tls: certificate %s: %w", m.files.Cert, err)
	}
	if !slices.Contains(leaf.DNSNames, m.role) {
		return fmt.Errorf("tls: certificate %s is not a server certificate of this cell: it does not name %s (chubbyd tls cert create -server)", m.files.Cert, m.role)
	}
	m.cur.Store(&tlsState{cert: cert, roots: roots})
	return nil
}

// serverConfig is the listeners' configuration: a client certificate from
// the CA is required; with serversOnly it must also carry the role name.
func (m *tlsMaterial) serverConfig(serversOnly bool) *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			st := m.cur.Load()
			c := &tls.Config{
				MinVersion:   tls.VersionTLS12,
				Certificates: []tls.Certificate{st.cert},
				ClientCAs:    st.roots,
				ClientAuth:   tls.RequireAndVerifyClientCert,
			}
			if serversOnly {
				c.VerifyConnection = m.requireServer
			}
			return c, nil
		},
	}
}

// clientConfig is how this server dials another's raft transport: its own
// certificate, and the peer verified as a server of this cell.
func (m *tlsMaterial) clientConfig() *tls.Config {
	st := m.cur.Load()
	return &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{st.cert}, RootCAs: st.roots, ServerName: m.role}
}

// requireServer refuses a peer whose certificate lacks the role name.
func (m *tlsMaterial) requireServer(cs tls.ConnectionState) error {
	if len(cs.PeerCertificates) == 0 || !slices.Contains(cs.PeerCertificates[0].DNSNames, m.role) {
		return errors.New("tls: the peer's certificate is not a server certificate of this cell")
	}
	return nil
}

// ReloadTLS reads the TLS files again (chubbyd does on SIGHUP): new
// handshakes — client connections, raft connections, HTTPS — use the new
// certificate, key and CA; connections made before go on, and so do their
// sessions. Files that do not load (or a certificate that is not a server
// certificate of this cell) leave the old material in use. Without TLS it
// does nothing.
func (s *Server) ReloadTLS() error {
	if s.tls == nil {
		return nil
	}
	if err := s.tls.reload(); err != nil {
		return err
	}
	leaf, _ := x509.ParseCertificate(s.tls.cur.Load().cert.Certificate[0])
	s.log.Info("TLS files reloaded", "cert", s.tls.files.Cert, "serial", leaf.SerialNumber.Text(16), "not_after", leaf.NotAfter)
	return nil
}

// principalOf completes the TLS handshake of a client connection and
// returns the certificate's common name; a connection without TLS is the
// anonymous principal.
func principalOf(nc net.Conn) (string, error) {
	tc, ok := nc.(*tls.Conn)
	if !ok {
		return AnonymousPrincipal, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), bodyTimeout)
	defer cancel()
	if err := tc.HandshakeContext(ctx); err != nil {
		return "", err
	}
	certs := tc.ConnectionState().PeerCertificates
	if len(certs) == 0 || certs[0].Subject.CommonName == "" {
		return "", errors.New("tls: a client certificate without a common name")
	}
	return certs[0].Subject.CommonName, nil
}

// tlsStreamLayer is the raft transport's stream layer over mutual TLS.
type tlsStreamLayer struct {
	net.Listener
	advertise net.Addr
	m         *tlsMaterial
}

func newTLSStreamLayer(bind string, advertise net.Addr, m *tlsMaterial) (*tlsStreamLayer, error) {
	ln, err := net.Listen("tcp", bind)
	if err != nil {
		return nil, err
	}
	if a, ok := advertise.(*net.TCPAddr); !ok || a.Port == 0 {
		advertise = ln.Addr()
	}
	return &tlsStreamLayer{Listener: tls.NewListener(ln, m.serverConfig(true)), advertise: advertise, m: m}, nil
}

func (l *tlsStreamLayer) Dial(address raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	return tls.DialWithDialer(&net.Dialer{Timeout: timeout}, "tcp", string(address), l.m.clientConfig())
}

func (l *tlsStreamLayer) Addr() net.Addr { return l.advertise }

// isAdmin reports whether principal may make operator calls and bypasses
// ACLs: on a cell without TLS everybody (anonymous) does; with TLS the
// configured admins.
func (s *Server) isAdmin(principal string) bool {
	return s.tls == nil || slices.Contains(s.admins(), principal)
}

// admins are the configured admins, DefaultAdmins when none are.
func (s *Server) admins() []string {
	if len(s.cfg.Admins) == 0 {
		return DefaultAdmins
	}
	return s.cfg.Admins
}

// requireAdmin refuses an operator call from a principal that is not an
// admin, naming both.
func (s *Server) requireAdmin(principal, what string) error {
	if s.isAdmin(principal) {
		return nil
	}
	return fmt.Errorf("%w: %s may not %s: only the cell's admins may (chubbyd -acl-admins)", fs.ErrPermission, principal, what)
}

// httpAuth guards the HTTP endpoint of a cell with TLS: the client
// certificate's principal must be an admin — or, for /status and /healthz,
// anyone the CA vouches for (servers ask each other for /status). Without
// TLS it lets everything through.
func (s *Server) httpAuth(next http.Handler) http.Handler {
	if s.tls == nil {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.TLS == nil || len(r.TLS.PeerCertificates) == 0 {
			http.Error(w, "a client certificate is required", http.StatusUnauthorized)
			return
		}
		leaf := r.TLS.PeerCertificates[0]
		open := r.URL.Path == "/status" || r.URL.Path == "/healthz"
		if !open && !s.isAdmin(leaf.Subject.CommonName) && !slices.Contains(leaf.DNSNames, s.tls.role) {
			http.Error(w, fmt.Sprintf("permission denied: %s is not an admin of the cell", leaf.Subject.CommonName), http.StatusForbidden)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// httpScheme is how this cell's HTTP endpoints are reached.
func (s *Server) httpScheme() string {
	if s.tls != nil {
		return "https"
	}
	return "http"
}

// peerHTTPClient asks other servers for their /status: a connection per
// request, so no idle connection outlives a page; with TLS this server's
// certificate, the peer verified as a server of the cell.
func (s *Server) peerHTTPClient() *http.Client {
	t := &http.Transport{DisableKeepAlives: true}
	if s.tls != nil {
		t.TLSClientConfig = s.tls.clientConfig()
	}
	return &http.Client{Transport: t}
}

// isLoopback reports whether a listen address is on a loopback interface
// (127.0.0.0/8, ::1, localhost).
func isLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
