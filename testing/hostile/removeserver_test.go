package hostile

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chubby-dev/chubby/testing/cell"
	"github.com/chubby-dev/chubby/testing/proc"
	"github.com/chubby-dev/chubby/wire"
)

// removingLine is what a master logs when it goes ahead with a removal.
const removingLine = "removing server for good"

// TestRemoveServerGuarded replays issue 17, finding 6 (any client could
// remove servers: two calls shrank a three-voter cell to one, and the log
// said "removing" before any check) on a TLS cell of three real servers
// where alice is the only admin: bob's remove-server is refused
// (permission denied) and logged by no server as done; alice removes one
// follower (three voters to two: a quorum of three remains), and her
// removal of the other follower, which would leave one voter of two, is
// refused naming the quorum, logs nothing as done, and leaves two voters.
// (The in-process test TestRemoveServerGuarded in testing/failover covers
// a removal without a session, -force and the last voter.)
func TestRemoveServerGuarded(t *testing.T) {
	files, clients := cell.DevTLS(t, "alice", "bob")
	dir := filepath.Dir(files.CA)
	shTLS := func(who string) []string {
		return []string{"-ca", files.CA, "-cert", filepath.Join(dir, who+".pem"), "-key", filepath.Join(dir, who+"-key.pem")}
	}
	alice := clients["alice"]
	alice.ServerName = wire.ServerName("local")
	c := proc.StartCell(t, 3, proc.CellOptions{
		LogLevel:  "info",
		ClientTLS: alice,
		ShEnv:     []string{"CHUBBY_CACERT=" + files.CA, "CHUBBY_CERT=" + filepath.Join(dir, "alice.pem"), "CHUBBY_KEY=" + filepath.Join(dir, "alice-key.pem")},
		ExtraArgs: []string{"-acl-admins", "alice", "-tls-ca", files.CA, "-tls-cert", files.Cert, "-tls-key", files.Key},
	})
	master := c.Master(t)
	followers := c.Others(master)
	sh := func(who string, args ...string) *proc.Result {
		return c.Sh(t, append(shTLS(who), args...)...)
	}
	removals := func() int {
		n := 0
		for _, s := range c.Servers() {
			n += strings.Count(s.Log(), removingLine)
		}
		return n
	}
	voters := func() int {
		r := sh("alice", "-json", "members")
		if r.Code != 0 {
			t.Fatalf("members: %s", r)
		}
		var out struct{ Members []wire.Member }
		if err := json.Unmarshal([]byte(r.Stdout), &out); err != nil {
			t.Fatalf("members -json: %v: %s", err, r.Stdout)
		}
		n := 0
		for _, m := range out.Members {
			if m.Voter {
				n++
			}
		}
		return n
	}

	// A principal who is not an admin: refused, nothing done or logged.
	r := sh("bob", "remove-server", followers[0].NodeID)
	if r.Code != 1 || !strings.Contains(r.Stderr, "permission denied") || !strings.Contains(r.Stderr, "bob") {
		t.Errorf("bob's remove-server: want exit 1, permission denied naming bob\n%s", r)
	}
	t.Logf("non-admin: exit %d: %s", r.Code, strings.TrimSpace(r.Stderr))
	if n := removals(); n != 0 {
		t.Errorf("after bob's refused removal the logs say %q %d times", removingLine, n)
	}
	if n := voters(); n != 3 {
		t.Fatalf("%d voters after a refused removal, want 3", n)
	}

	// 3 → 2 voters: a quorum of three (two) remains, so it is done.
	if r := sh("alice", "remove-server", followers[0].NodeID); r.Code != 0 {
		t.Fatalf("alice removes %s: %s", followers[0].NodeID, r)
	}
	c.MarkRemoved(followers[0])
	if n := removals(); n != 1 {
		t.Errorf("after one removal the logs say %q %d times, want once", removingLine, n)
	}
	if n := voters(); n != 2 {
		t.Fatalf("%d voters after removing %s, want 2", n, followers[0].NodeID)
	}

	// 2 → 1 would leave fewer than a quorum of two: refused without -force.
	r = sh("alice", "remove-server", followers[1].NodeID)
	if r.Code != 1 || !strings.Contains(r.Stderr, "quorum") {
		t.Errorf("alice removes a second voter of three: want exit 1 naming the quorum\n%s", r)
	}
	t.Logf("below a quorum: exit %d: %s", r.Code, strings.TrimSpace(r.Stderr))
	if n := removals(); n != 1 {
		t.Errorf("after a refused removal the logs say %q %d times, want once (the earlier removal)", removingLine, n)
	}
	if n := voters(); n != 2 {
		t.Errorf("%d voters after a refused removal, want 2", n)
	}
	if r := sh("alice", "write", root+"/after", "x"); r.Code != 0 {
		t.Errorf("the cell does not serve after the refused removal: %s", r)
	}
}
