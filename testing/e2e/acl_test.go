package e2e

// ACLs (issue 11, Chubby §2.3) on a three-server TLS cell of real chubbyd
// processes, through chubbysh, as the principals admin (the cell's admin),
// alice and bob: a fresh cell denies everyone but admin; admin grants with
// ACL files and names; read-only bob reads, stats, lists and checks
// sequencers but may not write, delete, create a child or lock in either
// mode; acl set needs change-ACL; removing a principal from an ACL file
// takes effect on its next call, in a session that goes on.

import (
	"encoding/json"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/chubby-dev/chubby/testing/proc"
)

func TestACLs(t *testing.T) {
	pk := proc.NewPKI(t, "local", []string{"n1", "n2", "n3"}, "admin", "alice", "bob")
	c := proc.StartCell(t, 3, proc.CellOptions{
		ClientTLS: pk.TLSConfig(t, "admin", "server.local.chubby"),
		ShEnv:     pk.ShEnv("admin"),
		ExtraArgs: []string{"-log-level", "info"}, // -acl-admins: the default, admin
		ServerArgs: func(s *proc.Server, _ []*proc.Server) []string {
			return pk.TLSArgs(s.NodeID)
		},
	})
	s := c.Servers()[0]
	sh := func(who string, args ...string) *proc.Result {
		return s.Sh(t, append(pk.ShArgs(who), args...)...)
	}
	// denied wants exit 1 and one stderr line: permission denied, naming
	// the principal, what it may not do and the path.
	denied := func(who, verb, path string, args ...string) {
		t.Helper()
		r := sh(who, args...)
		wantFail(t, r, 1)
		want := `permission denied: principal "` + who + `" may not ` + verb + " " + path
		if !strings.Contains(r.Stderr, want) {
			t.Fatalf("%s %v: stderr lacks %q\n%s", who, args, want, r)
		}
	}
	aclGen := func(obj map[string]any) uint64 {
		t.Helper()
		n, err := strconv.ParseUint(string(obj["acl_gen"].(json.Number)), 10, 64)
		if err != nil {
			t.Fatalf("acl_gen %v: %v", obj["acl_gen"], err)
		}
		return n
	}
	getACL := func(who, path string) map[string]any {
		t.Helper()
		r := sh(who, "-json", "acl", "get", path)
		wantCode(t, r, 0)
		obj := r.JSON(t)
		for _, k := range []string{"read", "write", "change", "acl_gen"} {
			if _, ok := obj[k]; !ok {
				t.Fatalf("acl get -json lacks %q: %v", k, obj)
			}
		}
		return obj
	}

	// A fresh secure cell: the root's names are admin, acl/admin lists the
	// admins, and nobody else may read or write anything.
	for _, who := range []string{"admin", "alice", "bob"} {
		if got := wantOK(t, sh(who, "whoami")); got != who {
			t.Fatalf("whoami = %q, want %s", got, who)
		}
	}
	rootACL := getACL("admin", root)
	if rootACL["read"] != "admin" || rootACL["write"] != "admin" || rootACL["change"] != "admin" {
		t.Fatalf("a fresh secure cell's root ACL: %v", rootACL)
	}
	if got := wantOK(t, sh("admin", "cat", p("acl", "admin"))); got != "admin" {
		t.Fatalf("acl/admin = %q, want the admins", got)
	}
	denied("alice", "read", root, "ls", root)
	denied("alice", "read", root, "stat", root)
	denied("alice", "read", root, "acl", "get", root)
	denied("alice", "write", root, "mkdir", p("team"))
	denied("alice", "write", root, "write", p("f"), "x")
	denied("bob", "read", p("acl", "admin"), "cat", p("acl", "admin"))
	denied("alice", "write", p("acl"), "write", p("acl", "mine"), "alice") // only admins edit ACLs

	// admin grants: team-rw (alice) may write and change, team-ro (alice,
	// bob) may read what is under /ls/local/team.
	wantOK(t, sh("admin", "write", p("acl", "team-rw"), "alice\n"))
	wantOK(t, sh("admin", "write", p("acl", "team-ro"), "# readers\nalice\nbob\n"))
	r := sh("admin", "-json", "mkdir", p("team"), "-read", "team-ro", "-write", "team-rw", "-change", "team-rw")
	wantCode(t, r, 0)
	team := getACL("bob", p("team"))
	if team["read"] != "team-ro" || team["write"] != "team-rw" || team["change"] != "team-rw" {
		t.Fatalf("mkdir -read -write -change: %v", team)
	}
	denied("alice", "read", root, "ls", root) // the root is still admin's

	// alice (read-write) works in it; what she creates copies the names.
	wantOK(t, sh("alice", "write", p("team", "cfg"), "v1"))
	wantOK(t, sh("alice", "mkdir", p("team", "sub")))
	wantOK(t, sh("alice", "create", p("team", "lockme")))
	wantOK(t, sh("alice", "create", p("team", "private"), "-read", "team-rw"))
	cfg := getACL("alice", p("team", "cfg"))
	if cfg["read"] != "team-ro" || cfg["write"] != "team-rw" || cfg["change"] != "team-rw" {
		t.Fatalf("a new file's ACL %v, want its parent's", cfg)
	}
	if pr := getACL("alice", p("team", "private")); pr["read"] != "team-rw" || pr["write"] != "team-rw" {
		t.Fatalf("create -read: %v", pr)
	}
	holder := s.StartSh(t, append(pk.ShArgs("alice"), "lock", p("team", "cfg"))...)
	seq := parseSeq(t, holder.NextLine(t, 15*time.Second).Text)
	privSeq := strings.Replace(seq.text, p("team", "cfg"), p("team", "private"), 1)

	// bob (read-only) reads, stats, lists, checks a sequencer...
	if got := wantOK(t, sh("bob", "cat", p("team", "cfg"))); got != "v1" {
		t.Fatalf("bob cat = %q", got)
	}
	wantOK(t, sh("bob", "stat", p("team", "cfg")))
	if got := wantOK(t, sh("bob", "ls", p("team"))); got != "cfg\nlockme\nprivate\nsub" {
		t.Fatalf("bob ls = %q", got)
	}
	if got := wantOK(t, sh("bob", "checkseq", seq.text)); got != "valid" {
		t.Fatalf("bob checkseq = %q", got)
	}
	// ...but may not read what team-ro does not cover, write, delete,
	// create a child, lock in either mode, or change ACLs.
	denied("bob", "read", p("team", "private"), "cat", p("team", "private"))
	denied("bob", "read", p("team", "private"), "checkseq", privSeq)
	denied("bob", "write", p("team", "cfg"), "write", p("team", "cfg"), "bob was here")
	denied("bob", "write", p("team", "cfg"), "cas", p("team", "cfg"), "0", "bob")
	denied("bob", "write", p("team", "cfg"), "rm", p("team", "cfg"))
	denied("bob", "write", p("team"), "create", p("team", "bobs"))
	denied("bob", "write", p("team"), "mkdir", p("team", "bobs"))
	denied("bob", "write", p("team", "lockme"), "trylock", p("team", "lockme"))
	denied("bob", "write", p("team", "lockme"), "trylock", p("team", "lockme"), "-shared")
	denied("bob", "write", p("team", "cfg"), "lock", p("team", "cfg"), "-shared") // would block behind alice: refused at once
	denied("bob", "change the ACL of", p("team", "cfg"), "acl", "set", p("team", "cfg"), "-write", "team-ro")
	if got := wantOK(t, sh("alice", "cat", p("team", "cfg"))); got != "v1" {
		t.Fatalf("after bob's refused writes cfg = %q", got)
	}
	holder.Signal(t, syscall.SIGTERM)
	if code := holder.Wait(t, 15*time.Second); code != 0 {
		t.Fatalf("alice's lock holder exited %d on SIGTERM; stderr %q", code, holder.Stderr())
	}

	// Change-ACL: alice (team-rw) hands write to team-ro; acl_gen moves on.
	before := aclGen(cfg)
	r = sh("alice", "-json", "acl", "set", p("team", "cfg"), "-write", "team-ro")
	wantCode(t, r, 0)
	if after := aclGen(r.JSON(t)); after <= before {
		t.Fatalf("acl set: acl_gen %d → %d", before, after)
	}
	if got := getACL("bob", p("team", "cfg")); got["write"] != "team-ro" || got["read"] != "team-ro" || aclGen(got) <= before {
		t.Fatalf("after acl set: %v", got)
	}
	wantOK(t, sh("bob", "trylock", p("team", "cfg"), "-shared"))

	// Revocation takes effect on the next call, also in a session that
	// goes on: bob writes in a script session, admin removes him from
	// team-ro, bob's next write is refused and ends the script (exit 1).
	bobs := s.StartSh(t, append(pk.ShArgs("bob"), "-json")...)
	bobs.Send(t, "write "+p("team", "cfg")+" by-bob")
	if l := bobs.NextLine(t, 15*time.Second).Text; !strings.Contains(l, "content_gen") {
		t.Fatalf("bob's write in his session: %s", l)
	}
	wantOK(t, sh("admin", "write", p("acl", "team-ro"), "alice\n"))
	bobs.Send(t, "write "+p("team", "cfg")+" again")
	if l := bobs.NextLine(t, 15*time.Second).Text; !strings.Contains(l, `permission denied: principal \"bob\" may not write `+p("team", "cfg")) {
		t.Fatalf("bob's write after the revocation: %s", l)
	}
	if code := bobs.Wait(t, 15*time.Second); code != 1 {
		t.Fatalf("bob's script after the refused write exited %d, want 1; stderr %q", code, bobs.Stderr())
	}
	denied("bob", "read", p("team", "cfg"), "cat", p("team", "cfg"))
	denied("bob", "read", p("team"), "ls", p("team"))
	if got := wantOK(t, sh("alice", "cat", p("team", "cfg"))); got != "by-bob" {
		t.Fatalf("cfg = %q, want bob's one write", got)
	}

	// * grants every authenticated principal; a missing file nobody.
	wantOK(t, sh("admin", "write", p("acl", "everyone"), "*"))
	wantOK(t, sh("alice", "acl", "set", p("team", "cfg"), "-read", "everyone"))
	wantOK(t, sh("bob", "cat", p("team", "cfg")))
	wantOK(t, sh("alice", "acl", "set", p("team", "cfg"), "-read", "nosuch"))
	denied("alice", "read", p("team", "cfg"), "cat", p("team", "cfg"))
	// Admins may do everything, whatever the names say.
	if got := wantOK(t, sh("admin", "cat", p("team", "cfg"))); got != "by-bob" {
		t.Fatalf("admin cat = %q", got)
	}
	wantOK(t, sh("admin", "rm", p("team", "private")))
}
