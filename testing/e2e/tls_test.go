package e2e

// A three-server cell with TLS on every RPC and raft link and encrypted
// gossip, set up from nothing with chubbyd's own CA (issue 11, slice):
// clients with a certificate from the cell's CA work and are who their
// certificate says; no certificate, another CA's, plaintext, a client
// certificate on the raft port, and another principal naming a session
// (even with its secret) are refused. Without TLS chubbyd refuses to
// listen beyond loopback unless -insecure.

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/chubby-dev/chubby/fs"
	"github.com/chubby-dev/chubby/internal/devca"
	"github.com/chubby-dev/chubby/testing/proc"
	"github.com/chubby-dev/chubby/testing/wait"
	"github.com/chubby-dev/chubby/wire"
)

// expiredCert issues a client certificate NAME from p's CA that expired a
// day ago (`chubbyd tls cert create` issues only valid ones).
func expiredCert(t *testing.T, p proc.PKI, name string) {
	t.Helper()
	now := time.Now()
	if _, _, err := devca.CreateCert(p.Dir, devca.CertRequest{Name: name, NotBefore: now.Add(-48 * time.Hour), NotAfter: now.Add(-24 * time.Hour)}); err != nil {
		t.Fatal(err)
	}
}

// cellOptions are the options of a TLS cell whose servers n1, n2, ...
// use their certificates from servers, and whose harness and chubbysh
// readiness checks are client's (an admin: -acl-admins client), with
// extra flags for every server.
func cellOptions(t *testing.T, p, servers proc.PKI, client string, extra ...string) proc.CellOptions {
	return proc.CellOptions{
		ClientTLS: p.TLSConfig(t, client, "server.local.chubby"),
		ShEnv:     p.ShEnv(client),
		ExtraArgs: append([]string{"-log-level", "info", "-acl-admins", client}, extra...),
		ServerArgs: func(s *proc.Server, _ []*proc.Server) []string {
			return servers.TLSArgs(s.NodeID)
		},
	}
}

func TestTLSCell(t *testing.T) {
	p := proc.NewPKI(t, "local", []string{"n1", "n2", "n3"}, "alice", "bob")
	other := proc.NewPKI(t, "local", nil, "eve")
	keyFile := proc.NewGossipKey(t)
	c := proc.StartCell(t, 3, proc.CellOptions{
		ClientTLS: p.TLSConfig(t, "alice", "server.local.chubby"),
		ShEnv:     p.ShEnv("alice"),
		ExtraArgs: []string{"-gossip-key-file", keyFile, "-log-level", "info", "-acl-admins", "alice"},
		ServerArgs: func(s *proc.Server, _ []*proc.Server) []string {
			return p.TLSArgs(s.NodeID)
		},
	})
	s := c.Servers()[0]
	sh := func(who string, args ...string) *proc.Result {
		return s.Sh(t, append(p.ShArgs(who), args...)...)
	}

	// A client of the cell's CA is its certificate's principal, and works.
	if got := wantOK(t, sh("alice", "whoami")); got != "alice" {
		t.Fatalf("whoami = %q, want alice", got)
	}
	wantOK(t, sh("alice", "write", p0("tls-file"), "over tls"))
	// The root's ACLs are the admins' (alice): she lets everyone read the file.
	wantOK(t, sh("alice", "write", p0("acl/everyone"), "*"))
	wantOK(t, sh("alice", "acl", "set", p0("tls-file"), "-read", "everyone"))
	if got := wantOK(t, sh("bob", "cat", p0("tls-file"))); got != "over tls" {
		t.Fatalf("cat = %q", got)
	}
	seq := parseSeq(t, wantOK(t, sh("alice", "lock", p0("tls-lock"), "--", "sh", "-c", "echo $CHUBBY_SEQUENCER")))
	if seq.path != p0("tls-lock") {
		t.Fatalf("sequencer %q", seq.text)
	}
	members := wantOK(t, sh("bob", "members"))
	for _, n := range []string{"n1", "n2", "n3"} {
		if !strings.Contains(members, n) {
			t.Fatalf("members (gossip encrypted) lack %s:\n%s", n, members)
		}
	}

	// Refused: no certificate, another CA's certificate, plaintext.
	if r := s.Sh(t, "-timeout", "2s", "whoami"); r.Code == 0 {
		t.Errorf("a client without TLS was served: %s", r)
	}
	if r := s.Sh(t, append(append([]string{"-timeout", "2s"}, other.ShArgs("eve")...), "whoami")...); r.Code == 0 {
		t.Errorf("a client certificate of another CA was served: %s", r)
	}
	if _, err := proc.Hello(s.RPCAddr, 2*time.Second); err == nil {
		t.Errorf("a plaintext Hello on the TLS port was answered")
	}
	if r := s.Sh(t, "-ca", p.CA(), "-cert", p.Cert("alice"), "whoami"); r.Code != 2 {
		t.Errorf("-cert without -key: exit %d, want 2: %s", r.Code, r)
	}

	// A client certificate cannot speak raft: the server refuses it.
	rc, err := tls.Dial("tcp", s.RaftAddr, p.TLSConfig(t, "alice", "server.local.chubby"))
	if err == nil {
		rc.SetDeadline(time.Now().Add(5 * time.Second))
		rc.Write([]byte{0}) // TLS 1.3: the server's verdict on our certificate comes with the first read
		_, err = rc.Read(make([]byte, 1))
		rc.Close()
	}
	if err == nil {
		t.Errorf("the raft port accepted a client certificate")
	}

	// Operator calls are the admins' (-acl-admins alice): bob may not take a
	// backup or remove a server; alice may take one.
	backup := filepath.Join(t.TempDir(), "cell.backup")
	for _, args := range [][]string{{"snapshot", "save", backup}, {"remove-server", "n3"}} {
		r := sh("bob", args...)
		if r.Code != 1 || !strings.Contains(r.Stderr, "permission denied") || !strings.Contains(r.Stderr, "bob") {
			t.Errorf("bob %v: want exit 1, permission denied naming bob: %s", args, r)
		}
	}
	wantOK(t, sh("alice", "snapshot", "save", backup))
	// The HTTP endpoint is HTTPS with client certificates: the status page
	// and metrics for admins, /status for any certificate of the CA.
	get := func(who, path string) (int, string, error) {
		var cfg *tls.Config
		if who != "" {
			cfg = p.TLSConfig(t, who, "server.local.chubby")
		} else {
			cfg = p.TLSConfig(t, "alice", "server.local.chubby")
			cfg.Certificates = nil
		}
		hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: cfg}}
		resp, err := hc.Get("https://" + s.HTTPAddr + path)
		if err != nil {
			return 0, "", err
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b), nil
	}
	if code, body, err := get("alice", "/"); err != nil || code != 200 || !strings.Contains(body, "master") {
		t.Errorf("status page for the admin: %d %v", code, err)
	}
	if code, _, err := get("alice", "/metrics"); err != nil || code != 200 {
		t.Errorf("metrics for the admin: %d %v", code, err)
	}
	if code, body, err := get("bob", "/"); err != nil || code != http.StatusForbidden || !strings.Contains(body, "bob") {
		t.Errorf("status page for bob: %d %q %v, want 403 naming bob", code, body, err)
	}
	if code, _, err := get("bob", "/status"); err != nil || code != 200 {
		t.Errorf("/status for bob: %d %v", code, err)
	}
	if code, _, err := get("", "/status"); err == nil {
		t.Errorf("/status without a client certificate answered %d", code)
	}
	if resp, err := (&http.Client{Timeout: 5 * time.Second}).Get("http://" + s.HTTPAddr + "/status"); err == nil {
		resp.Body.Close()
		if resp.StatusCode == 200 {
			t.Errorf("plain http /status answered 200 on a TLS cell")
		}
	}

	// A session belongs to its principal: bob, with alice's session id
	// and even her secret, is refused.
	master := c.Master(t)
	ra, err := proc.DialRawTLS(master.RPCAddr, 5*time.Second, p.TLSConfig(t, "alice", ""))
	if err != nil {
		t.Fatal(err)
	}
	defer ra.Close()
	if _, err := ra.Hello(5 * time.Second); err != nil {
		t.Fatal(err)
	}
	if err := ra.CreateSession(10*time.Second, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	rb, err := proc.DialRawTLS(master.RPCAddr, 5*time.Second, p.TLSConfig(t, "bob", ""))
	if err != nil {
		t.Fatal(err)
	}
	defer rb.Close()
	if _, err := rb.Hello(5 * time.Second); err != nil {
		t.Fatal(err)
	}
	rb.Session, rb.Secret = ra.Session, ra.Secret
	err = rb.Call(wire.MCloseSession, wire.Empty{}, nil, 5*time.Second)
	if !errors.Is(err, fs.ErrPermission) || !strings.Contains(err.Error(), "belongs to alice") {
		t.Fatalf("bob ending alice's session with her secret: %v, want permission_denied naming alice", err)
	}
	if err := ra.Call(wire.MGetStat, wire.NodeArgs{Path: p0("tls-file")}, nil, 5*time.Second); err != nil {
		t.Fatalf("alice's own call after bob's attempt: %v", err)
	}
}

func p0(name string) string { return p(name) }

// TestNoTLSStaysOnLoopback: without TLS chubbyd refuses a non-loopback
// address (exit 2, a message that says what to do); -insecure lets it
// start, with a warning.
func TestNoTLSStaysOnLoopback(t *testing.T) {
	t.Parallel()
	r := proc.RunChubbyd(t, 15*time.Second, "-node-id", "x", "-data-dir", filepath.Join(t.TempDir(), "d"), "-rpc-addr", "0.0.0.0:0",
		"-raft-addr", "127.0.0.1:0", "-gossip-addr", "127.0.0.1:0", "-http-addr", "")
	if r.Code != 2 || !strings.Contains(r.Stderr, "not a loopback address") || !strings.Contains(r.Stderr, "-insecure") {
		t.Fatalf("chubbyd on 0.0.0.0 without TLS: %s", r)
	}
	s := proc.StartServer(t, proc.Options{ExtraArgs: []string{"-insecure"}, LogLevel: "info"})
	if !strings.Contains(s.Log(), "serving without TLS (-insecure)") {
		t.Errorf("no warning for -insecure in the log")
	}
}

// TestTLSReload: SIGHUP makes every server use new TLS files — a new
// server certificate from the same CA, then a new CA (the servers trust a
// bundle of old and new; their certificates come from the new one) —
// while a session that holds a lock across both reloads keeps it, and
// clients of either CA connect afterwards.
func TestTLSReload(t *testing.T) {
	p := proc.NewPKI(t, "local", []string{"n1", "n2", "n3", "n1-r", "n2-r", "n3-r"}, "alice")
	q := proc.NewPKI(t, "local", []string{"n1", "n2", "n3"}, "carol")
	live := t.TempDir() // the files the servers are started with, replaced below
	put := func(dst, src string) {
		t.Helper()
		b, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(live, dst), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	put("ca.pem", p.CA())
	for _, n := range []string{"n1", "n2", "n3"} {
		put(n+".pem", p.Cert(n))
		put(n+"-key.pem", p.Key(n))
	}
	c := proc.StartCell(t, 3, proc.CellOptions{
		ClientTLS: p.TLSConfig(t, "alice", "server.local.chubby"),
		ShEnv:     p.ShEnv("alice"),
		ExtraArgs: []string{"-log-level", "info", "-acl-admins", "alice"},
		ServerArgs: func(s *proc.Server, _ []*proc.Server) []string {
			return []string{"-tls-ca", filepath.Join(live, "ca.pem"), "-tls-cert", filepath.Join(live, s.NodeID+".pem"),
				"-tls-key", filepath.Join(live, s.NodeID+"-key.pem")}
		},
	})
	s := c.Servers()[0]
	holder := s.StartSh(t, append(p.ShArgs("alice"), "lock", p0("reload-lock"))...)
	seq := parseSeq(t, holder.NextLine(t, 15*time.Second).Text)
	// carol checks the sequencer at the end: the admin (alice) lets every
	// principal read the lock's node.
	wantOK(t, s.Sh(t, append(p.ShArgs("alice"), "write", p0("acl/everyone"), "*")...))
	wantOK(t, s.Sh(t, append(p.ShArgs("alice"), "acl", "set", p0("reload-lock"), "-read", "everyone")...))
	// serial is the serial of the certificate srv serves to a client
	// trusting roots; a handshake that fails (srv has not reloaded yet: a
	// SIGHUP is handled asynchronously) is logged and gives "".
	serial := func(srv *proc.Server, roots proc.PKI, who string) string {
		t.Helper()
		conn, err := tls.Dial("tcp", srv.RPCAddr, roots.TLSConfig(t, who, "server.local.chubby"))
		if err != nil {
			t.Logf("TLS to %s: %v", srv.NodeID, err)
			return ""
		}
		defer conn.Close()
		return conn.ConnectionState().PeerCertificates[0].SerialNumber.String()
	}
	certSerial := func(path string) string {
		t.Helper()
		c, err := tls.LoadX509KeyPair(path, strings.Replace(path, ".pem", "-key.pem", 1))
		if err != nil {
			t.Fatal(err)
		}
		leaf, _ := x509.ParseCertificate(c.Certificate[0])
		return leaf.SerialNumber.String()
	}
	hupAll := func() {
		t.Helper()
		for _, srv := range c.Servers() {
			if err := syscall.Kill(srv.PID(t), syscall.SIGHUP); err != nil {
				t.Fatal(err)
			}
		}
	}

	// A new certificate from the same CA.
	for _, n := range []string{"n1", "n2", "n3"} {
		put(n+".pem", p.Cert(n+"-r"))
		put(n+"-key.pem", p.Key(n+"-r"))
	}
	hupAll()
	for _, srv := range c.Servers() {
		want := certSerial(p.Cert(srv.NodeID + "-r"))
		wait.For(t, 10*time.Second, srv.NodeID+" serving its new certificate", func() bool { return serial(srv, p, "alice") == want })
	}
	wantOK(t, s.Sh(t, append(p.ShArgs("alice"), "write", p0("after-reload"), "1")...))

	// A new CA: the servers trust both, and their certificates are the new
	// CA's. The holder's session, on a connection made before, goes on.
	bundle := append(must(os.ReadFile(p.CA())), must(os.ReadFile(q.CA()))...)
	if err := os.WriteFile(filepath.Join(live, "ca.pem"), bundle, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"n1", "n2", "n3"} {
		put(n+".pem", q.Cert(n))
		put(n+"-key.pem", q.Key(n))
	}
	hupAll()
	for _, srv := range c.Servers() {
		want := certSerial(q.Cert(srv.NodeID))
		wait.For(t, 10*time.Second, srv.NodeID+" serving the new CA's certificate", func() bool { return serial(srv, q, "carol") == want })
	}
	// carol (new CA) is served; alice (old CA) too, trusting the bundle.
	if got := wantOK(t, s.Sh(t, "-ca", q.CA(), "-cert", q.Cert("carol"), "-key", q.Key("carol"), "whoami")); got != "carol" {
		t.Fatalf("whoami = %q, want carol", got)
	}
	bundleFile := filepath.Join(t.TempDir(), "bundle.pem")
	if err := os.WriteFile(bundleFile, bundle, 0o600); err != nil {
		t.Fatal(err)
	}
	if got := wantOK(t, s.Sh(t, "-ca", bundleFile, "-cert", p.Cert("alice"), "-key", p.Key("alice"), "whoami")); got != "alice" {
		t.Fatalf("whoami = %q, want alice", got)
	}
	// The session that held its lock through both reloads still holds it.
	if holder.Exited() {
		t.Fatalf("the lock holder exited during the reloads: %s", holder.Stderr())
	}
	wantOK(t, s.Sh(t, "-ca", q.CA(), "-cert", q.Cert("carol"), "-key", q.Key("carol"), "checkseq", seq.text))
}

func must(b []byte, err error) []byte {
	if err != nil {
		panic(err)
	}
	return b
}

// TestTLSReloadOnFileChange: chubbyd watches its TLS files
// (-tls-poll-interval): a certificate and key renamed into place, without
// SIGHUP, are served on new handshakes while a session made before keeps
// its lock; a half-written certificate is logged and the one in use kept.
func TestTLSReloadOnFileChange(t *testing.T) {
	p := proc.NewPKI(t, "local", []string{"n1", "n2", "n3", "n1-r", "n2-r", "n3-r"}, "alice")
	live := proc.PKI{Dir: t.TempDir()} // the servers' files, replaced below
	put := func(dst, src string) {     // written aside, renamed into place
		t.Helper()
		tmp := filepath.Join(live.Dir, ".tmp-"+filepath.Base(dst))
		if err := os.WriteFile(tmp, must(os.ReadFile(src)), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, dst); err != nil {
			t.Fatal(err)
		}
	}
	put(live.CA(), p.CA())
	for _, n := range []string{"n1", "n2", "n3"} {
		put(live.Cert(n), p.Cert(n))
		put(live.Key(n), p.Key(n))
	}
	c := proc.StartCell(t, 3, cellOptions(t, p, live, "alice", "-tls-poll-interval", "200ms"))
	s := c.Servers()[0]
	holder := s.StartSh(t, append(p.ShArgs("alice"), "lock", p0("watch-lock"))...)
	seq := parseSeq(t, holder.NextLine(t, 15*time.Second).Text)
	served := func(srv *proc.Server) *x509.Certificate {
		t.Helper()
		conn, err := tls.Dial("tcp", srv.RPCAddr, p.TLSConfig(t, "alice", "server.local.chubby"))
		if err != nil {
			t.Fatalf("TLS to %s: %v", srv.NodeID, err)
		}
		defer conn.Close()
		return conn.ConnectionState().PeerCertificates[0]
	}
	leaf := func(path string) *x509.Certificate {
		t.Helper()
		c, err := tls.LoadX509KeyPair(path, strings.Replace(path, ".pem", "-key.pem", 1))
		if err != nil {
			t.Fatal(err)
		}
		l, _ := x509.ParseCertificate(c.Certificate[0])
		return l
	}

	// New certificates and keys renamed into place, no signal: every
	// server serves its new certificate (serial and NotBefore) on new
	// handshakes.
	for _, n := range []string{"n1", "n2", "n3"} {
		put(live.Key(n), p.Key(n+"-r"))
		put(live.Cert(n), p.Cert(n+"-r"))
	}
	for _, srv := range c.Servers() {
		want := leaf(p.Cert(srv.NodeID + "-r"))
		wait.For(t, 20*time.Second, srv.NodeID+" serving its new certificate without SIGHUP", func() bool {
			got := served(srv)
			return got.SerialNumber.Cmp(want.SerialNumber) == 0 && got.NotBefore.Equal(want.NotBefore)
		})
		if !strings.Contains(srv.Log(), "TLS files reloaded") {
			t.Errorf("%s: no reload in the log", srv.NodeID)
		}
	}
	wantOK(t, s.Sh(t, append(p.ShArgs("alice"), "write", p0("after-watch-reload"), "1")...))

	// A half-written certificate (written in place, cut short): logged, and
	// the certificate in use stays.
	n1 := c.Server(t, "n1")
	inUse := leaf(p.Cert("n1-r"))
	full := must(os.ReadFile(p.Cert("n1")))
	const notLoaded = "TLS files changed but do not load" // also logged if a poll fell between the key's rename and the certificate's
	logged := strings.Count(n1.Log(), notLoaded)
	if err := os.WriteFile(live.Cert("n1"), full[:len(full)/2], 0o600); err != nil {
		t.Fatal(err)
	}
	wait.For(t, 20*time.Second, "n1 logging the half-written file", func() bool {
		return strings.Count(n1.Log(), notLoaded) > logged
	})
	if got := served(n1); got.SerialNumber.Cmp(inUse.SerialNumber) != 0 {
		t.Fatalf("n1 serves serial %v after a half-written file, want the one in use %v", got.SerialNumber, inUse.SerialNumber)
	}
	// Once it is whole (the key too: the old pair), it is reloaded.
	put(live.Key("n1"), p.Key("n1"))
	put(live.Cert("n1"), p.Cert("n1"))
	want := leaf(p.Cert("n1"))
	wait.For(t, 20*time.Second, "n1 serving the whole file", func() bool { return served(n1).SerialNumber.Cmp(want.SerialNumber) == 0 })

	// The session made before every reload still holds its lock.
	if holder.Exited() {
		t.Fatalf("the lock holder exited during the reloads: %s", holder.Stderr())
	}
	if got := wantOK(t, s.Sh(t, append(p.ShArgs("alice"), "checkseq", seq.text)...)); got != "valid" {
		t.Fatalf("checkseq = %q", got)
	}
}
