package fs

// Helpers shared by the script, property and unit tests of the state machine:
// a canonical text dump of the whole state, a printer for Results and a
// checker of the structural invariants that must hold after every Apply.

import (
	"bytes"
	"errors"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"
)

// cmdFor is the command carrying b, sent for session.
func cmdFor(session uint64, b Body) *Command {
	c := NewCommand(b)
	c.Session = session
	return c
}

// called is the command carrying b as the session's call id, with the
// client's acknowledged mark acked.
func called(session, id, acked uint64, b Body) *Command {
	c := cmdFor(session, b)
	c.CallID, c.Acked = id, acked
	return c
}

// mustApply applies b for session to *s at the next index (counted in
// *idx), a millisecond of command clock per index, and fails the test on an
// error. *s may be replaced between calls (a restored state).
func mustApply(t *testing.T, s **State, idx *uint64, session uint64, b Body) *Result {
	t.Helper()
	*idx++
	c := cmdFor(session, b)
	c.Now = testEpoch + int64(*idx)*int64(time.Millisecond)
	r := (*s).Apply(*idx, c)
	if r.Err != nil {
		t.Fatalf("apply %T: %v", b, r.Err)
	}
	return r
}

// testEpoch is the base of the command clock in tests; times are printed as
// offsets from it so that expected output does not depend on the date.
const testEpoch = int64(1_700_000_000) * int64(time.Second)

// fmtTime prints a command-clock time as an offset from testEpoch.
func fmtTime(t int64) string {
	if t == 0 {
		return "0"
	}
	d := time.Duration(t - testEpoch)
	if d < 0 {
		return d.String()
	}
	return "+" + d.String()
}

// formatStat prints a Stat on one line.
func formatStat(st Stat) string {
	var b strings.Builder
	kind := "file"
	if st.IsDir {
		kind = "dir"
	}
	fmt.Fprintf(&b, "%s inst=%d cgen=%d lgen=%d agen=%d", kind, st.Instance, st.ContentGen, st.LockGen, st.ACLGen)
	if !st.IsDir {
		fmt.Fprintf(&b, " size=%d sum=%016x", st.Size, st.Checksum)
	}
	if st.Ephemeral {
		fmt.Fprintf(&b, " ephemeral owner=%d", st.Owner)
	}
	fmt.Fprintf(&b, " mtime=%s", fmtTime(st.Mtime))
	return b.String()
}

// formatErr prints an error as its wire code and its text.
func formatErr(err error) string {
	return fmt.Sprintf("error %s: %v", Codes.Code(err), err)
}

// formatResult prints every non-zero part of a Result, one per line, so a
// script shows a result's error together with any effect it should not have.
func formatResult(r *Result) []string {
	var out []string
	if r.Err != nil {
		out = append(out, formatErr(r.Err))
	}
	if r.Session != 0 {
		out = append(out, fmt.Sprintf("session %d", r.Session))
	}
	if r.Epoch != 0 {
		out = append(out, fmt.Sprintf("epoch %d", r.Epoch))
	}
	if r.Stat != (Stat{}) {
		out = append(out, "stat "+formatStat(r.Stat))
	}
	if !r.Seq.IsZero() {
		out = append(out, "seq "+r.Seq.String())
	}
	if r.Queued {
		out = append(out, "queued")
	}
	for _, g := range r.Grants {
		out = append(out, fmt.Sprintf("grant s=%d id=%d %s", g.Session, g.WaitID, g.Seq))
	}
	for _, w := range r.Cancelled {
		out = append(out, fmt.Sprintf("cancelled s=%d id=%d %s", w.Session, w.WaitID, w.Path))
	}
	for _, d := range r.Delayed {
		out = append(out, fmt.Sprintf("delayed %s until=%s", d.Path, fmtTime(d.Until)))
	}
	for _, id := range r.Ended {
		out = append(out, fmt.Sprintf("ended %d", id))
	}
	if len(out) == 0 {
		out = append(out, "ok")
	}
	return out
}

func modeLetter(m Mode) string {
	switch m {
	case Exclusive:
		return "X"
	case Shared:
		return "S"
	case 0:
		return "-"
	}
	return m.String()
}

func fmtSet(m map[string]struct{}) string {
	return "[" + strings.Join(sortedKeys(m), " ") + "]"
}

// dumpState prints the whole state, derived indexes included, in a canonical
// order. Two states that dump identically behave identically. withApplied
// includes the applied raft index, which even a failed command advances.
func dumpState(s *State, withApplied bool) string {
	var b strings.Builder
	fmt.Fprintf(&b, "cell=%s epoch=%d counter=%d next-session=%d", s.cell, s.epoch, s.counter, s.nextSession)
	if withApplied {
		fmt.Fprintf(&b, " applied=%d", s.applied)
	}
	b.WriteByte('\n')
	ids := make([]uint64, 0, len(s.sessions))
	for id := range s.sessions {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	for _, id := range ids {
		rec := s.sessions[id]
		fmt.Fprintf(&b, "session %d ttl=%v created=%s locks=%s waits=%s ephemerals=%s\n",
			rec.ID, time.Duration(rec.TTL), fmtTime(rec.Created), fmtSet(rec.locks), fmtSet(rec.waits), fmtSet(rec.ephemerals))
	}
	paths := make([]string, 0, len(s.nodes))
	for p := range s.nodes {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	for _, p := range paths {
		n := s.nodes[p]
		fmt.Fprintf(&b, "%s %s", p, formatStat(n.Stat))
		if n.Stat.IsDir {
			fmt.Fprintf(&b, " children=%s", fmtSet(n.children))
		} else if len(n.Data) > 0 {
			d := n.Data
			if len(d) > 16 {
				d = d[:16]
			}
			fmt.Fprintf(&b, " data=%q", d)
			if len(n.Data) > 16 {
				b.WriteString("...")
			}
		}
		if len(n.Holders) > 0 || n.LockMode != 0 {
			hs := make([]uint64, 0, len(n.Holders))
			for id := range n.Holders {
				hs = append(hs, id)
			}
			sort.Slice(hs, func(i, j int) bool { return hs[i] < hs[j] })
			var parts []string
			for _, id := range hs {
				h := n.Holders[id]
				parts = append(parts, fmt.Sprintf("s%d:%s(id=%d,delay=%v)", id, modeLetter(h.Mode), h.WaitID, time.Duration(h.LockDelay)))
			}
			fmt.Fprintf(&b, " lock=%s holders=[%s]", modeLetter(n.LockMode), strings.Join(parts, " "))
		}
		if len(n.Waiters) > 0 {
			var parts []string
			for _, w := range n.Waiters {
				parts = append(parts, fmt.Sprintf("s%d:%s(id=%d,delay=%v)", w.Session, modeLetter(w.Mode), w.WaitID, time.Duration(w.LockDelay)))
			}
			fmt.Fprintf(&b, " waiters=[%s]", strings.Join(parts, " "))
		}
		if n.DelayUntil != 0 {
			fmt.Fprintf(&b, " delay-until=%s", fmtTime(n.DelayUntil))
		}
		if !n.ACL.IsZero() {
			fmt.Fprintf(&b, " acl=%s/%s/%s", n.ACL.Read, n.ACL.Write, n.ACL.Change)
		}
		b.WriteByte('\n')
	}
	names := make([]string, 0, len(s.acls))
	for name := range s.acls {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		fmt.Fprintf(&b, "acl-file %s %v\n", name, s.acls[name].Principals())
	}
	return b.String()
}

// roundTrip snapshots s and restores the snapshot into a fresh State.
func roundTrip(s *State) (*State, error) {
	var buf bytes.Buffer
	if err := s.Snapshot(&buf); err != nil {
		return nil, fmt.Errorf("snapshot: %w", err)
	}
	fresh := New(s.cell)
	if err := fresh.Restore(&buf); err != nil {
		return nil, fmt.Errorf("restore: %w", err)
	}
	return fresh, nil
}

// checkInvariants verifies the structural invariants of the state: the
// namespace tree, the locks (DESIGN.md invariant 1), the queues, and the
// derived per-session indexes against the nodes they index.
func checkInvariants(s *State) error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }

	root, ok := s.nodes[s.root]
	if !ok || !root.Stat.IsDir {
		bad("root %s missing or not a directory", s.root)
	}
	for p, n := range s.nodes {
		for _, g := range []uint64{n.Stat.Instance, n.Stat.ContentGen, n.Stat.LockGen, n.Stat.ACLGen} {
			if g > s.counter {
				bad("%s: generation %d is above the counter %d", p, g, s.counter)
			}
		}
		if n.Stat.IsDir {
			if n.children == nil {
				bad("%s: directory without a children index", p)
			}
			for c := range n.children {
				if _, ok := s.nodes[p+"/"+c]; !ok {
					bad("%s: child %q does not exist", p, c)
				}
			}
			if n.Stat.Ephemeral {
				bad("%s: an ephemeral directory", p)
			}
		} else if len(n.children) > 0 {
			bad("%s: a file with children", p)
		}
		if p != s.root {
			if err := CheckPath(s.cell, p); err != nil {
				bad("%s: stored under a bad path: %v", p, err)
			}
			dir, name := Split(p)
			parent, ok := s.nodes[dir]
			switch {
			case !ok:
				bad("%s: parent missing", p)
			case !parent.Stat.IsDir:
				bad("%s: parent is a file", p)
			default:
				if _, ok := parent.children[name]; !ok {
					bad("%s: missing from its parent's children", p)
				}
			}
		}
		if n.Stat.Ephemeral {
			rec, ok := s.sessions[n.Stat.Owner]
			if !ok {
				bad("%s: ephemeral node of dead session %d", p, n.Stat.Owner)
			} else if _, ok := rec.ephemerals[p]; !ok {
				bad("%s: missing from session %d's ephemerals", p, n.Stat.Owner)
			}
		}

		// Invariant 1: either one exclusive holder or any number of shared ones.
		switch {
		case len(n.Holders) == 0 && n.LockMode != 0:
			bad("%s: free lock with mode %v", p, n.LockMode)
		case len(n.Holders) > 0 && !n.LockMode.valid():
			bad("%s: held lock with mode %v", p, n.LockMode)
		case n.LockMode == Exclusive && len(n.Holders) != 1:
			bad("%s: exclusive lock with %d holders", p, len(n.Holders))
		}
		for id, h := range n.Holders {
			if h.Mode != n.LockMode {
				bad("%s: holder %d in %v but the lock is %v", p, id, h.Mode, n.LockMode)
			}
			rec, ok := s.sessions[id]
			if !ok {
				bad("%s: held by dead session %d", p, id)
			} else if _, ok := rec.locks[p]; !ok {
				bad("%s: holder %d does not list it in its locks", p, id)
			}
		}
		if len(n.Holders) > 0 && n.Stat.LockGen == 0 {
			bad("%s: held at lock generation 0", p)
		}
		seen := map[uint64]bool{}
		for _, w := range n.Waiters {
			if seen[w.Session] {
				bad("%s: session %d queued twice", p, w.Session)
			}
			seen[w.Session] = true
			if !w.Mode.valid() {
				bad("%s: waiter %d with mode %v", p, w.Session, w.Mode)
			}
			if _, ok := n.Holders[w.Session]; ok {
				bad("%s: session %d both holds and waits", p, w.Session)
			}
			rec, ok := s.sessions[w.Session]
			if !ok {
				bad("%s: waiter of dead session %d (etcd #9921)", p, w.Session)
			} else if _, ok := rec.waits[p]; !ok {
				bad("%s: waiter %d does not list it in its waits", p, w.Session)
			}
		}
		// Queue liveness: a head that could be granted is never left waiting.
		if len(n.Waiters) > 0 {
			head := n.Waiters[0]
			if len(n.Holders) == 0 && n.DelayUntil == 0 {
				bad("%s: free lock, no lock-delay, yet %d waiters", p, len(n.Waiters))
			}
			if len(n.Holders) > 0 && n.LockMode == Shared && head.Mode == Shared {
				bad("%s: shared head waiter %d left queued behind shared holders", p, head.Session)
			}
		}
	}
	// The parsed ACL files are exactly the files under the ACL directory.
	parsed := s.acls
	s.rebuildACLs()
	if got, want := fmt.Sprint(aclFiles(parsed)), fmt.Sprint(aclFiles(s.acls)); got != want {
		bad("parsed ACL files %s, the files under %s say %s", got, s.aclDir(), want)
	}
	s.acls = parsed
	for id, rec := range s.sessions {
		if id != rec.ID {
			bad("session %d stored under id %d", rec.ID, id)
		}
		if id > s.nextSession {
			bad("session %d is above next-session %d", id, s.nextSession)
		}
		for p := range rec.locks {
			if n, ok := s.nodes[p]; !ok {
				bad("session %d lists lock on missing %s", id, p)
			} else if _, ok := n.Holders[id]; !ok {
				bad("session %d lists lock on %s it does not hold", id, p)
			}
		}
		for p := range rec.waits {
			n, ok := s.nodes[p]
			if !ok {
				bad("session %d lists wait on missing %s", id, p)
				continue
			}
			found := false
			for _, w := range n.Waiters {
				found = found || w.Session == id
			}
			if !found {
				bad("session %d lists wait on %s where it is not queued", id, p)
			}
		}
		for p := range rec.ephemerals {
			if n, ok := s.nodes[p]; !ok || !n.Stat.Ephemeral || n.Stat.Owner != id {
				bad("session %d lists ephemeral %s it does not own", id, p)
			}
		}
	}
	return errors.Join(errs...)
}

// aclFiles prints parsed ACL files by name, in order.
func aclFiles(m map[string]*ACLFile) []string {
	var out []string
	for name, f := range m {
		out = append(out, fmt.Sprintf("%s=%v", name, f.Principals()))
	}
	sort.Strings(out)
	return out
}
