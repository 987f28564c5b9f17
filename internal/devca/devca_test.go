package devca

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chubby-dev/chubby/wire"
)

// pool is the CA of dir as a certificate pool.
func pool(t *testing.T, dir string) *x509.CertPool {
	t.Helper()
	ca, _, err := LoadCA(dir)
	if err != nil {
		t.Fatal(err)
	}
	p := x509.NewCertPool()
	p.AddCert(ca)
	return p
}

func pair(t *testing.T, cert, key string) tls.Certificate {
	t.Helper()
	c, err := tls.LoadX509KeyPair(cert, key)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// handshake runs a mutual-TLS handshake over a pipe: the server requires a
// client certificate from roots; the client verifies the server as
// wire.ServerName(cell). It returns the server's and the client's errors and
// the client's principal as the server saw it.
func handshake(t *testing.T, roots *x509.CertPool, srv, cli tls.Certificate, cell string) (srvErr, cliErr error, principal string) {
	t.Helper()
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	sc := tls.Server(a, &tls.Config{Certificates: []tls.Certificate{srv}, ClientCAs: roots, ClientAuth: tls.RequireAndVerifyClientCert, MinVersion: tls.VersionTLS13})
	cc := tls.Client(b, &tls.Config{Certificates: []tls.Certificate{cli}, RootCAs: roots, ServerName: wire.ServerName(cell), MinVersion: tls.VersionTLS13})
	done := make(chan error, 1)
	go func() {
		a.SetDeadline(time.Now().Add(5 * time.Second))
		err := sc.Handshake()
		if err == nil {
			principal = sc.ConnectionState().PeerCertificates[0].Subject.CommonName
		}
		if err != nil {
			a.Close() // the client's handshake must not wait for a server that gave up
		}
		done <- err
	}()
	b.SetDeadline(time.Now().Add(5 * time.Second))
	cliErr = cc.Handshake()
	if cliErr != nil {
		b.Close()
	}
	srvErr = <-done
	return srvErr, cliErr, principal
}

// TestIssuedCertificatesHandshake: certificates from one CA make a mutual
// TLS handshake whose principal is the client's common name; a server
// certificate carries the role name and the cell recorded in the CA.
func TestIssuedCertificatesHandshake(t *testing.T) {
	dir := t.TempDir()
	if err := CreateCA(dir, "prod", 30); err != nil {
		t.Fatal(err)
	}
	srvCert, srvKey, err := CreateCert(dir, CertRequest{Name: "n1", Server: true, IPs: []net.IP{net.ParseIP("10.0.0.1")}, Days: 30})
	if err != nil {
		t.Fatal(err)
	}
	cliCert, cliKey, err := CreateCert(dir, CertRequest{Name: "alice", Days: 30})
	if err != nil {
		t.Fatal(err)
	}
	srv := pair(t, srvCert, srvKey)
	leaf, _ := x509.ParseCertificate(srv.Certificate[0])
	if leaf.DNSNames[0] != "server.prod.chubby" || !leaf.IPAddresses[1].Equal(net.ParseIP("10.0.0.1")) {
		t.Fatalf("server certificate names %v %v", leaf.DNSNames, leaf.IPAddresses)
	}
	srvErr, cliErr, principal := handshake(t, pool(t, dir), srv, pair(t, cliCert, cliKey), "prod")
	if srvErr != nil || cliErr != nil || principal != "alice" {
		t.Fatalf("handshake: server %v, client %v, principal %q", srvErr, cliErr, principal)
	}
	for _, f := range []string{CAKeyFile, "n1-key.pem", "alice-key.pem"} {
		st, err := os.Stat(filepath.Join(dir, f))
		if err != nil || st.Mode().Perm() != 0o600 {
			t.Errorf("%s: mode %v, %v; want 0600", f, st.Mode().Perm(), err)
		}
	}
}

// TestClientCertificateIsNoServer: a client certificate cannot serve (a
// client verifying the server role refuses it), nor can it be issued with
// the role name; a certificate from another CA is refused both ways.
func TestClientCertificateIsNoServer(t *testing.T) {
	dir, other := t.TempDir(), t.TempDir()
	for _, d := range []string{dir, other} {
		if err := CreateCA(d, "prod", 30); err != nil {
			t.Fatal(err)
		}
	}
	cli := func(d, name string) tls.Certificate {
		c, k, err := CreateCert(d, CertRequest{Name: name, Days: 30})
		if err != nil {
			t.Fatal(err)
		}
		return pair(t, c, k)
	}
	srvC, srvK, err := CreateCert(dir, CertRequest{Name: "n1", Server: true, Days: 30})
	if err != nil {
		t.Fatal(err)
	}
	srv := pair(t, srvC, srvK)
	mallory := cli(dir, "mallory")
	// mallory's certificate as a server's: the client refuses it.
	if _, cliErr, _ := handshake(t, pool(t, dir), mallory, cli(dir, "alice"), "prod"); cliErr == nil {
		t.Fatal("a client certificate passed as a server")
	}
	if _, _, err := CreateCert(dir, CertRequest{Name: "sneaky", DNS: []string{"server.prod.chubby"}, Days: 30}); err == nil {
		t.Fatal("a client certificate was issued with the server role name")
	}
	// A client certificate from another CA: the server refuses it.
	if srvErr, _, _ := handshake(t, pool(t, dir), srv, cli(other, "eve"), "prod"); srvErr == nil {
		t.Fatal("the server accepted a client certificate from another CA")
	}
	// The right CA but another cell's role name: the client refuses.
	if _, cliErr, _ := handshake(t, pool(t, dir), srv, mallory, "staging"); cliErr == nil {
		t.Fatal("a server certificate of cell prod passed for cell staging")
	}
}

// TestNothingOverwrittenAndBadInput: existing files are kept; bad names,
// days and a missing CA are clear errors.
func TestNothingOverwrittenAndBadInput(t *testing.T) {
	dir := t.TempDir()
	if err := CreateCA(dir, "local", 1); err != nil {
		t.Fatal(err)
	}
	before, _ := os.ReadFile(filepath.Join(dir, CAFile))
	if err := CreateCA(dir, "local", 1); err == nil || !strings.Contains(err.Error(), "not overwriting") {
		t.Fatalf("second CreateCA: %v", err)
	}
	if after, _ := os.ReadFile(filepath.Join(dir, CAFile)); string(after) != string(before) {
		t.Fatal("the CA was overwritten")
	}
	if _, _, err := CreateCert(dir, CertRequest{Name: "a", Days: 1}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := CreateCert(dir, CertRequest{Name: "a", Days: 1}); err == nil {
		t.Fatal("a certificate was issued over an existing one")
	}
	for _, r := range []CertRequest{{Name: "", Days: 1}, {Name: "../x", Days: 1}, {Name: "b", Days: 0}} {
		if _, _, err := CreateCert(dir, r); err == nil {
			t.Errorf("CreateCert(%+v) succeeded", r)
		}
	}
	if _, _, err := CreateCert(t.TempDir(), CertRequest{Name: "c", Days: 1}); err == nil || !strings.Contains(err.Error(), "no CA") {
		t.Errorf("CreateCert without a CA: %v", err)
	}
	if err := CreateCA(t.TempDir(), "bad cell", 1); err == nil {
		t.Error("a cell name with a space was accepted")
	}
	k, err := Keygen()
	if err != nil {
		t.Fatal(err)
	}
	if b, err := base64.StdEncoding.DecodeString(k); err != nil || len(b) != 32 {
		t.Fatalf("Keygen = %q: %d bytes, %v", k, len(b), err)
	}
}
