package fs

// Chubby §2.3: every node has three ACL names (read, write, change-ACL)
// naming files in /ls/<cell>/acl/ that list principals; a new node copies
// its parent's names; permissions are checked when a command applies, so
// an ACL edit and a write cannot race.

import (
	"bytes"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"
)

// aclCell is a state machine under test whose commands carry callers.
type aclCell struct {
	t   *testing.T
	s   *State
	idx uint64
}

// newACLCell returns a secure cell's state: InitACLs with admin "root",
// the files readers (alice, bob), writers (alice), owners (alice), world
// (*), and /ls/local/app governed by readers/writers/owners.
func newACLCell(t *testing.T) *aclCell {
	c := &aclCell{t: t, s: New("local")}
	c.ok("", &InitACLs{Admins: []string{"root"}})
	for name, data := range map[string]string{
		"readers": "alice\nbob\n",
		"writers": "# who may write\n  alice \r\n\n",
		"owners":  "alice",
		"world":   "*",
	} {
		c.ok("root", &SetContents{Path: "/ls/local/acl/" + name, Data: []byte(data), Create: true})
	}
	c.ok("root", &Create{Path: "/ls/local/app", IsDir: true, ACL: ACL{Read: "readers", Write: "writers", Change: "owners"}})
	return c
}

// apply applies b as caller ("" for the master's own command; "root" and
// "anonymous", a dev cell's caller, as admins) and checks the invariants
// after it.
func (c *aclCell) apply(caller string, b Body) *Result {
	c.t.Helper()
	c.idx++
	cmd := NewCommand(b)
	cmd.Now = testEpoch + int64(c.idx)*int64(time.Millisecond)
	cmd.Caller, cmd.Admin = caller, caller == "root" || caller == "anonymous"
	r := c.s.Apply(c.idx, cmd)
	if err := checkInvariants(c.s); err != nil {
		c.t.Fatalf("after %T as %q: %v", b, caller, err)
	}
	return r
}

func (c *aclCell) ok(caller string, b Body) *Result {
	c.t.Helper()
	r := c.apply(caller, b)
	if r.Err != nil {
		c.t.Fatalf("%T as %q: %v", b, caller, r.Err)
	}
	return r
}

// denied applies b as caller and wants permission_denied naming the
// caller, the verb and the path, with the state unchanged.
func (c *aclCell) denied(caller string, b Body, verb, path string) {
	c.t.Helper()
	before := dumpState(c.s, false)
	r := c.apply(caller, b)
	want := `principal "` + caller + `" may not ` + verb + " " + path
	if !errors.Is(r.Err, ErrPermission) || !strings.Contains(r.Err.Error(), want) {
		c.t.Fatalf("%T as %s: %v, want permission denied: %s", b, caller, r.Err, want)
	}
	if after := dumpState(c.s, false); after != before {
		c.t.Fatalf("a refused %T changed the state:\n%s\nwas\n%s", b, after, before)
	}
}

func (c *aclCell) acl(path string) ACL {
	c.t.Helper()
	a, err := c.s.ACL(path)
	if err != nil {
		c.t.Fatal(err)
	}
	return a
}

func TestInitACLs(t *testing.T) {
	c := newACLCell(t)
	if got := c.acl("/ls/local"); got != (ACL{AdminACL, AdminACL, AdminACL}) {
		t.Fatalf("root ACL %+v", got)
	}
	if got := c.s.ACLFile(AdminACL).Principals(); !reflect.DeepEqual(got, []string{"root"}) {
		t.Fatalf("admin file grants %v", got)
	}
	// The ACL directory copied the root's names: only admins edit ACLs.
	if got := c.acl("/ls/local/acl"); got != (ACL{AdminACL, AdminACL, AdminACL}) {
		t.Fatalf("acl dir ACL %+v", got)
	}
	c.denied("alice", &SetContents{Path: "/ls/local/acl/writers", Data: []byte("alice\nbob")}, "write", "/ls/local/acl/writers")
	// Once done, it is not done again (every new master proposes it).
	gen := c.s.nodes["/ls/local"].Stat.ACLGen
	c.ok("", &InitACLs{Admins: []string{"someone-else"}})
	if c.s.nodes["/ls/local"].Stat.ACLGen != gen || c.s.ACLFile(AdminACL).Allows("someone-else") {
		t.Fatal("a second InitACLs changed the cell's ACLs")
	}
	if r := New("local").Apply(1, NewCommand(&InitACLs{})); !errors.Is(r.Err, ErrBadRequest) {
		t.Fatalf("InitACLs without admins: %v", r.Err)
	}
}

// A fresh secure cell denies every principal but admins until an admin
// grants access; admins and the master's own commands are not checked.
func TestSecureCellDeniesByDefault(t *testing.T) {
	c := &aclCell{t: t, s: New("local")}
	c.ok("", &InitACLs{Admins: []string{"root"}})
	c.denied("alice", &Create{Path: "/ls/local/x"}, "write", "/ls/local")
	c.denied("alice", &SetContents{Path: "/ls/local/x", Create: true}, "write", "/ls/local")
	if err := c.s.Access("/ls/local", PermRead, "alice"); err == nil || !strings.Contains(err.Error(), `read ACL "admin"`) {
		t.Fatalf("alice reading the root: %v", err)
	}
	c.ok("root", &Create{Path: "/ls/local/x"})
	c.ok("", &Create{Path: "/ls/local/y"})
	// Granting: an admin adds alice to the admin ACL file.
	c.ok("root", &SetContents{Path: "/ls/local/acl/admin", Data: []byte("root\nalice\n")})
	c.ok("alice", &Create{Path: "/ls/local/z"})
}

func TestACLCopiedOnCreate(t *testing.T) {
	c := newACLCell(t)
	c.ok("alice", &Create{Path: "/ls/local/app/dir", IsDir: true})
	c.ok("alice", &Create{Path: "/ls/local/app/dir/f"})
	c.ok("alice", &SetContents{Path: "/ls/local/app/g", Create: true})
	c.ok("alice", &Create{Path: "/ls/local/app/own", ACL: ACL{Write: "world"}})
	for path, want := range map[string]ACL{
		"/ls/local/app":         {"readers", "writers", "owners"},
		"/ls/local/app/dir":     {"readers", "writers", "owners"},
		"/ls/local/app/dir/f":   {"readers", "writers", "owners"},
		"/ls/local/app/g":       {"readers", "writers", "owners"},
		"/ls/local/app/own":     {"readers", "world", "owners"},
		"/ls/local/acl/readers": {AdminACL, AdminACL, AdminACL},
	} {
		if got := c.acl(path); got != want {
			t.Errorf("%s: ACL %+v, want %+v", path, got, want)
		}
		if got := c.s.nodes[path].ACL; got != want {
			t.Errorf("%s: stored names %+v, want %+v (copied, not looked up)", path, got, want)
		}
	}
	// Copied, not linked: changing the parent's names later leaves the child's.
	c.ok("alice", &SetACL{Path: "/ls/local/app", ACL: ACL{Read: "world"}})
	if got := c.acl("/ls/local/app/g"); got.Read != "readers" {
		t.Errorf("child's read ACL followed its parent's change: %+v", got)
	}
	// A name must be a file name.
	for _, bad := range []string{"a/b", "..", "a b", strings.Repeat("x", 300)} {
		if r := c.apply("alice", &Create{Path: "/ls/local/app/bad", ACL: ACL{Read: bad}}); !errors.Is(r.Err, ErrBadRequest) {
			t.Errorf("create with ACL name %q: %v", bad, r.Err)
		}
		if r := c.apply("alice", &SetACL{Path: "/ls/local/app", ACL: ACL{Change: bad}}); !errors.Is(r.Err, ErrBadRequest) {
			t.Errorf("SetACL name %q: %v", bad, r.Err)
		}
	}
}

// Each permission, allowed and denied, as the commands check it.
func TestACLPermissions(t *testing.T) {
	c := newACLCell(t)
	c.ok("alice", &SetContents{Path: "/ls/local/app/f", Data: []byte("v1"), Create: true})
	alice := c.ok("", &CreateSession{TTL: int64(10 * time.Second)}).Session
	bob := c.ok("", &CreateSession{TTL: int64(10 * time.Second)}).Session
	as := func(session uint64, b Body) *Command {
		cmd := cmdFor(session, b)
		cmd.Caller = map[uint64]string{alice: "alice", bob: "bob"}[session]
		return cmd
	}
	apply := func(cmd *Command) *Result {
		c.idx++
		cmd.Now = testEpoch + int64(c.idx)*int64(time.Millisecond)
		return c.s.Apply(c.idx, cmd)
	}

	// Read (checked by the server against the state; Access is the check).
	for _, who := range []string{"alice", "bob"} {
		if err := c.s.Access("/ls/local/app/f", PermRead, who); err != nil {
			t.Errorf("%s may read: %v", who, err)
		}
	}
	if err := c.s.Access("/ls/local/app/f", PermRead, "carol"); !errors.Is(err, ErrPermission) ||
		!strings.Contains(err.Error(), `principal "carol" may not read /ls/local/app/f (read ACL "readers")`) {
		t.Errorf("carol reading: %v", err)
	}
	// bob reads but may not write, CAS, delete, create a child, or lock
	// in either mode.
	bobWrites := []struct {
		body       Body
		verb, path string
	}{
		{&SetContents{Path: "/ls/local/app/f", Data: []byte("x")}, "write", "/ls/local/app/f"},
		{&SetContents{Path: "/ls/local/app/f", Data: []byte("x"), CAS: true, ContentGen: 1}, "write", "/ls/local/app/f"},
		{&Delete{Path: "/ls/local/app/f"}, "write", "/ls/local/app/f"},
		{&Create{Path: "/ls/local/app/new"}, "write", "/ls/local/app"},
		{&Create{Path: "/ls/local/app/f", Exclusive: true}, "write", "/ls/local/app"},
		{&SetContents{Path: "/ls/local/app/new", Create: true}, "write", "/ls/local/app"},
		{&Acquire{Path: "/ls/local/app/f", Mode: Exclusive}, "write", "/ls/local/app/f"},
		{&Acquire{Path: "/ls/local/app/f", Mode: Shared}, "write", "/ls/local/app/f"},
		{&Acquire{Path: "/ls/local/app/f", Mode: Shared, Wait: true, WaitID: 3}, "write", "/ls/local/app/f"},
		{&SetACL{Path: "/ls/local/app/f", ACL: ACL{Write: "world"}}, "change the ACL of", "/ls/local/app/f"},
	}
	for _, w := range bobWrites {
		before := dumpState(c.s, false)
		r := apply(as(bob, w.body))
		want := `principal "bob" may not ` + w.verb + " " + w.path
		if !errors.Is(r.Err, ErrPermission) || !strings.Contains(r.Err.Error(), want) {
			t.Errorf("bob %T %+v: %v, want %s", w.body, w.body, r.Err, want)
		}
		if dumpState(c.s, false) != before {
			t.Errorf("bob's refused %T changed the state", w.body)
		}
	}
	// Opening what exists (a non-exclusive create) is a read: bob may.
	if r := apply(as(bob, &Create{Path: "/ls/local/app/f"})); r.Err != nil {
		t.Errorf("bob opening an existing file with create: %v", r.Err)
	}
	// alice may do all of it; her lock is then released and bob's release
	// of nothing is no permission matter.
	for _, b := range []Body{
		&SetContents{Path: "/ls/local/app/f", Data: []byte("v2")},
		&Create{Path: "/ls/local/app/new"},
		&Acquire{Path: "/ls/local/app/f", Mode: Shared},
	} {
		if r := apply(as(alice, b)); r.Err != nil {
			t.Fatalf("alice %T: %v", b, r.Err)
		}
	}
	seq, _ := c.s.HeldSequencer(alice, "/ls/local/app/f")
	if r := apply(as(alice, &Release{Path: "/ls/local/app/f", LockGen: seq.Gen})); r.Err != nil {
		t.Fatalf("alice release: %v", r.Err)
	}
	if r := apply(as(bob, &Release{Path: "/ls/local/app/f", LockGen: seq.Gen})); !errors.Is(r.Err, ErrNotHeld) {
		t.Fatalf("bob release: %v, want not_held", r.Err)
	}
	if r := apply(as(alice, &Delete{Path: "/ls/local/app/new"})); r.Err != nil {
		t.Fatalf("alice delete: %v", r.Err)
	}
	// A missing ACL file grants nothing, even to the principal it would
	// have named; "*" grants everyone.
	c.ok("alice", &SetACL{Path: "/ls/local/app/f", ACL: ACL{Write: "nosuch"}})
	if r := apply(as(alice, &SetContents{Path: "/ls/local/app/f", Data: []byte("v3")})); !errors.Is(r.Err, ErrPermission) ||
		!strings.Contains(r.Err.Error(), `write ACL "nosuch", and /ls/local/acl/nosuch does not exist`) {
		t.Fatalf("write governed by a missing ACL file: %v", r.Err)
	}
	c.ok("alice", &SetACL{Path: "/ls/local/app/f", ACL: ACL{Write: "world"}})
	for _, s := range []uint64{alice, bob} {
		if r := apply(as(s, &SetContents{Path: "/ls/local/app/f", Data: []byte("w")})); r.Err != nil {
			t.Fatalf("write with write ACL *: %v", r.Err)
		}
	}
	if err := c.s.Access("/ls/local/app/f", PermWrite, "anyone-at-all"); err != nil {
		t.Fatalf("* refused a principal: %v", err)
	}
}

// Changing a node's names needs change-ACL permission and moves its ACL
// generation (from the cell-wide counter) and nothing else.
func TestSetACLBumpsGeneration(t *testing.T) {
	c := newACLCell(t)
	c.ok("alice", &Create{Path: "/ls/local/app/f"})
	before := c.s.nodes["/ls/local/app/f"].Stat
	r := c.ok("alice", &SetACL{Path: "/ls/local/app/f", Instance: before.Instance, ACL: ACL{Read: "world"}})
	after := r.Stat
	if after.ACLGen <= before.ACLGen || after.ACLGen != c.s.counter {
		t.Fatalf("acl_gen %d → %d (counter %d)", before.ACLGen, after.ACLGen, c.s.counter)
	}
	if after.ContentGen != before.ContentGen || after.LockGen != before.LockGen || after.Instance != before.Instance {
		t.Fatalf("SetACL moved other generations: %+v → %+v", before, after)
	}
	if got := c.acl("/ls/local/app/f"); got != (ACL{"world", "writers", "owners"}) {
		t.Fatalf("ACL after SetACL %+v", got)
	}
	c.denied("bob", &SetACL{Path: "/ls/local/app/f", ACL: ACL{Read: "world"}}, "change the ACL of", "/ls/local/app/f")
	// The change-ACL name governs itself: alice may hand it to bob only.
	c.ok("root", &SetContents{Path: "/ls/local/acl/bobs", Data: []byte("bob"), Create: true})
	c.ok("alice", &SetACL{Path: "/ls/local/app/f", ACL: ACL{Change: "bobs"}})
	c.denied("alice", &SetACL{Path: "/ls/local/app/f", ACL: ACL{Change: "owners"}}, "change the ACL of", "/ls/local/app/f")
	c.ok("bob", &SetACL{Path: "/ls/local/app/f", ACL: ACL{Write: "bobs"}})
	// A handle on a deleted node is refused as for any write.
	if r := c.apply("bob", &SetACL{Path: "/ls/local/app/f", Instance: before.Instance + 1000}); !errors.Is(r.Err, ErrStaleHandle) {
		t.Fatalf("SetACL through a stale handle: %v", r.Err)
	}
}

// An ACL file edit takes effect on the very next command: no parsed
// permission outlives it.
func TestACLFileEditTakesEffectAtOnce(t *testing.T) {
	c := newACLCell(t)
	c.ok("alice", &Create{Path: "/ls/local/app/f"})
	write := &SetContents{Path: "/ls/local/app/f", Data: []byte("x")}
	c.denied("bob", write, "write", "/ls/local/app/f")
	c.ok("root", &SetContents{Path: "/ls/local/acl/writers", Data: []byte("alice\nbob\n")})
	c.ok("bob", write)
	c.ok("root", &SetContents{Path: "/ls/local/acl/writers", Data: []byte("alice\n"), CAS: true, ContentGen: c.s.nodes["/ls/local/acl/writers"].Stat.ContentGen})
	c.denied("bob", write, "write", "/ls/local/app/f")
	c.ok("alice", write)
	// Deleted: grants nothing. Re-created: grants again.
	c.ok("root", &Delete{Path: "/ls/local/acl/writers"})
	c.denied("alice", write, "write", "/ls/local/app/f")
	c.ok("root", &Create{Path: "/ls/local/acl/writers", Data: []byte("alice")})
	c.ok("alice", write)
	// An ephemeral ACL file goes with its session, and its grant with it.
	s := c.ok("", &CreateSession{TTL: int64(time.Second)}).Session
	cmd := cmdFor(s, &Create{Path: "/ls/local/acl/temp", Ephemeral: true, Data: []byte("bob")})
	cmd.Caller, cmd.Admin = "root", true
	c.idx++
	if r := c.s.Apply(c.idx, cmd); r.Err != nil {
		t.Fatal(r.Err)
	}
	c.ok("alice", &SetACL{Path: "/ls/local/app/f", ACL: ACL{Write: "temp"}})
	c.ok("bob", write)
	c.idx++
	if r := c.s.Apply(c.idx, cmdFor(s, &EndSession{Expired: true})); r.Err != nil {
		t.Fatal(r.Err)
	}
	c.denied("bob", write, "write", "/ls/local/app/f")
	// A directory in the ACL directory is no ACL file.
	c.ok("root", &Create{Path: "/ls/local/acl/adir", IsDir: true})
	if c.s.ACLFile("adir") != nil {
		t.Fatal("a directory parsed as an ACL file")
	}
}

// Snapshots and backups carry the names; the parsed files are rebuilt.
func TestACLSnapshotRestore(t *testing.T) {
	c := newACLCell(t)
	c.ok("alice", &Create{Path: "/ls/local/app/f", ACL: ACL{Read: "world"}})
	c.ok("alice", &SetACL{Path: "/ls/local/app/f", ACL: ACL{Write: "readers"}})
	want := dumpState(c.s, true)
	check := func(what string, s *State) {
		t.Helper()
		if got, err := s.ACL("/ls/local/app/f"); err != nil || got != (ACL{"world", "readers", "owners"}) {
			t.Fatalf("%s: ACL %+v %v", what, got, err)
		}
		if err := s.Access("/ls/local/app/f", PermWrite, "bob"); err != nil {
			t.Fatalf("%s: bob may not write: %v", what, err)
		}
		if err := s.Access("/ls/local/app/f", PermWrite, "carol"); !errors.Is(err, ErrPermission) {
			t.Fatalf("%s: carol may write: %v", what, err)
		}
		if err := checkInvariants(s); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	restored, err := roundTrip(c.s)
	if err != nil {
		t.Fatal(err)
	}
	if got := dumpState(restored, true); got != want {
		t.Fatalf("restored state:\n%s\nwant\n%s", got, want)
	}
	check("snapshot", restored)
	var buf bytes.Buffer
	if err := c.s.WriteBackup(&buf); err != nil {
		t.Fatal(err)
	}
	fromBackup, err := ReadBackup(&buf)
	if err != nil {
		t.Fatal(err)
	}
	check("backup", fromBackup)
}

// Nodes from before ACLs have no names. In a dev cell nothing is checked
// (every caller is an admin); once a cell is secure they take their
// nearest ancestor's names, the root's "admin" unless an admin names
// others, and a node created under one copies those.
func TestLegacyNodesInherit(t *testing.T) {
	c := &aclCell{t: t, s: New("local")}
	c.ok("", &Create{Path: "/ls/local/old", IsDir: true})
	c.ok("", &Create{Path: "/ls/local/old/f"})
	if got := c.acl("/ls/local/old/f"); !got.IsZero() {
		t.Fatalf("a dev cell's node has names %+v", got)
	}
	c.ok("anonymous", &SetContents{Path: "/ls/local/old/f", Data: []byte("x")})
	c.s.nodes["/ls/local/old/f"].ACL = ACL{} // as a build before ACLs left it
	c.ok("", &InitACLs{Admins: []string{"root"}})
	if got := c.acl("/ls/local/old/f"); got != (ACL{AdminACL, AdminACL, AdminACL}) {
		t.Fatalf("legacy node's ACL %+v, want the root's", got)
	}
	c.denied("alice", &SetContents{Path: "/ls/local/old/f", Data: []byte("y")}, "write", "/ls/local/old/f")
	c.ok("root", &SetContents{Path: "/ls/local/acl/team", Data: []byte("alice"), Create: true})
	c.ok("root", &SetACL{Path: "/ls/local/old", ACL: ACL{Write: "team"}})
	if got := c.s.nodes["/ls/local/old"].ACL; got != (ACL{AdminACL, "team", AdminACL}) {
		t.Fatalf("SetACL on a legacy node stored %+v, want every name", got)
	}
	c.ok("alice", &SetContents{Path: "/ls/local/old/f", Data: []byte("y")}) // f has none: old's govern
	c.ok("alice", &Create{Path: "/ls/local/old/g"})
	if got := c.s.nodes["/ls/local/old/g"].ACL; got != (ACL{AdminACL, "team", AdminACL}) {
		t.Fatalf("child of a legacy node stored %+v", got)
	}
}

func TestParseACLFile(t *testing.T) {
	for _, tc := range []struct {
		data string
		want []string
	}{
		{"", []string{}},
		{"alice", []string{"alice"}},
		{"alice\nbob\n", []string{"alice", "bob"}},
		{"  bob \r\n\talice\t\n\n# carol\n#\nbob", []string{"alice", "bob"}},
		{"*\nalice", []string{"*", "alice"}},
		{"Alice Smith\n", []string{"Alice Smith"}},
		{" * ", []string{"*"}},
		{"**\n", []string{"**"}},
	} {
		f := ParseACLFile([]byte(tc.data))
		if got := f.Principals(); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("ParseACLFile(%q) = %q, want %q", tc.data, got, tc.want)
		}
	}
	f := ParseACLFile([]byte("alice\n# bob\n"))
	if !f.Allows("alice") || f.Allows("bob") || f.Allows("# bob") || f.Allows("") || f.Allows("Alice") {
		t.Error("alice's file grants the wrong principals")
	}
	if (*ACLFile)(nil).Allows("alice") {
		t.Error("a missing file grants")
	}
	if any := ParseACLFile([]byte("*")); !any.Allows("x") || any.Allows("") {
		t.Error("* should grant every principal, and nobody without a name")
	}
}
