package e2e

// chubbyd's built-in CA from outside: the commands write a CA, server and
// client certificates that make a mutual TLS handshake, refuse to
// overwrite, and print a gossip key.

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

	"github.com/chubby-dev/chubby/testing/proc"
)

func TestChubbydTLSCommands(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	run := func(code int, args ...string) *proc.Result {
		t.Helper()
		r := proc.RunChubbyd(t, 15*time.Second, args...)
		if r.Code != code {
			t.Fatalf("chubbyd %s: exit %d, want %d\n%s", strings.Join(args, " "), r.Code, code, r)
		}
		return r
	}
	run(0, "tls", "ca", "create", "-dir", dir, "-cell", "prod")
	run(1, "tls", "ca", "create", "-dir", dir, "-cell", "prod") // not overwritten
	run(0, "tls", "cert", "create", "-dir", dir, "-name", "n1", "-server", "-ip", "10.1.2.3")
	run(0, "tls", "cert", "create", "-dir", dir, "-name", "alice")
	run(1, "tls", "cert", "create", "-dir", dir, "-name", "alice")
	run(2, "tls", "cert", "create", "-dir", dir)
	run(2, "tls", "cert", "create", "-dir", dir, "-name", "x", "-ip", "not-an-ip")
	run(1, "tls", "cert", "create", "-dir", t.TempDir(), "-name", "orphan")
	run(2, "tls", "frobnicate")
	key := strings.TrimSpace(run(0, "keygen").Stdout)
	if b, err := base64.StdEncoding.DecodeString(key); err != nil || len(b) != 32 {
		t.Fatalf("keygen printed %q", key)
	}

	load := func(name string) tls.Certificate {
		c, err := tls.LoadX509KeyPair(filepath.Join(dir, name+".pem"), filepath.Join(dir, name+"-key.pem"))
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	caPEM, err := os.ReadFile(filepath.Join(dir, "ca.pem"))
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(caPEM)
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{load("n1")}, ClientCAs: roots,
		ClientAuth: tls.RequireAndVerifyClientCert})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	principal := make(chan string, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			principal <- "accept: " + err.Error()
			return
		}
		defer c.Close()
		tc := c.(*tls.Conn)
		if err := tc.Handshake(); err != nil {
			principal <- "handshake: " + err.Error()
			return
		}
		principal <- tc.ConnectionState().PeerCertificates[0].Subject.CommonName
	}()
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", ln.Addr().String(),
		&tls.Config{Certificates: []tls.Certificate{load("alice")}, RootCAs: roots, ServerName: "server.prod.chubby"})
	if err != nil {
		t.Fatalf("client handshake: %v", err)
	}
	defer conn.Close()
	if p := <-principal; p != "alice" {
		t.Fatalf("server saw principal %q, want alice", p)
	}
}
