package server

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"slices"
	"sync"
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
	// mu serialises reloads (SIGHUP and the file watch).
	mu sync.Mutex
}

type tlsState struct {
	cert  tls.Certificate
	roots *x509.CertPool
	// sum is the digest of the three files' contents this state was made
	// from: the file watch reloads when they no longer match it.
	sum [sha256.Size]byte
}

func loadTLS(files TLSFiles, cell string) (*tlsMaterial, error) {
	m := &tlsMaterial{files: files, role: wire.ServerName(cell)}
	_, err := m.reload()
	return m, err
}

// tlsFiles are the contents of the CA, certificate and key files, read
// together.
type tlsFiles struct{ ca, cert, key []byte }

// read reads the three files and returns their contents and digest.
func (m *tlsMaterial) read() (tlsFiles, [sha256.Size]byte, error) {
	var f tlsFiles
	var err error
	if f.ca, err = os.ReadFile(m.files.CA); err != nil {
		return f, [sha256.Size]byte{}, fmt.Errorf("tls: CA: %w", err)
	}
	if f.cert, err = os.ReadFile(m.files.Cert); err != nil {
		return f, [sha256.Size]byte{}, fmt.Errorf("tls: certificate: %w", err)
	}
	if f.key, err = os.ReadFile(m.files.Key); err != nil {
		return f, [sha256.Size]byte{}, fmt.Errorf("tls: key: %w", err)
	}
	h := sha256.New()
	for _, b := range [][]byte{f.ca, f.cert, f.key} {
		var n [8]byte
		binary.BigEndian.PutUint64(n[:], uint64(len(b)))
		h.Write(n[:])
		h.Write(b)
	}
	var sum [sha256.Size]byte
	h.Sum(sum[:0])
	return f, sum, nil
}

// reload reads the files again and, if they make a server certificate of
// this cell and a CA, puts them in use; it returns the new certificate.
// Otherwise the material in use stays.
func (m *tlsMaterial) reload() (*x509.Certificate, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	f, sum, err := m.read()
	if err != nil {
		return nil, err
	}
	return m.install(f, sum)
}

func (m *tlsMaterial) install(f tlsFiles, sum [sha256.Size]byte) (*x509.Certificate, error) {
	cert, err := tls.X509KeyPair(f.cert, f.key)
	if err != nil {
		return nil, fmt.Errorf("tls: certificate %s, key %s: %w", m.files.Cert, m.files.Key, err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(f.ca) {
		return nil, fmt.Errorf("tls: CA %s holds no PEM certificate", m.files.CA)
	}
	leaf, err := x509.ParseCertificate(cert.Certificate[0])
	if err != nil {
		return nil, fmt.Errorf("tls: certificate %s: %w", m.files.Cert, err)
	}
	if !slices.Contains(leaf.DNSNames, m.role) {
		return nil, fmt.Errorf("tls: certificate %s is not a server certificate of this cell: it does not name %s (chubbyd tls cert create -server)", m.files.Cert, m.role)
	}
	m.cur.Store(&tlsState{cert: cert, roots: roots, sum: sum})
	return leaf, nil
}

// changed reads the files and reports whether their contents differ from
// those in use; it returns the digest read (and an error if one did not
// read).
func (m *tlsMaterial) changed() (bool, [sha256.Size]byte, error) {
	_, sum, err := m.read()
	if err != nil {
		return false, sum, err
	}
	return sum != m.cur.Load().sum, sum, nil
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

// ReloadTLS reads the TLS files again (chubbyd does on SIGHUP; the file
// watch, Config.TLSPollInterval, when they change): new handshakes —
// client connections, raft connections, HTTPS — use the new certificate,
// key and CA; connections made before go on, and so do their sessions.
// Files that do not load (or a certificate that is not a server
// certificate of this cell) leave the old material in use. Without TLS it
// does nothing.
func (s *Server) ReloadTLS() error {
	if s.tls == nil {
		return nil
	}
	leaf, err := s.tls.reload()
	if err != nil {
		return err
	}
	s.log.Info("TLS files reloaded", "cert", s.tls.files.Cert, "serial", leaf.SerialNumber.Text(16), "not_after", leaf.NotAfter)
	return nil
}

// watchTLSFiles checks the TLS files every interval and reloads them
// (ReloadTLS) when their contents differ from those in use — written in
// place or renamed into place. Files that do not load (half written, a key
// that does not match the certificate yet) are logged once and the old
// material kept; the next change is tried again.
func (s *Server) watchTLSFiles(interval time.Duration) {
	defer s.wg.Done()
	t := time.NewTicker(interval)
	defer t.Stop()
	var failed [sha256.Size]byte // the contents that last failed to load
	lastErr := ""
	for {
		select {
		case <-s.shutdown:
			return
		case <-t.C:
		}
		changed, sum, err := s.tls.changed()
		if err == nil && (!changed || sum == failed) {
			lastErr = ""
			continue
		}
		if err == nil {
			err = s.ReloadTLS()
		}
		if err != nil {
			if err.Error() != lastErr {
				s.log.Error("TLS files changed but do not load; the ones loaded before stay in use", "err", err)
			}
			lastErr, failed = err.Error(), sum
		}
	}
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

// verifyRaftPeer is the master's check of a server that gossip reports
// before it joins the raft configuration: a TLS handshake with the raft
// transport at addr (or the -raft-route for id) must show a certificate
// from the cell's CA carrying the server role name. Gossip admits anyone
// with the key; raft only servers.
func (s *Server) verifyRaftPeer(id, addr string) error {
	if r, ok := s.cfg.RaftRoutes[id]; ok {
		addr = r
	}
	d := &tls.Dialer{NetDialer: &net.Dialer{Timeout: 5 * time.Second}, Config: s.tls.clientConfig()}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	nc, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return fmt.Errorf("TLS handshake with its raft transport %s: %w", addr, err)
	}
	return nc.Close()
}

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
