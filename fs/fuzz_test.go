package fs

import (
	"reflect"
	"strings"
	"testing"
)

// FuzzCheckPath: a path CheckPath accepts is under the cell's root, has no
// empty, "." or ".." components and no whitespace or control characters, and
// splits into a valid parent and a name.
func FuzzCheckPath(f *testing.F) {
	for _, s := range []string{"/ls/local", "/ls/local/a", "/ls/local/a/b", "/ls/local/", "/ls/local//a", "/ls/local/./a",
		"/ls/local/../x", "/ls/other/a", "/etc/passwd", "/ls/local/a b", "/ls/local/a\x00", "/ls/local/\u00e9t\u00e9", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, p string) {
		if CheckPath("local", p) != nil {
			return
		}
		if p == "/ls/local" {
			return
		}
		if !strings.HasPrefix(p, "/ls/local/") || len(p) > MaxPath {
			t.Fatalf("accepted %q", p)
		}
		for _, c := range strings.Split(p[len("/ls/local/"):], "/") {
			if c == "" || c == "." || c == ".." || strings.ContainsAny(c, " \t\n\r\x00") {
				t.Fatalf("accepted %q with component %q", p, c)
			}
		}
		dir, name := Split(p)
		if CheckPath("local", dir) != nil || name == "" || dir+"/"+name != p {
			t.Fatalf("Split(%q) = %q, %q", p, dir, name)
		}
	})
}

// FuzzParseSequencer: what parses prints back to a string that parses to
// the same sequencer, with no spaces in it.
func FuzzParseSequencer(f *testing.F) {
	for _, s := range []string{"X:1:/ls/local/a", "S:42:/ls/local/lock", "X:0:/ls/local/a", "Y:1:/ls/a", "X:-1:/ls/a",
		"X:18446744073709551615:/ls/local/a:b", "X:1", "", "X::/ls/local"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		seq, err := ParseSequencer(s)
		if err != nil {
			return
		}
		again, err := ParseSequencer(seq.String())
		if err != nil || again != seq {
			t.Fatalf("%q → %+v → %q → %+v, %v", s, seq, seq.String(), again, err)
		}
		if seq.Gen == 0 || !seq.Mode.valid() {
			t.Fatalf("accepted %q as %+v", s, seq)
		}
	})
}

// FuzzDecodeCommands: log entry bytes decode into valid commands or an
// error, exactly as the builds before the command envelope decoded them
// (the seeds are entries in their encoding); applying what decodes to a
// state never panics and keeps the state's invariants (checked by
// re-snapshotting).
func FuzzDecodeCommands(f *testing.F) {
	seeds := []*legacyCommand{
		{Op: OpCreateSession, TTL: 12e9},
		{Op: OpCreate, Session: 1, Path: "/ls/local/a", IsDir: true},
		{Op: OpSetContents, Session: 1, Path: "/ls/local/a/f", Data: []byte("x"), Create: true, CallID: 1},
		{Op: OpAcquire, Session: 1, Path: "/ls/local/a/f", Mode: Exclusive, Wait: true, WaitID: 3, LockDelay: 1e9},
		{Op: OpRelease, Session: 1, Path: "/ls/local/a/f", Gen: 4},
		{Op: OpEndSession, Session: 1, Expired: true, Now: 5},
		{Op: OpDelete, Session: 1, Path: "/ls/local/a/f", Seq: &Sequencer{Path: "/ls/local/l", Mode: Shared, Gen: 2}},
	}
	var all []byte
	for _, c := range seeds {
		b := c.encode(f)
		f.Add(b)
		all = append(all, b...)
	}
	f.Add(all)
	f.Add([]byte{0x80})
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		cmds := sameAsLegacy(t, b)
		if cmds == nil {
			return
		}
		s := New("local")
		s.Apply(1, NewCommand(&CreateSession{TTL: 12e9}))
		for i, c := range cmds {
			s.Apply(uint64(i+2), c)
		}
		var buf strings.Builder
		if err := s.Snapshot(&buf); err != nil {
			t.Fatalf("snapshot after fuzzed commands: %v", err)
		}
		if err := New("local").Restore(strings.NewReader(buf.String())); err != nil {
			t.Fatalf("restore after fuzzed commands: %v", err)
		}
	})
}

// FuzzACLFile: any bytes parse (an ACL file is whatever a writer put
// there); every name granted is a line of the file with its surrounding
// blanks trimmed, never empty, a comment or holding a newline; every such
// line is granted; and the principals printed one a line parse back to the
// same grants. `go test ./fs -run '^$' -fuzz FuzzACLFile -fuzztime 5m`.
func FuzzACLFile(f *testing.F) {
	for _, s := range []string{"", "alice", "alice\nbob\n", "*", " * \r\n", "# comment\nalice", "a\r\nb\rc", "\n\n\n",
		"Alice Smith", "\x00\xff\n*x", "#*", "  \t\r", "alice\nalice"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		a := ParseACLFile(data)
		lines := map[string]bool{}
		for _, l := range strings.Split(string(data), "\n") {
			l = strings.Trim(l, " \t\r")
			if l != "" && l[0] != '#' {
				lines[l] = true
			}
		}
		got := a.Principals()
		for _, p := range got {
			if !lines[p] || strings.ContainsRune(p, '\n') || p != strings.Trim(p, " \t\r") {
				t.Fatalf("ParseACLFile(%q) grants %q, not a line of it", data, p)
			}
		}
		for l := range lines {
			if !a.Allows(l) {
				t.Fatalf("ParseACLFile(%q) does not grant its line %q", data, l)
			}
		}
		if len(got) != len(lines) {
			t.Fatalf("ParseACLFile(%q) = %q, lines %v", data, got, lines)
		}
		again := ParseACLFile([]byte(strings.Join(got, "\n")))
		if !reflect.DeepEqual(again.Principals(), got) {
			t.Fatalf("printed and parsed again: %q, want %q", again.Principals(), got)
		}
		if a.Allows("") {
			t.Fatalf("ParseACLFile(%q) grants the empty principal", data)
		}
		if _, star := lines[AnyPrincipal]; star != a.Allows("\x00nobody-could-be-named-this") {
			t.Fatalf("ParseACLFile(%q): * is %v but an unnamed principal's grant is %v", data, star, !star)
		}
	})
}
