package e2e

// Who a TLS cell admits (issue 11, acceptance 1), on three real chubbyd
// processes with certificates from `chubbyd tls`: an expired client
// certificate is refused with a message that says so; a server that is not
// one — a client certificate, a server certificate of another CA, no
// gossip key, another gossip key — never becomes a member of the cell,
// which goes on serving; a true server joins.

import (
	"crypto/tls"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chubby-dev/chubby/testing/proc"
	"github.com/chubby-dev/chubby/testing/wait"
)

func TestTLSAdmission(t *testing.T) {
	p := proc.NewPKI(t, "local", []string{"n1", "n2", "n3", "n4", "nokey", "badkey"}, "alice")
	expiredCert(t, p, "old")
	other := proc.NewPKI(t, "local", []string{"foreign"})
	key, otherKey := proc.NewGossipKey(t), proc.NewGossipKey(t)
	c := proc.StartCell(t, 3, cellOptions(t, p, p, "alice", "-gossip-key-file", key))
	s := c.Servers()[0]
	master := c.Master(t)
	memberNames := func() []string {
		t.Helper()
		ms, err := master.Members(5 * time.Second)
		if err != nil {
			t.Fatalf("members: %v", err)
		}
		var names []string
		for _, m := range ms {
			names = append(names, m.Name)
		}
		return names
	}

	// 1. An expired client certificate: chubbysh refuses to use it, saying
	// it expired; the server's own verdict, read on a raw connection that
	// presents it anyway, says so too.
	r := s.Sh(t, append(append([]string{"-timeout", "3s"}, p.ShArgs("old")...), "whoami")...)
	t.Logf("chubbysh with an expired certificate: exit %d: %s", r.Code, strings.TrimSpace(r.Stderr))
	if r.Code == 0 || !strings.Contains(r.Stderr, "expired") {
		t.Errorf("chubbysh with an expired certificate: want a failure saying it expired: %s", r)
	}
	cfg := p.TLSConfig(t, "old", "server.local.chubby")
	conn, err := tls.Dial("tcp", s.RPCAddr, cfg)
	if err == nil {
		conn.SetDeadline(time.Now().Add(5 * time.Second))
		conn.Write([]byte{0}) // TLS 1.3: the server's verdict on our certificate comes with the first read
		_, err = conn.Read(make([]byte, 1))
		conn.Close()
	}
	if err == nil || !strings.Contains(err.Error(), "expired certificate") {
		t.Errorf("a raw TLS connection with an expired certificate: %v, want the server's expired certificate alert", err)
	}

	// 2. A client certificate as a server's: chubbyd refuses to start
	// with it, saying why.
	rogue := c.LaunchJoiner(t, "rogue", append(p.TLSArgs("alice"), "-gossip-key-file", key)...)
	wait.For(t, proc.ReadyTimeout, "chubbyd with a client certificate to exit", func() bool { return !rogue.Running(t) })
	if code, _ := rogue.ExitCode(t); code == 0 || !strings.Contains(rogue.Log(), "is not a server certificate of this cell") {
		t.Errorf("chubbyd with a client certificate as -tls-cert: exit %d, want non-zero and a message that it is not a server certificate:\n%s", code, rogue.Log())
	}

	// 3. A server certificate of another CA, with the gossip key: gossip
	// admits it, but the master checks its raft transport before adding it
	// and refuses it, saying why — it is never a member.
	foreign := c.LaunchJoiner(t, "foreign", append(other.TLSArgs("foreign"), "-gossip-key-file", key)...)
	wait.For(t, proc.ReadyTimeout, "the master refusing the foreign server", func() bool {
		l := master.Log()
		i := strings.Index(l, "not adding server")
		return i >= 0 && strings.Contains(l[i:], "foreign")
	})

	// 4. Servers with certificates of the cell, but no gossip key or
	// another key: gossip does not admit them.
	nokey := c.LaunchJoiner(t, "nokey", p.TLSArgs("nokey")...)
	badkey := c.LaunchJoiner(t, "badkey", append(p.TLSArgs("badkey"), "-gossip-key-file", otherKey)...)
	for _, j := range []*proc.Server{nokey, badkey} {
		wait.For(t, proc.ReadyTimeout, j.NodeID+" trying to join", func() bool { return strings.Contains(j.Log(), "join failed") })
	}

	// None becomes a member while the master reconciles (every second),
	// and the cell serves throughout.
	wait.Never(t, 6*time.Second, "a refused server in the cell's members", func() bool {
		names := memberNames()
		return len(names) != 3
	})
	for _, j := range []*proc.Server{foreign, nokey, badkey} {
		if !j.Running(t) {
			t.Errorf("%s exited: the test meant it to keep asking to join:\n%s", j.NodeID, j.Log())
		}
	}
	wantOK(t, s.Sh(t, append(p.ShArgs("alice"), "write", p0("admission"), "still serving")...))

	// A true server (certificate and key of the cell) joins, as a control
	// that the wait above was long enough to see one; the others still
	// are not members, as chubbysh members shows.
	n4 := c.AddServer(t)
	wait.For(t, proc.ReadyTimeout, "n4 in the members", func() bool { return slices.Contains(memberNames(), n4.NodeID) })
	out := wantOK(t, s.Sh(t, append(p.ShArgs("alice"), "members")...))
	for _, n := range []string{"n1", "n2", "n3", "n4"} {
		if !strings.Contains(out, n) {
			t.Errorf("members lack %s:\n%s", n, out)
		}
	}
	for _, n := range []string{"rogue", "foreign", "nokey", "badkey"} {
		if strings.Contains(out, n) {
			t.Errorf("members list %s:\n%s", n, out)
		}
	}
	if got := wantOK(t, s.Sh(t, append(p.ShArgs("alice"), "cat", p0("admission"))...)); got != "still serving" {
		t.Fatalf("cat = %q", got)
	}
}
