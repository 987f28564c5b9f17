package fs

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/vmihailenco/msgpack/v5"
	"pgregory.net/rapid"
)

// Chubby §2.4: a sequencer is an opaque byte string naming the lock, its mode
// and its generation, passed to servers that check it. Ours prints as one
// token and must read back to the same value.
func TestSequencerStringRoundTrip(t *testing.T) {
	for _, s := range []Sequencer{
		{Path: "/ls/local/l", Mode: Exclusive, Gen: 1},
		{Path: "/ls/local/l", Mode: Shared, Gen: 42},
		{Path: "/ls/local/a:b:c", Mode: Exclusive, Gen: math.MaxUint64},
		{Path: "/ls/other-cell/jobs/billing/lock", Mode: Shared, Gen: 7},
		{Path: "/ls/local/ünï", Mode: Exclusive, Gen: 9},
	} {
		text := s.String()
		if strings.ContainsAny(text, " \t\n") {
			t.Errorf("%#v prints with a space: %q", s, text)
		}
		got, err := ParseSequencer(text)
		if err != nil || got != s {
			t.Errorf("ParseSequencer(%q) = %#v, %v; want %#v", text, got, err, s)
		}
	}
	if got := (Sequencer{Path: "/ls/local/l", Mode: Shared, Gen: 5}).String(); got != "S:5:/ls/local/l" {
		t.Errorf("String() = %q, want S:5:/ls/local/l", got)
	}
}

func TestSequencerRoundTripProperty(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		s := Sequencer{
			Path: "/ls/" + rapid.String().Draw(t, "rest"),
			Mode: rapid.SampledFrom([]Mode{Exclusive, Shared}).Draw(t, "mode"),
			Gen:  rapid.Uint64Min(1).Draw(t, "gen"),
		}
		got, err := ParseSequencer(s.String())
		if err != nil || got != s {
			t.Fatalf("ParseSequencer(%q) = %#v, %v; want %#v", s.String(), got, err, s)
		}
	})
}

func TestParseSequencerRejects(t *testing.T) {
	for _, text := range []string{
		"", "X", "X:1", "X:1/ls/local/l", "Y:1:/ls/local/l", "x:1:/ls/local/l", "XS:1:/ls/local/l",
		"X:0:/ls/local/l", "X:-1:/ls/local/l", "X:+1:/ls/local/l", "X::/ls/local/l", "X:1.5:/ls/local/l",
		"X:abc:/ls/local/l", "X:18446744073709551616:/ls/local/l", "X: 1:/ls/local/l",
		"X:1:", "X:1:ls/local/l", "X:1:/l", "X:1:/lsx/local",
	} {
		s, err := ParseSequencer(text)
		if !errors.Is(err, ErrBadSequencer) {
			t.Errorf("ParseSequencer(%q) = %#v, %v; want ErrBadSequencer", text, s, err)
		}
		if Codes.Code(err) != "bad_sequencer" {
			t.Errorf("ParseSequencer(%q): code %q", text, Codes.Code(err))
		}
	}
}

func TestSequencerNewerAndZero(t *testing.T) {
	a := Sequencer{Path: "/ls/local/l", Mode: Exclusive, Gen: 5}
	b := Sequencer{Path: "/ls/local/l", Mode: Shared, Gen: 6}
	c := Sequencer{Path: "/ls/local/m", Mode: Exclusive, Gen: 9}
	switch {
	case !b.Newer(a):
		t.Error("a later generation of the same lock is not Newer")
	case a.Newer(b), a.Newer(a):
		t.Error("an older or equal generation is Newer")
	case c.Newer(a):
		t.Error("a sequencer of another lock is Newer")
	case !(Sequencer{}).IsZero(), a.IsZero():
		t.Error("IsZero")
	}
	if Exclusive.String() != "exclusive" || Shared.String() != "shared" || Mode(7).String() != "mode(7)" {
		t.Errorf("Mode.String: %v %v %v", Exclusive, Shared, Mode(7))
	}
}

func TestCheckPath(t *testing.T) {
	long := func(n int) string { return strings.Repeat("n", n) }
	// A path of exactly MaxPath bytes: /ls/local/ + components of 200 + '/'.
	exact := "/ls/local/" + strings.Repeat(long(200)+"/", 4) + long(MaxPath-len("/ls/local/")-4*201)
	if len(exact) != MaxPath {
		t.Fatalf("exact path is %d bytes", len(exact))
	}
	good := []string{
		"/ls/local", "/ls/local/a", "/ls/local/a/b/c", "/ls/local/.a", "/ls/local/a.", "/ls/local/...",
		"/ls/local/a-b_c:d@e", "/ls/local/ünïcødé", "/ls/local/" + long(MaxName), exact,
	}
	bad := []string{
		"", "/", "/ls", "/ls/", "/ls/local/", "/ls/localx", "/ls/localx/a", "/ls/other/a", "ls/local/a",
		"/ls/local//a", "/ls/local/a/", "/ls/local/a//", "//ls/local/a", "/ls/local/.", "/ls/local/..",
		"/ls/local/a/./b", "/ls/local/a/../b", "/ls/local/a/..",
		"/ls/local/a\x00", "/ls/local/\x00", "/ls/local/a b", "/ls/local/ a", "/ls/local/a ", "/ls/local/a\tb",
		"/ls/local/a\nb", "/ls/local/a\rb", "/ls/local/a\x7f", "/ls/local/a\u00a0b", "/ls/local/a\u2028b",
		"/ls/local/a\u3000b", "/ls/local/a\xff", "/ls/local/\xc3", "/ls/local/" + long(MaxName+1),
		exact + "n", " /ls/local/a", "/LS/local/a", "/ls/Local/a",
	}
	for _, p := range good {
		if err := CheckPath("local", p); err != nil {
			t.Errorf("CheckPath(%q) = %v, want nil", p, err)
		}
	}
	for _, p := range bad {
		if err := CheckPath("local", p); !errors.Is(err, ErrBadPath) {
			t.Errorf("CheckPath(%q) = %v, want ErrBadPath", p, err)
		}
	}
	if err := CheckPath("other", "/ls/other/a"); err != nil {
		t.Errorf("CheckPath in cell other: %v", err)
	}
}

// TestCheckPathAllocatesNothing: every call checks its path on the
// master and in the client; a good path costs no allocation.
func TestCheckPathAllocatesNothing(t *testing.T) {
	for _, p := range []string{"/ls/local", "/ls/local/a", "/ls/local/dir/lock-17"} {
		if n := testing.AllocsPerRun(100, func() { _ = CheckPath("local", p) }); n != 0 {
			t.Errorf("CheckPath(%q) allocates %v times", p, n)
		}
	}
}

// TestCheckNewPath (issue 17, finding 7): new names may not hide
// characters: bidi overrides and isolates, zero-width characters, soft
// hyphens, the BOM. Existing names pass CheckPath as before.
func TestCheckNewPath(t *testing.T) {
	deceptive := []string{
		"/ls/local/abc\u202Etxt.exe", "/ls/local/ad\u200Bmin", "/ls/local/a\u200Cb", "/ls/local/a\u200Db",
		"/ls/local/a\u2066b\u2069", "/ls/local/a\u200Eb", "/ls/local/\uFEFFa", "/ls/local/a\u00ADb", "/ls/local/d/a\u2060b",
	}
	for _, p := range deceptive {
		if err := CheckNewPath("local", p); !errors.Is(err, ErrBadPath) || !strings.Contains(err.Error(), "invisible") {
			t.Errorf("CheckNewPath(%q) = %v, want ErrBadPath naming the invisible character", p, err)
		}
		if err := CheckPath("local", p); err != nil {
			t.Errorf("CheckPath(%q) = %v: an existing node must stay reachable", p, err)
		}
	}
	for _, p := range []string{"/ls/local/ünïcødé", "/ls/local/日本語", "/ls/local/emoji😀", "/ls/local"} {
		if err := CheckNewPath("local", p); err != nil {
			t.Errorf("CheckNewPath(%q) = %v, want nil", p, err)
		}
	}
	if err := CheckNewPath("local", "/ls/local/a b"); !errors.Is(err, ErrBadPath) {
		t.Errorf("CheckNewPath does not check what CheckPath checks: %v", err)
	}
}

func TestSplitRootCellName(t *testing.T) {
	for p, want := range map[string][2]string{
		"/ls/local/a":     {"/ls/local", "a"},
		"/ls/local/a/b/c": {"/ls/local/a/b", "c"},
	} {
		if d, n := Split(p); d != want[0] || n != want[1] {
			t.Errorf("Split(%q) = %q, %q", p, d, n)
		}
	}
	if Root("local") != "/ls/local" {
		t.Errorf("Root = %q", Root("local"))
	}
	for name, want := range map[string]bool{
		"local": true, "a": true, "cell-1_b.c": true, "A9": true, strings.Repeat("c", 64): true,
		"": false, ".": false, "..": false, "a/b": false, "a b": false, "ünï": false, strings.Repeat("c", 65): false,
		"a\x00": false, "a:b": false,
	} {
		if got := ValidCellName(name); got != want {
			t.Errorf("ValidCellName(%q) = %v, want %v", name, got, want)
		}
	}
}

// fullBodies has one body of each op with every field set.
func fullBodies() []Body {
	seq := &Sequencer{Path: "/ls/local/l", Mode: Shared, Gen: 77}
	return []Body{
		&NewEpoch{},
		&CreateSession{TTL: int64(12 * time.Second), Nonce: 8},
		&EndSession{Expired: true},
		&Create{Path: "/ls/local/x", IsDir: true, Ephemeral: true, Exclusive: true, Data: []byte("d\x00ta"), ACL: ACL{Read: "r", Write: "w", Change: "c"}},
		&SetContents{Path: "/ls/local/x", Instance: 9, Data: []byte("d\x00ta"), Create: true, CAS: true, ContentGen: 12, Seq: seq},
		&Delete{Path: "/ls/local/x", Instance: 9, Seq: seq},
		&Acquire{Path: "/ls/local/x", Instance: 9, Mode: Exclusive, Wait: true, WaitID: 4, LockDelay: int64(15 * time.Second)},
		&CancelWait{Path: "/ls/local/x", WaitID: 4},
		&Release{Path: "/ls/local/x", LockGen: 13},
		&GrantDelayed{Path: "/ls/local/x"},
		&RemoveServer{ServerID: "node3"},
		&SetACL{Path: "/ls/local/x", Instance: 9, ACL: ACL{Read: "r", Change: "c"}},
		&InitACLs{Admins: []string{"admin", "ops"}},
	}
}

func TestCommandEncodeDecodeRoundTrip(t *testing.T) {
	bodies := fullBodies()
	if len(bodies) != int(opMax)-1 {
		t.Fatalf("%d bodies for %d ops", len(bodies), opMax-1)
	}
	for _, body := range bodies {
		c := called(3, 5, 4, body)
		c.Now = testEpoch + 5
		c.Caller, c.Admin = "alice", true
		b, err := c.Encode()
		if err != nil {
			t.Fatal(err)
		}
		got, err := DecodeCommand(b)
		if err != nil {
			t.Fatalf("%v: %v", c.Op, err)
		}
		if !reflect.DeepEqual(got, c) {
			t.Errorf("%v round trip:\n got %+v %+v\nwant %+v %+v", c.Op, got, got.Body, c, c.Body)
		}
	}
	// Zero fields are omitted and come back zero.
	c := NewCommand(&NewEpoch{})
	c.Now = 1
	b, _ := c.Encode()
	got, err := DecodeCommand(b)
	if err != nil || !reflect.DeepEqual(got, c) {
		t.Errorf("minimal command: %+v, %v", got, err)
	}
	b, _ = NewCommand(&SetContents{Path: "/ls/local/x"}).Encode()
	got, err = DecodeCommand(b)
	if set, ok := got.Body.(*SetContents); err != nil || !ok || set.Seq != nil || set.Data != nil || set.ContentGen != 0 {
		t.Errorf("minimal set-contents: %+v, %v", got, err)
	}
}

// Each op has one body type; a command whose body is not its op's, or has
// none, is refused by Encode and Apply with an error naming what it got.
func TestCommandBodyMustMatchOp(t *testing.T) {
	s := New("local")
	s.Apply(1, NewCommand(&CreateSession{TTL: 1}))
	before := dumpState(s, false)
	for i, body := range fullBodies() {
		op := Op(i + 1)
		if NewCommand(body).Op != op {
			t.Fatalf("body %T is of op %v, want %v", body, body.op(), op)
		}
		for j, other := range append(fullBodies(), nil) {
			if j == i {
				continue
			}
			c := &Command{Op: op, Session: 1, CallID: 7, Body: other}
			want := fmt.Sprintf("%v command with a %T body", op, other)
			if _, err := c.Encode(); !errors.Is(err, ErrBadRequest) || !strings.Contains(err.Error(), want) {
				t.Errorf("Encode of %v with %T: %v, want bad_request %q", op, other, err, want)
			}
			if r := s.Apply(2, c); !errors.Is(r.Err, ErrBadRequest) || !strings.Contains(r.Err.Error(), want) {
				t.Errorf("Apply of %v with %T: %v, want bad_request %q", op, other, r.Err, want)
			}
		}
	}
	if after := dumpState(s, false); after != before || len(s.sessions[1].Calls) != 0 {
		t.Errorf("mismatched commands changed the state:\n%s", after)
	}
	if _, err := (&Command{Op: opMax}).Encode(); !errors.Is(err, ErrBadRequest) {
		t.Errorf("Encode of an unknown op: %v", err)
	}
}

// Command.Path is the node a command acts on, for the server's cache
// invalidation; ops on no one node have none.
func TestCommandPath(t *testing.T) {
	for _, body := range fullBodies() {
		want := "/ls/local/x"
		switch body.(type) {
		case *NewEpoch, *CreateSession, *EndSession, *RemoveServer, *InitACLs:
			want = ""
		}
		if got := NewCommand(body).Path(); got != want {
			t.Errorf("%T: Path() = %q, want %q", body, got, want)
		}
	}
	if p := (&Command{Op: opMax}).Path(); p != "" {
		t.Errorf("bodiless command: Path() = %q", p)
	}
}

// DESIGN.md invariant 9: a malformed log entry gets a clear error.
func TestDecodeCommandRejects(t *testing.T) {
	valid, _ := NewCommand(&Create{Path: "/ls/local/a"}).Encode()
	mustMarshal := func(v any) []byte {
		b, err := msgpack.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	cases := map[string][]byte{
		"nil":              nil,
		"empty":            {},
		"text":             []byte("hello world"),
		"truncated":        valid[:len(valid)-3],
		"int":              mustMarshal(42),
		"string":           mustMarshal("create"),
		"array":            mustMarshal([]int{1, 2, 3}),
		"msgpack nil":      {0xc0},
		"op 0":             mustMarshal(map[string]any{"o": 0, "t": 1}),
		"no op":            mustMarshal(map[string]any{"p": "/ls/local/a"}),
		"op past the end":  mustMarshal(map[string]any{"o": int(opMax)}),
		"op 255":           mustMarshal(map[string]any{"o": 255}),
		"op wrong type":    mustMarshal(map[string]any{"o": "create"}),
		"path wrong type":  mustMarshal(map[string]any{"o": int(OpCreate), "p": 5}),
		"trailing garbage": append(append([]byte{}, valid...), 0x01, 0x02),
		"two commands":     append(append([]byte{}, valid...), valid...),
	}
	for name, b := range cases {
		c, err := DecodeCommand(b)
		if err == nil {
			t.Errorf("%s: DecodeCommand(%x) = %+v, want an error", name, b, c)
			continue
		}
		if !errors.Is(err, ErrBadRequest) {
			t.Errorf("%s: %v does not wrap ErrBadRequest", name, err)
		}
	}
	// Random bytes never panic and never yield an unknown op.
	t.Run("random", rapid.MakeCheck(func(t *rapid.T) {
		b := rapid.SliceOf(rapid.Byte()).Draw(t, "bytes")
		c, err := DecodeCommand(b)
		if err == nil && (c.Op == OpInvalid || c.Op >= opMax) {
			t.Fatalf("decoded unknown op %v", c.Op)
		}
	}))
}

func TestApplyRejectsUnknownOps(t *testing.T) {
	s := New("local")
	before := dumpState(s, false)
	for i, op := range []Op{OpInvalid, opMax, opMax + 1, 255} {
		r := s.Apply(uint64(i+1), &Command{Op: op})
		if !errors.Is(r.Err, ErrBadRequest) || !strings.Contains(r.Err.Error(), fmt.Sprint(uint8(op))) {
			t.Errorf("op %d: %v, want bad_request naming the op", op, r.Err)
		}
		if s.AppliedIndex() != uint64(i+1) {
			t.Errorf("op %d: applied index %d", op, s.AppliedIndex())
		}
	}
	if after := dumpState(s, false); after != before {
		t.Errorf("unknown ops changed the state:\n%s", after)
	}
	if OpCreate.String() != "create" || OpGrantDelayed.String() != "grant-delayed" || Op(99).String() != "op(99)" {
		t.Errorf("Op.String: %v %v %v", OpCreate, OpGrantDelayed, Op(99))
	}
	if len(opNames) != int(opMax) {
		t.Errorf("%d op names for %d ops", len(opNames), opMax)
	}
	for op := OpInvalid + 1; op < opMax; op++ {
		if handlers[op].apply == nil {
			t.Errorf("op %v has no handler", op)
		}
	}
}

func TestRestoreRejects(t *testing.T) {
	enc := func(snap snapshot) []byte {
		b, err := msgpack.Marshal(&snap)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	root := &node{Stat: Stat{Instance: 1, IsDir: true}}
	file := &node{Stat: Stat{Instance: 2}}
	cases := map[string][]byte{
		"garbage":         []byte("not a snapshot"),
		"empty":           nil,
		"version":         enc(snapshot{Version: snapshotVersion + 1, Cell: "local", Paths: []string{"/ls/local"}, Nodes: []*node{root}}),
		"cell":            enc(snapshot{Version: snapshotVersion, Cell: "other", Paths: []string{"/ls/other"}, Nodes: []*node{root}}),
		"no root":         enc(snapshot{Version: snapshotVersion, Cell: "local"}),
		"lengths":         enc(snapshot{Version: snapshotVersion, Cell: "local", Paths: []string{"/ls/local", "/ls/local/a"}, Nodes: []*node{root}}),
		"orphan":          enc(snapshot{Version: snapshotVersion, Cell: "local", Paths: []string{"/ls/local", "/ls/local/a/b"}, Nodes: []*node{root, file}}),
		"parent is file":  enc(snapshot{Version: snapshotVersion, Cell: "local", Paths: []string{"/ls/local", "/ls/local/a", "/ls/local/a/b"}, Nodes: []*node{root, file, file}}),
		"root is missing": enc(snapshot{Version: snapshotVersion, Cell: "local", Paths: []string{"/ls/local/a"}, Nodes: []*node{file}}),
	}
	for name, b := range cases {
		s := New("local")
		if err := s.Restore(bytes.NewReader(b)); err == nil {
			t.Errorf("%s: Restore accepted it:\n%s", name, dumpState(s, true))
		}
	}
}

// Stat: "Instance, ContentGen, LockGen and ACLGen come from one cell-wide
// counter, so each is monotonic across deletion and re-creation of the same
// name." A client that compares the lock generation it saw before a name was
// deleted with the one it sees after must never see it go back.
func TestGenerationsMonotonicAcrossRecreate(t *testing.T) {
	s := New("local")
	var idx uint64
	apply := func(c *Command) *Result {
		idx++
		c.Now = testEpoch
		r := s.Apply(idx, c)
		if r.Err != nil {
			t.Fatalf("%v %s: %v", c.Op, c.Path(), r.Err)
		}
		return r
	}
	apply(NewCommand(&CreateSession{TTL: 1}))
	var last Stat
	for i := 0; i < 5; i++ {
		st := apply(NewCommand(&Create{Path: "/ls/local/n"})).Stat
		seq := apply(cmdFor(1, &Acquire{Path: "/ls/local/n", Mode: Exclusive})).Seq
		apply(NewCommand(&SetContents{Path: "/ls/local/n", Data: []byte("x")}))
		after, _ := s.Stat("/ls/local/n")
		if i > 0 {
			if st.Instance <= last.Instance || st.ContentGen <= last.ContentGen || st.ACLGen <= last.ACLGen {
				t.Errorf("round %d: re-created node's generations %+v not above %+v", i, st, last)
			}
			if st.LockGen < last.LockGen {
				t.Errorf("round %d: re-created node's lock generation %d is below the deleted node's %d", i, st.LockGen, last.LockGen)
			}
		}
		if seq.Gen <= last.LockGen || after.LockGen != seq.Gen {
			t.Errorf("round %d: sequencer %v, stat lock generation %d, previous %d", i, seq, after.LockGen, last.LockGen)
		}
		last = after
		apply(NewCommand(&Delete{Path: "/ls/local/n"}))
	}
}

// The results of one apply must be the same on every replica; an expiring
// session's cancelled waits must not come out in map order.
func TestEndSessionEffectsDeterministic(t *testing.T) {
	var first []string
	for round := 0; round < 20; round++ {
		s := New("local")
		var idx uint64
		apply := func(c *Command) *Result {
			idx++
			c.Now = testEpoch
			return s.Apply(idx, c)
		}
		apply(NewCommand(&CreateSession{TTL: 1}))
		apply(NewCommand(&CreateSession{TTL: 1}))
		for i := 0; i < 12; i++ {
			p := fmt.Sprintf("/ls/local/n%02d", (i*7)%12)
			apply(NewCommand(&Create{Path: p}))
			apply(cmdFor(1, &Acquire{Path: p, Mode: Exclusive, LockDelay: int64(time.Second)}))
			apply(cmdFor(2, &Acquire{Path: p, Mode: Exclusive, Wait: true, WaitID: uint64(i)}))
		}
		a := formatResult(apply(cmdFor(2, &EndSession{})))
		b := formatResult(apply(cmdFor(1, &EndSession{Expired: true})))
		got := append(a, b...)
		if round == 0 {
			first = got
			continue
		}
		if strings.Join(got, "\n") != strings.Join(first, "\n") {
			t.Fatalf("round %d: results differ:\n%s\nvs\n%s", round, strings.Join(first, "\n"), strings.Join(got, "\n"))
		}
	}
}

// The master batches concurrent commands into one log entry (group commit);
// DecodeCommands reads them back in order and rejects a batch with any bad
// part, so a replica never applies half of a malformed entry.
func TestDecodeCommandsBatch(t *testing.T) {
	var batch []byte
	var want []*Command
	for i, body := range []Body{&CreateSession{TTL: 1}, &Create{Path: "/ls/local/a", Data: []byte{1}},
		&SetContents{Path: "/ls/local/a", Data: []byte{2}, ContentGen: 2}, &Acquire{Path: "/ls/local/a"},
		&Release{Path: "/ls/local/a", LockGen: 4}, &EndSession{}} {
		c := cmdFor(1, body)
		c.Now = testEpoch + int64(i)
		b, err := c.Encode()
		if err != nil {
			t.Fatal(err)
		}
		batch = append(batch, b...)
		want = append(want, c)
		got, err := DecodeCommands(batch)
		if err != nil {
			t.Fatalf("batch of %d: %v", i+1, err)
		}
		if len(got) != len(want) {
			t.Fatalf("batch of %d decoded %d commands", len(want), len(got))
		}
		for j := range got {
			if !reflect.DeepEqual(got[j], want[j]) {
				t.Fatalf("command %d: got %+v %+v, want %+v %+v", j, got[j], got[j].Body, want[j], want[j].Body)
			}
		}
	}
	one, _ := NewCommand(&NewEpoch{}).Encode()
	bad := (&legacyCommand{Op: opMax}).encode(t)
	for name, b := range map[string][]byte{
		"nil":                  nil,
		"empty":                {},
		"garbage":              []byte("garbage"),
		"trailing garbage":     append(append([]byte{}, one...), 0xc1),
		"truncated last":       append(append([]byte{}, one...), one[:len(one)-1]...),
		"unknown op inside":    append(append(append([]byte{}, one...), bad...), one...),
		"a non-map in a batch": append(append([]byte{}, one...), 0x05),
	} {
		if cs, err := DecodeCommands(b); !errors.Is(err, ErrBadRequest) {
			t.Errorf("%s: DecodeCommands = %d commands, %v; want ErrBadRequest", name, len(cs), err)
		}
	}
}

// TestEndSessionGrantsNothingOnItsEphemerals (found by
// TestPropertyStateMachine): a session ends while it waits, exclusive, at
// the head of the queue of its own ephemeral file, which another session
// holds shared, with a shared waiter behind it. Removing its wait would
// grant the shared waiter — on a node the same apply deletes. The
// ephemeral goes first, so the waiter's wait is cancelled instead.
func TestEndSessionGrantsNothingOnItsEphemerals(t *testing.T) {
	s := New("local")
	idx := uint64(0)
	apply := func(session uint64, b Body) *Result { return mustApply(t, &s, &idx, session, b) }
	owner := apply(0, &CreateSession{TTL: int64(12 * time.Second)}).Session
	reader := apply(0, &CreateSession{TTL: int64(12 * time.Second)}).Session
	waiter := apply(0, &CreateSession{TTL: int64(12 * time.Second)}).Session
	const f = "/ls/local/eph"
	apply(owner, &Create{Path: f, Ephemeral: true})
	apply(reader, &Acquire{Path: f, Mode: Shared})
	apply(owner, &Acquire{Path: f, Mode: Exclusive, Wait: true, WaitID: 1})
	apply(waiter, &Acquire{Path: f, Mode: Shared, Wait: true, WaitID: 2})
	r := apply(owner, &EndSession{Expired: true})
	if len(r.Grants) != 0 {
		t.Fatalf("ending the owner granted %+v on its ephemeral file, which the same apply deletes", r.Grants)
	}
	cancelled := false
	for _, w := range r.Cancelled {
		cancelled = cancelled || (w.Session == waiter && w.Path == f)
	}
	if !cancelled {
		t.Fatalf("the shared waiter's wait on the deleted file was not cancelled: %+v", r.Cancelled)
	}
	if _, err := s.Stat(f); !errors.Is(err, ErrNoSuchNode) {
		t.Fatalf("the ephemeral file outlived its session: %v", err)
	}
}
