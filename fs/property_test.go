package fs

// Property tests: random command sequences from a few sessions on a few
// paths, applied to three States at once:
//
//	prim  the state under test, checked against the invariants after every step
//	ref   given the same commands from the start: determinism (DESIGN.md: every
//	      replica applies the same log and must produce the same results)
//	twin  replaced now and then by Snapshot+Restore of prim: a restored
//	      replica must behave exactly like the one it was taken from
//
// After every command the test checks the structural invariants
// (checkInvariants), mutual exclusion, lock-generation monotonicity, FIFO
// granting, lock-delay, fencing and that a failed command changed nothing.

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"
)

// propPaths are the paths commands name: a few that usually exist, one that
// is usually an ephemeral file (e), and bad ones (a/y under a file, nodir/z
// under nothing, an empty component).
var propPaths = []string{
	"/ls/local/a", "/ls/local/a", "/ls/local/b", "/ls/local/e", "/ls/local/d/x", "/ls/local",
	"/ls/local/a", "/ls/local/b", "/ls/local/e", "/ls/local/d", "/ls/local/d/x",
	"/ls/local/a/y", "/ls/local/nodir/z", "/ls/local//bad",
}

// lockView is what the checker remembers of one node's lock between steps.
type lockView struct {
	exists   bool
	instance uint64
	gen      uint64
	mode     Mode
	holders  map[uint64]bool
	queue    []Wait // (session, waitID) in queue order; Path is the node's
	delay    int64
}

func viewLocks(s *State) map[string]lockView {
	out := map[string]lockView{}
	for p, n := range s.nodes {
		v := lockView{exists: true, instance: n.Stat.Instance, gen: n.Stat.LockGen, mode: n.LockMode,
			holders: map[uint64]bool{}, delay: n.DelayUntil}
		for id := range n.Holders {
			v.holders[id] = true
		}
		for _, w := range n.Waiters {
			v.queue = append(v.queue, Wait{Session: w.Session, Path: p, WaitID: w.WaitID})
		}
		out[p] = v
	}
	return out
}

type propModel struct {
	t     *rapid.T
	prim  *State
	ref   *State
	twin  *State
	now   int64
	index uint64

	// maxGen is the highest lock generation ever seen for a path, over all
	// incarnations of the name.
	maxGen map[string]uint64
	// issued are the sequencers handed out so far; dead are those seen
	// invalid after they were issued (they must never come back).
	issued []Sequencer
	dead   map[Sequencer]bool
	// delayUntil is the lock-delay the model expects for a node incarnation
	// (path, instance), from expiries of holders that chose one.
	delayUntil map[string]int64
	log        []string
	// paths is propPaths, or in a contended run just two paths, so that
	// queues grow and sessions wait on several locks at once.
	paths []string
}

func newPropModel(t *rapid.T) *propModel {
	m := &propModel{t: t, prim: New("local"), ref: New("local"), twin: New("local"), now: testEpoch,
		maxGen: map[string]uint64{}, dead: map[Sequencer]bool{}, delayUntil: map[string]int64{}, paths: propPaths}
	if rapid.Bool().Draw(t, "contended") {
		m.paths = []string{"/ls/local/a", "/ls/local/b"}
	}
	return m
}

func incarnation(p string, inst uint64) string { return fmt.Sprintf("%s#%d", p, inst) }

func (m *propModel) fatalf(format string, args ...any) {
	m.t.Fatalf("%s\ncommands so far:\n%s", fmt.Sprintf(format, args...), strings.Join(m.log, "\n"))
}

// sessionID draws a session: usually a live one, sometimes 0 or a dead or
// never-created id.
func (m *propModel) sessionID(label string) uint64 {
	var ids []uint64
	for range 5 {
		for _, si := range m.prim.Sessions() {
			ids = append(ids, si.ID)
		}
	}
	for id := uint64(1); id <= m.prim.nextSession; id++ {
		ids = append(ids, id)
	}
	ids = append(ids, 0, m.prim.nextSession+1)
	return rapid.SampledFrom(ids).Draw(m.t, label)
}

func (m *propModel) instance(p string) uint64 {
	switch rapid.IntRange(0, 7).Draw(m.t, "instance-kind") {
	case 0:
		if n, ok := m.prim.nodes[p]; ok {
			return n.Stat.Instance
		}
		return 0
	case 1:
		return rapid.Uint64Range(1, m.prim.counter+1).Draw(m.t, "instance")
	}
	return 0
}

func (m *propModel) sequencer() *Sequencer {
	if len(m.issued) == 0 || rapid.IntRange(0, 2).Draw(m.t, "fenced") != 0 {
		return nil
	}
	s := rapid.SampledFrom(m.issued).Draw(m.t, "seq")
	return &s
}

func (m *propModel) data() []byte {
	switch rapid.IntRange(0, 60).Draw(m.t, "data-kind") {
	case 0:
		return repeatByte('m', MaxContents)
	case 1:
		return repeatByte('o', MaxContents+1)
	}
	return []byte(rapid.StringMatching(`[a-c]{0,3}`).Draw(m.t, "data"))
}

// genCommand draws one command (or nil after a time step or a snapshot).
func (m *propModel) genCommand() *Command {
	path := func() string { return rapid.SampledFrom(m.paths).Draw(m.t, "path") }
	c := &Command{}
	// Weighted: locks are where the interesting interleavings are.
	kinds := []int{6, 11, 7, 9, 8, 12, 6, 13, 3, 2, 17, 7, 1, 0, 4, 8, 11, 14, 5, 10, 18, 6, 12, 0, 15, 2, 7, 16, 19, 1, 3, 13, 8}
	switch op := rapid.SampledFrom(kinds).Draw(m.t, "op"); op {
	case 0:
		c = NewCommand(&CreateSession{TTL: rapid.SampledFrom([]int64{int64(12 * time.Second), int64(12 * time.Second), 0}).Draw(m.t, "ttl")})
	case 1:
		c = cmdFor(m.sessionID("session"), &EndSession{Expired: rapid.Bool().Draw(m.t, "expired")})
	case 2:
		sess := m.sessionID("session")
		b := &Create{Path: path()}
		b.IsDir = rapid.IntRange(0, 2).Draw(m.t, "dir") == 0 || b.Path == "/ls/local/d"
		b.Ephemeral = rapid.IntRange(0, 2).Draw(m.t, "ephemeral") == 0 || b.Path == "/ls/local/e"
		b.Exclusive = rapid.Bool().Draw(m.t, "excl")
		b.Data = m.data()
		c = cmdFor(sess, b)
	case 3, 4:
		sess := m.sessionID("session")
		b := &SetContents{Path: path()}
		b.Data = m.data()
		b.Create = rapid.Bool().Draw(m.t, "create")
		if rapid.IntRange(0, 2).Draw(m.t, "cas") == 0 {
			b.CAS = true
			b.ContentGen = 0
			if n, ok := m.prim.nodes[b.Path]; ok && rapid.Bool().Draw(m.t, "cas-current") {
				b.ContentGen = n.Stat.ContentGen
			} else if rapid.Bool().Draw(m.t, "cas-random") {
				b.ContentGen = rapid.Uint64Range(0, m.prim.counter+1).Draw(m.t, "cas-gen")
			}
		}
		b.Seq = m.sequencer()
		b.Instance = m.instance(b.Path)
		c = cmdFor(sess, b)
	case 5:
		sess := m.sessionID("session")
		b := &Delete{Path: path()}
		b.Instance = m.instance(b.Path)
		b.Seq = m.sequencer()
		c = cmdFor(sess, b)
	case 6, 7, 8:
		sess := m.sessionID("session")
		b := &Acquire{Path: path()}
		b.Mode = rapid.SampledFrom([]Mode{Exclusive, Exclusive, Exclusive, Shared, Shared, Shared, Shared, 0, 3}).Draw(m.t, "mode")
		b.Wait = rapid.IntRange(0, 2).Draw(m.t, "wait") != 0
		b.WaitID = rapid.Uint64Range(0, 3).Draw(m.t, "wait-id")
		b.LockDelay = rapid.SampledFrom([]int64{0, 0, int64(5 * time.Second), int64(15 * time.Second), int64(15 * time.Second), int64(15 * time.Second), int64(61 * time.Second), -1}).Draw(m.t, "lock-delay")
		b.Instance = m.instance(b.Path)
		c = cmdFor(sess, b)
	case 9, 10:
		sess := m.sessionID("session")
		b := &CancelWait{Path: path()}
		b.WaitID = rapid.Uint64Range(0, 3).Draw(m.t, "wait-id")
		// Mostly cancel a wait that exists (or was just granted).
		var known []Wait
		for p, n := range m.prim.nodes {
			for _, w := range n.Waiters {
				known = append(known, Wait{Session: w.Session, Path: p, WaitID: w.WaitID})
			}
			for id, h := range n.Holders {
				known = append(known, Wait{Session: id, Path: p, WaitID: h.WaitID})
			}
		}
		if len(known) > 0 && rapid.IntRange(0, 3).Draw(m.t, "cancel-known") != 0 {
			slices.SortFunc(known, func(a, b Wait) int { return strings.Compare(fmt.Sprint(a), fmt.Sprint(b)) })
			w := rapid.SampledFrom(known).Draw(m.t, "known-wait")
			sess, b.Path, b.WaitID = w.Session, w.Path, w.WaitID
		}
		c = cmdFor(sess, b)
	case 11, 12:
		sess := m.sessionID("session")
		b := &Release{Path: path()}
		if n, ok := m.prim.nodes[b.Path]; ok && rapid.IntRange(0, 3).Draw(m.t, "release-current") != 0 {
			b.LockGen = n.Stat.LockGen
		} else {
			b.LockGen = rapid.Uint64Range(0, m.prim.counter+1).Draw(m.t, "release-gen")
		}
		c = cmdFor(sess, b)
	case 13, 14:
		c = NewCommand(&GrantDelayed{Path: path()})
	case 15:
		c = NewCommand(&NewEpoch{})
	case 16:
		c.Op = rapid.SampledFrom([]Op{OpInvalid, opMax, opMax + 7}).Draw(m.t, "bad-op")
	case 17, 18:
		d := rapid.SampledFrom([]time.Duration{time.Second, 5 * time.Second, 15 * time.Second, time.Minute}).Draw(m.t, "advance")
		m.now += int64(d)
		m.log = append(m.log, fmt.Sprintf("advance %v", d))
		return nil
	case 19:
		twin, err := roundTrip(m.prim)
		if err != nil {
			m.fatalf("snapshot round trip: %v", err)
		}
		m.twin = twin
		m.log = append(m.log, "snapshot+restore into twin")
		return nil
	}
	c.Now = m.now
	return c
}

// clone gives each State its own copy of a command, through the log
// encoding when the op is a valid one.
func (m *propModel) clone(c *Command) *Command {
	if c.Op == OpInvalid || c.Op >= opMax {
		cc := *c
		return &cc
	}
	b, err := c.Encode()
	if err != nil {
		m.fatalf("encode %+v: %v", c, err)
	}
	d, err := DecodeCommand(b)
	if err != nil {
		m.fatalf("decode %+v: %v", c, err)
	}
	return d
}

// describe prints a command for a failure's log: its envelope and its
// body's fields as the log encodes them.
func describe(cmd *Command) string {
	c := cmd.flatten()
	var b strings.Builder
	fmt.Fprintf(&b, "%v s=%d %q", c.Op, c.Session, c.Path)
	if c.Op == OpAcquire {
		fmt.Fprintf(&b, " mode=%v wait=%v id=%d delay=%v", c.Mode, c.Wait, c.WaitID, time.Duration(c.LockDelay))
	}
	if c.Instance != 0 {
		fmt.Fprintf(&b, " inst=%d", c.Instance)
	}
	if c.Gen != 0 || c.CAS {
		fmt.Fprintf(&b, " gen=%d cas=%v", c.Gen, c.CAS)
	}
	if c.Seq != nil {
		fmt.Fprintf(&b, " seq=%s", c.Seq)
	}
	if c.IsDir || c.Ephemeral || c.Exclusive || c.Create || c.Expired {
		fmt.Fprintf(&b, " dir=%v eph=%v excl=%v create=%v expired=%v", c.IsDir, c.Ephemeral, c.Exclusive, c.Create, c.Expired)
	}
	if len(c.Data) > 0 {
		fmt.Fprintf(&b, " data=%d bytes", len(c.Data))
	}
	fmt.Fprintf(&b, " now=%s", fmtTime(c.Now))
	return b.String()
}

// observe is what a client can see of a State through its read methods.
func (m *propModel) observe(s *State) string {
	var b strings.Builder
	paths := append(slices.Clone(propPaths), "/ls/local/c", "/ls/other/a")
	slices.Sort(paths)
	for _, p := range slices.Compact(paths) {
		st, err := s.Stat(p)
		fmt.Fprintf(&b, "stat %s: %v %v\n", p, st, err)
		ch, err := s.Children(p, 0)
		fmt.Fprintf(&b, "children %s: %v %v\n", p, ch, err)
		for _, si := range s.Sessions() {
			if seq, err := s.HeldSequencer(si.ID, p); err == nil {
				fmt.Fprintf(&b, "held %d %s: %v\n", si.ID, p, seq)
			}
		}
	}
	for _, seq := range m.issued {
		fmt.Fprintf(&b, "check %s: %v\n", seq, s.CheckSequencer(seq))
	}
	fmt.Fprintf(&b, "sessions %v delayed %v epoch %d\n", s.Sessions(), s.DelayedLocks(), s.Epoch())
	return b.String()
}

// step applies one command to all three States and checks everything.
func (m *propModel) step(c *Command) {
	m.index++
	m.log = append(m.log, describe(c))
	beforeDump := dumpState(m.prim, false)
	before := viewLocks(m.prim)
	beforeContentGen := map[string]uint64{}
	for p, n := range m.prim.nodes {
		beforeContentGen[p] = n.Stat.ContentGen
	}
	var fence *Sequencer
	switch b := c.Body.(type) {
	case *SetContents:
		fence = b.Seq
	case *Delete:
		fence = b.Seq
	}
	fenceValidBefore := fence != nil && m.prim.CheckSequencer(*fence)
	end, ok := c.Body.(*EndSession)
	expires := ok && end.Expired
	// Lock-delay the model expects when this command expires a session.
	if expires {
		if rec, ok := m.prim.sessions[c.Session]; ok {
			for p := range rec.locks {
				n := m.prim.nodes[p]
				if h := n.Holders[c.Session]; h.LockDelay > 0 {
					k := incarnation(p, n.Stat.Instance)
					m.delayUntil[k] = max(m.delayUntil[k], c.Now+h.LockDelay)
				}
			}
		}
	}

	r := m.prim.Apply(m.index, m.clone(c))
	rRef := m.ref.Apply(m.index, m.clone(c))
	rTwin := m.twin.Apply(m.index, m.clone(c))

	got := strings.Join(formatResult(r), "\n")
	if ref := strings.Join(formatResult(rRef), "\n"); got != ref {
		m.fatalf("non-deterministic result of %s:\nprim:\n%s\nref:\n%s", describe(c), got, ref)
	}
	if twin := strings.Join(formatResult(rTwin), "\n"); got != twin {
		m.fatalf("restored state answered %s differently:\nprim:\n%s\ntwin:\n%s", describe(c), got, twin)
	}
	if err := checkInvariants(m.prim); err != nil {
		m.fatalf("invariants after %s:\n%v\nresult:\n%s\nstate:\n%s", describe(c), err, got, dumpState(m.prim, true))
	}
	after := dumpState(m.prim, true)
	if d := dumpState(m.ref, true); d != after {
		m.fatalf("ref state differs after %s:\nprim:\n%s\nref:\n%s", describe(c), after, d)
	}
	if d := dumpState(m.twin, true); d != after {
		m.fatalf("twin state differs after %s:\nprim:\n%s\ntwin:\n%s", describe(c), after, d)
	}
	// (ref is compared through its dump; twin also through its reads.)
	if o, ot := m.observe(m.prim), m.observe(m.twin); o != ot {
		m.fatalf("reads of the restored state differ after %s:\nprim:\n%s\ntwin:\n%s", describe(c), o, ot)
	}

	// A failed command leaves the state unchanged and has no effects.
	if r.Err != nil {
		if d := dumpState(m.prim, false); d != beforeDump {
			m.fatalf("failed command %s (%v) changed the state:\nbefore:\n%s\nafter:\n%s", describe(c), r.Err, beforeDump, d)
		}
		if len(r.Grants)+len(r.Cancelled)+len(r.Delayed)+len(r.Ended) > 0 || !r.Seq.IsZero() || r.Queued {
			m.fatalf("failed command %s (%v) has effects:\n%s", describe(c), r.Err, got)
		}
		if Codes.Code(r.Err) == "" {
			m.fatalf("%s failed without a sentinel: %v", describe(c), r.Err)
		}
	}
	// Fencing: a write or delete carrying a sequencer succeeds only if the
	// sequencer was valid when it was applied.
	if fence != nil && r.Err == nil && !fenceValidBefore {
		m.fatalf("%s succeeded with a sequencer that was not valid", describe(c))
	}
	if fence != nil && !fenceValidBefore && r.Err != nil && Codes.Code(r.Err) != "bad_sequencer" {
		switch Codes.Code(r.Err) {
		case "session_expired", "bad_path", "too_large", "no_such_node", "stale_handle", "not_empty", "permission_denied":
		default:
			m.fatalf("%s with an invalid sequencer failed with %v, not bad_sequencer", describe(c), r.Err)
		}
	}

	// etcd #22082: a Release frees only the generation it names.
	if rel, ok := c.Body.(*Release); ok && r.Err == nil {
		if b := before[rel.Path]; !b.holders[c.Session] || b.gen != rel.LockGen {
			m.fatalf("%s released a lock held at generation %d by %v", describe(c), b.gen, b.holders)
		}
	}
	// Compare-and-set: a write with CAS succeeds only at the current content
	// generation, or at 0 on a missing file.
	if set, ok := c.Body.(*SetContents); ok && set.CAS && r.Err == nil {
		if cg, ok := beforeContentGen[set.Path]; ok && cg != set.ContentGen || !ok && set.ContentGen != 0 {
			m.fatalf("%s succeeded; content generation before: %d (exists %v)", describe(c), cg, ok)
		}
	}
	// Lock-delay is set only by the expiry of a holder that chose one, to at
	// most now + its delay; a closed session or a release never sets it.
	for p, a := range viewLocks(m.prim) {
		b := before[p]
		if !b.exists || b.instance != a.instance || a.delay <= b.delay {
			continue
		}
		if !expires || a.delay > c.Now+int64(60*time.Second) {
			m.fatalf("%s set the lock-delay of %s to %s (was %s)", describe(c), p, fmtTime(a.delay), fmtTime(b.delay))
		}
	}

	m.checkLocks(c, r, before)
}

// checkLocks checks what happened to every lock in one step.
func (m *propModel) checkLocks(c *Command, r *Result, before map[string]lockView) {
	after := viewLocks(m.prim)
	ended := map[uint64]bool{}
	for _, id := range r.Ended {
		ended[id] = true
	}

	// Every sequencer handed out by this command is valid now, and its
	// session is alive and holds the lock (etcd #9921: never grant a dead
	// waiter).
	var fresh []Sequencer
	if !r.Seq.IsZero() {
		fresh = append(fresh, r.Seq)
		if c.Op != OpAcquire {
			m.fatalf("%s returned a sequencer", describe(c))
		}
	}
	grantsByPath := map[string][]Wait{}
	for _, g := range r.Grants {
		fresh = append(fresh, g.Seq)
		if ended[g.Session] || !m.prim.SessionExists(g.Session) {
			m.fatalf("%s granted %s to dead session %d", describe(c), g.Seq, g.Session)
		}
		if held, err := m.prim.HeldSequencer(g.Session, g.Seq.Path); err != nil || held != g.Seq {
			m.fatalf("%s granted %s to session %d, which holds %v (%v)", describe(c), g.Seq, g.Session, held, err)
		}
		grantsByPath[g.Seq.Path] = append(grantsByPath[g.Seq.Path], Wait{Session: g.Session, Path: g.Seq.Path, WaitID: g.WaitID})
	}
	for _, s := range fresh {
		if !m.prim.CheckSequencer(s) {
			m.fatalf("%s handed out %s, which is not valid after the apply", describe(c), s)
		}
		if m.dead[s] {
			m.fatalf("%s handed out %s again after it had become invalid", describe(c), s)
		}
		if !slices.Contains(m.issued, s) {
			m.issued = append(m.issued, s)
		}
	}
	// A sequencer that became invalid never becomes valid again, and at most
	// one generation of a lock is valid at any time.
	validGen := map[string]uint64{}
	for _, s := range m.issued {
		valid := m.prim.CheckSequencer(s)
		if valid && m.dead[s] {
			m.fatalf("after %s, sequencer %s is valid again", describe(c), s)
		}
		if !valid {
			m.dead[s] = true
			continue
		}
		if g, ok := validGen[s.Path]; ok && g != s.Gen {
			m.fatalf("after %s, two generations of %s are valid: %d and %d", describe(c), s.Path, g, s.Gen)
		}
		validGen[s.Path] = s.Gen
	}

	cancelled := map[Wait]bool{}
	for _, w := range r.Cancelled {
		cancelled[w] = true
	}
	paths := map[string]bool{}
	for p := range before {
		paths[p] = true
	}
	for p := range after {
		paths[p] = true
	}
	for p := range paths {
		b, a := before[p], after[p]
		if !a.exists {
			continue
		}
		sameNode := b.exists && b.instance == a.instance
		// Invariant 1: the lock generation of a path never decreases, even
		// across deletion and re-creation of the name ...
		if a.gen < m.maxGen[p] {
			m.fatalf("after %s, lock generation of %s went down from %d to %d", describe(c), p, m.maxGen[p], a.gen)
		}
		heldBefore := sameNode && len(b.holders) > 0
		overlap := false
		for id := range a.holders {
			overlap = overlap || (sameNode && b.holders[id])
		}
		switch {
		case len(a.holders) > 0 && overlap:
			// ... stays the same while the lock is held throughout (a shared
			// holder joining does not change it) ...
			if a.gen != b.gen {
				m.fatalf("after %s, %s stayed held by %v but its generation moved %d → %d", describe(c), p, a.holders, b.gen, a.gen)
			}
		case len(a.holders) > 0:
			// ... and strictly increases at each free→held transition, above
			// every generation this name ever had.
			if a.gen <= m.maxGen[p] || (heldBefore && a.gen <= b.gen) {
				m.fatalf("after %s, %s went free→held at generation %d, not above %d", describe(c), p, a.gen, m.maxGen[p])
			}
			// Invariant 8: no free→held transition inside a lock-delay.
			if until := m.delayUntil[incarnation(p, a.instance)]; c.Now < until {
				m.fatalf("after %s, %s was granted at %s inside its lock-delay (until %s)", describe(c), p, fmtTime(c.Now), fmtTime(until))
			}
		default:
			if sameNode && a.gen != b.gen {
				m.fatalf("after %s, free lock %s changed generation %d → %d", describe(c), p, b.gen, a.gen)
			}
		}
		m.maxGen[p] = max(m.maxGen[p], a.gen)

		// FIFO: the waiters granted by this command are the head of the
		// queue as it was, minus the waits this command cancelled; the rest
		// keep their order (a new waiter may join at the end).
		if !sameNode {
			if len(grantsByPath[p]) > 0 {
				m.fatalf("%s granted waiters of the new node %s", describe(c), p)
			}
			continue
		}
		var q []Wait
		for _, w := range b.queue {
			if !cancelled[w] {
				q = append(q, w)
			}
		}
		got := append(slices.Clone(grantsByPath[p]), a.queue...)
		if acq, ok := c.Body.(*Acquire); ok && r.Queued && acq.Path == p && len(got) == len(q)+1 {
			q = append(q, Wait{Session: c.Session, Path: p, WaitID: acq.WaitID})
		}
		if !slices.Equal(got, q) {
			m.fatalf("%s broke the FIFO order of %s:\nqueue before (minus cancelled): %v\ngranted: %v\nqueue after: %v",
				describe(c), p, q, grantsByPath[p], a.queue)
		}
	}
	for p, g := range grantsByPath {
		if a, ok := after[p]; !ok || !a.exists {
			m.fatalf("%s granted %v on %s, which does not exist after the apply", describe(c), g, p)
		}
	}
}

func TestPropertyStateMachine(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		m := newPropModel(t)
		// Start with a few sessions and nodes so that short runs reach locks.
		for _, c := range []*Command{
			NewCommand(&CreateSession{TTL: int64(12 * time.Second)}),
			NewCommand(&CreateSession{TTL: int64(12 * time.Second)}),
			NewCommand(&CreateSession{TTL: int64(12 * time.Second)}),
			NewCommand(&CreateSession{TTL: int64(12 * time.Second)}),
			NewCommand(&Create{Path: "/ls/local/a"}),
			NewCommand(&Create{Path: "/ls/local/b"}),
			NewCommand(&Create{Path: "/ls/local/d", IsDir: true}),
			NewCommand(&Create{Path: "/ls/local/d/x"}),
		} {
			c.Now = m.now
			m.step(c)
		}
		steps := rapid.IntRange(1, 200).Draw(t, "steps")
		for i := 0; i < steps; i++ {
			if c := m.genCommand(); c != nil {
				m.step(c)
			}
		}
	})
}

// TestPropertyDeterminism replays one random command log on two fresh States
// and compares every result and the final snapshot contents: replicas that
// apply the same log agree.
func TestPropertyDeterminism(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		m := newPropModel(t)
		var cmds []*Command
		for _, c := range []*Command{
			NewCommand(&CreateSession{TTL: 1}),
			NewCommand(&CreateSession{TTL: 1}),
			NewCommand(&Create{Path: "/ls/local/a"}),
			NewCommand(&Create{Path: "/ls/local/b"}),
		} {
			cmds = append(cmds, c)
			m.index++
			m.prim.Apply(m.index, m.clone(c))
		}
		n := rapid.IntRange(1, 100).Draw(t, "steps")
		for i := 0; i < n; i++ {
			c := m.genCommand()
			if c == nil {
				continue
			}
			cmds = append(cmds, c)
			m.index++
			m.prim.Apply(m.index, m.clone(c)) // drives the generator's view
		}
		a, b := New("local"), New("local")
		for i, c := range cmds {
			ra := formatResult(a.Apply(uint64(i+1), m.clone(c)))
			rb := formatResult(b.Apply(uint64(i+1), m.clone(c)))
			if !slices.Equal(ra, rb) {
				t.Fatalf("command %d (%s): results differ:\n%v\n%v", i, describe(c), ra, rb)
			}
		}
		if da, db := dumpState(a, true), dumpState(b, true); da != db {
			t.Fatalf("final states differ:\n%s\n%s", da, db)
		}
		ra, err := roundTrip(a)
		if err != nil {
			t.Fatal(err)
		}
		if da, dr := dumpState(a, true), dumpState(ra, true); da != dr {
			t.Fatalf("restored state differs:\n%s\n%s", da, dr)
		}
	})
}
