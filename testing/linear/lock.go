package linear

// The lock model: porcupine's sequential specification of one lock node,
// the promises of DESIGN invariants 1 and 2 (mutual exclusion, generations
// that grow at every free→held transition, CheckSequencer true iff the lock
// is held now in that mode at that generation), checked one lock path at a
// time.
//
//	rec := linear.NewRecorder()
//	op := rec.BeginLock(worker, linear.LockInput{Kind: linear.LockAcquire, Lock: path, Session: s})
//	err := h.Acquire(ctx, client.Exclusive)
//	switch {
//	case err == nil:      op.End(linear.LockOutput{OK: true, Gen: seq.Gen})
//	case definite(err):   op.End(linear.LockOutput{})   // ErrLockHeld, ErrLockDelay, ...
//	default:              op.EndUnknown()               // timed out, connection lost
//	}
//	...
//	rec.AddLost(worker, s, "", lastAlive, learned)          // the session expired
//	linear.Check(t, linear.LockModel, rec.History(), rec.Annotations()...)

import (
	"fmt"
	"hash/fnv"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/anishathalye/porcupine"
	"github.com/chubby-dev/chubby/internal/enum"
)

// LockKind is the kind of a lock operation.
type LockKind int

// The lock operations. The zero LockKind is none of them, so that a
// LockInput left unset is caught (the model panics on it).
const (
	// LockAcquire is an Acquire by Session in the mode Shared says.
	LockAcquire LockKind = iota + 1
	// LockRelease is a Release by Session of its hold at generation Gen.
	// Gen 0 stands for whatever generation Session holds (a hold given
	// back without naming it, as a CancelWait racing a grant does).
	LockRelease
	// LockCheck is a CheckSequencer of (Lock, Shared, Gen) by anyone;
	// Session is not used.
	LockCheck
	// LockLost is the expiry of Session by the master, which frees every
	// lock Session held. Record it with AddLost (or LostOperation).
	LockLost
)

var lockKindNames = [...]string{LockAcquire: "acquire", LockRelease: "release", LockCheck: "check", LockLost: "lost"}

func (k LockKind) String() string { return enum.Name(lockKindNames[:], k, "LockKind") }

// LockInput is a lock operation on the lock node Lock (a path) on behalf
// of session Session. Shared is the mode (of Acquire and Check); Gen is the
// generation a Release or a Check names.
//
// A LockLost with Lock "" applies to every lock of the history on which
// Session has an Acquire or a Release: record a session's expiry once.
type LockInput struct {
	Kind    LockKind
	Lock    string
	Session int
	Shared  bool
	Gen     uint64

	// followed is set by Partition on a LockLost after which an operation
	// the expiry constrains may still be linearized (one of the session's
	// successful or unknown Acquires, or unknown Releases, that returns
	// after lastAlive): only then does the model remember the session as
	// expired, so that the expired sessions of a long run do not weigh on
	// every state.
	followed bool
}

// LockOutput is what a lock operation returned. OK: the Acquire acquired,
// the Release released, the Check found the sequencer valid; Gen: the
// generation an Acquire got. Unknown: the outcome is unknown (the call
// timed out or its connection failed): it may have taken effect, at any
// time after its call, or never; OK and Gen are then ignored.
//
// !OK && !Unknown is a definite failure: an Acquire or Release that
// changed nothing, a Check that found the sequencer invalid.
type LockOutput struct {
	OK      bool
	Gen     uint64
	Unknown bool
}

// LockModel is porcupine's model of lock nodes, checked one lock path at a
// time (each partition starts free, with no generation issued).
//
// State: the mode (free, exclusive, shared), the holding sessions, the
// current generation (possibly not seen yet: see below), the least the
// highest generation issued so far can be, the sessions whose expiry has
// been linearized, and the pending operations: those whose outcome is
// unknown and that may still take effect. Rules (Step):
//
//   - Acquire(S, mode) → OK at G: S has not expired, and either the lock
//     is free and G is greater than every generation issued before (the
//     lock becomes held in mode by S at G), or it is held shared, the mode
//     is shared and G is the current generation (S joins), or S already
//     holds it in that mode and G is the current generation (a repeated
//     Acquire answers the hold S has, as fs does).
//   - Acquire failed: no change, always possible (lock-delay, conflicts,
//     a session the cell does not know).
//   - Release(S, G) → OK: S holds the lock and G is the current generation
//     (or 0); S stops holding it, and the lock is free once nobody holds
//     it. Failed: no change, always possible.
//   - Check(G, mode) → valid iff the lock is held in mode at G now.
//   - Lost(S): S stops holding the lock and has expired: a later
//     successful Acquire by S is a violation, and S's pending operations
//     are dropped (the cell applies nothing for an expired session).
//   - An unknown Acquire or Release, and a Lost never confirmed to the
//     client, becomes pending where it is linearized (at its call: see
//     Partition). Before every later operation, any pending operation that
//     can take effect then may do so, or not (the model is
//     nondeterministic: it keeps every possibility).
//   - A pending Acquire that takes the lock issues a generation nobody saw:
//     the model knows only that it is greater than every generation issued
//     before it. The first operation that shows the current generation (a
//     Check found valid, a Release by a holder, a repeated or shared
//     Acquire) binds it, and must show one no smaller than that bound;
//     every generation issued after it must be greater than the bound.
//   - An unknown Check is no operation (Partition drops it).
//
// So two exclusive holders at once, a generation that does not grow at a
// free→held transition, a valid Check of a superseded generation, an
// invalid Check while the holder at G provably still holds, and an
// Acquire granted to an expired session are all violations.
//
// Cost. Partition gives every unknown operation (and every Lost with an
// open end) the return time of its call: the pending state carries what
// it may do later. So every operation porcupine places has a bounded
// window, and unknown outcomes do not multiply its search (an operation
// with an open window can go anywhere after its call: each one doubles
// what porcupine must try before it can call a history illegal). The
// model's state is instead the set of states the lock may be in, kept
// small by dropping every state another one dominates (see dominates) and
// every pending operation that can no longer take effect. A run like the
// lock nemesis's (a few workers, exclusive locks, some timeouts) of 3000
// operations checks in well under a second, valid or not. What still
// grows exponentially is the number of pending shared Acquires of sessions
// whose expiry was never confirmed that may have joined a shared lock and
// may still hold it.
var LockModel = lockModel(true)

// lockModel is LockModel; without prune, it keeps every state and every
// pending operation and expired session it could drop (to test that
// dropping them changes no verdict).
func lockModel(prune bool) porcupine.Model {
	partition := partitionLocks
	if !prune {
		partition = func(history []porcupine.Operation) [][]porcupine.Operation {
			parts := partitionLocks(history)
			for _, part := range parts {
				for i, op := range part {
					if in := op.Input.(LockInput); in.Kind == LockLost {
						in.followed = true
						part[i].Input = in
					}
				}
			}
			return parts
		}
	}
	return porcupine.Model{
		Partition: partition,
		Init:      func() any { return lockSet{{}} },
		Step: func(state, input, output any) (bool, any) {
			next := state.(lockSet).step(input.(LockInput), output.(LockOutput), prune)
			return len(next) > 0, next
		},
		Equal:             func(a, b any) bool { return slices.Equal(a.(lockSet), b.(lockSet)) },
		Hash:              func(state any) uint64 { return state.(lockSet).hash() },
		DescribeOperation: describeLockOp,
		DescribeState:     func(state any) string { return state.(lockSet).String() },
		DescribeOperationMetadata: func(info any) string {
			if info == nil {
				return ""
			}
			return fmt.Sprint(info)
		},
	}
}

// lockSet is the states the lock may be in (the model is
// nondeterministic): never empty, none dominated by another (see
// dominates), in a canonical order.
type lockSet []lockState

// step is the operation from every state of the set: pending operations
// may take effect first, then the operation does. Empty: the operation is
// impossible.
func (set lockSet) step(in LockInput, out LockOutput, prune bool) lockSet {
	var next []lockState
	for _, s := range set {
		for _, c := range s.settle(prune) {
			if n, ok := c.apply(in, out); ok {
				if prune {
					n = n.prune()
				}
				next = append(next, n)
			}
		}
	}
	return reduce(next, prune)
}

// reduce makes states a lockSet: sorted, without duplicates or (if prune)
// dominated states.
func reduce(states []lockState, prune bool) lockSet {
	sort.Slice(states, func(i, j int) bool { return states[i].less(states[j]) })
	states = slices.Compact(states)
	if !prune {
		return states
	}
	out := states[:0:0]
	for i, x := range states {
		dominated := false
		for j := i - 1; j >= 0 && states[j].core() == x.core() && !dominated; j-- {
			dominated = states[j].dominates(x)
		}
		for j := i + 1; j < len(states) && states[j].core() == x.core() && !dominated; j++ {
			dominated = states[j].dominates(x)
		}
		if !dominated {
			out = append(out, x)
		}
	}
	return out
}

func (set lockSet) hash() uint64 {
	h := fnv.New64a()
	for _, s := range set {
		fmt.Fprintf(h, "%d|%s|%d|%t|%d|%s|%s/", s.mode, s.holders, s.gen, s.unbound, s.max, s.expired, s.pending)
	}
	return h.Sum64()
}

func (set lockSet) String() string {
	if len(set) == 1 {
		return set[0].String()
	}
	parts := make([]string, len(set))
	for i, s := range set {
		parts[i] = "[" + s.String() + "]"
	}
	return "one of " + strings.Join(parts, " ")
}

// lockState is a state of one lock node. It is comparable (lockSet
// compares states with ==): the session sets are sorted numbers joined by
// commas, the pending operations sorted encodings (pendingOp.encode)
// joined by semicolons.
type lockState struct {
	mode    lockMode
	holders string
	gen     uint64 // the current generation when held and !unbound
	unbound bool   // held at a generation not seen yet; it is ≥ max
	max     uint64 // the least the highest generation issued so far can be
	expired string
	pending string
}

type lockMode uint8

const (
	free lockMode = iota
	exclusive
	shared
)

func modeOf(sharedMode bool) lockMode {
	if sharedMode {
		return shared
	}
	return exclusive
}

func (m lockMode) String() string {
	switch m {
	case exclusive:
		return "exclusive"
	case shared:
		return "shared"
	}
	return "free"
}

func (s lockState) String() string {
	var b strings.Builder
	if s.mode == free {
		fmt.Fprintf(&b, "free; next gen > %d", s.max)
	} else {
		fmt.Fprintf(&b, "%s by s%s at ", s.mode, strings.ReplaceAll(s.holders, ",", ",s"))
		if s.unbound {
			fmt.Fprintf(&b, "gen ≥ %d (unseen)", s.max)
		} else {
			fmt.Fprintf(&b, "gen %d", s.gen)
		}
	}
	if s.expired != "" {
		fmt.Fprintf(&b, "; expired s%s", strings.ReplaceAll(s.expired, ",", ",s"))
	}
	if s.pending != "" {
		var ps []string
		for _, p := range splitPending(s.pending) {
			ps = append(ps, p.String())
		}
		fmt.Fprintf(&b, "; pending %s", strings.Join(ps, ", "))
	}
	return b.String()
}

// lockCore is what the holders see of a lockState.
type lockCore struct {
	mode    lockMode
	holders string
	gen     uint64
	unbound bool
}

func (s lockState) core() lockCore { return lockCore{s.mode, s.holders, s.gen, s.unbound} }

func (s lockState) less(t lockState) bool {
	switch {
	case s.mode != t.mode:
		return s.mode < t.mode
	case s.holders != t.holders:
		return s.holders < t.holders
	case s.gen != t.gen:
		return s.gen < t.gen
	case s.unbound != t.unbound:
		return !s.unbound
	case s.max != t.max:
		return s.max < t.max
	case s.expired != t.expired:
		return s.expired < t.expired
	}
	return s.pending < t.pending
}

// dominates reports whether every history s admits from now on is
// admitted by t too, by its form: the same holders at the same
// generation, a bound on the generations to come no greater, fewer
// expired sessions, more pending operations (each may take effect or not).
// The order is preserved by every step (what x does, a state dominating x
// can do, reaching a state that dominates x's), so a set of states can
// drop the dominated ones: a session that may have expired but holds
// nothing, a pending Acquire that took the lock and was let go unseen,
// leave no trace.
func (t lockState) dominates(s lockState) bool {
	return t.core() == s.core() && t.max <= s.max &&
		subset(setList(t.expired), setList(s.expired), func(a, b int) int { return a - b }) &&
		subset(splitNonEmpty(s.pending, ";"), splitNonEmpty(t.pending, ";"), strings.Compare)
}

func splitNonEmpty(s, sep string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, sep)
}

// subset reports whether the sorted multiset a is contained in the sorted
// multiset b.
func subset[T any](a, b []T, cmp func(T, T) int) bool {
	j := 0
	for _, x := range a {
		for j < len(b) && cmp(b[j], x) < 0 {
			j++
		}
		if j == len(b) || cmp(b[j], x) != 0 {
			return false
		}
		j++
	}
	return true
}

// apply is the operation itself, in a state where the pending operations
// that took effect before it have done so.
func (s lockState) apply(in LockInput, out LockOutput) (lockState, bool) {
	if in.Kind < LockAcquire || in.Kind > LockLost {
		panic(fmt.Sprintf("linear: lock operation of unknown kind %d: %+v", in.Kind, in))
	}
	switch {
	case out.Unknown && in.Kind == LockCheck:
		return s, true
	case out.Unknown:
		// An acquire, release or expiry that may take effect later (the
		// pending op keeps only the fields of its kind).
		return s.addPending(pendingOp{kind: in.Kind, session: in.Session, shared: in.Shared, gen: in.Gen, followed: in.followed}), true
	case !out.OK && (in.Kind == LockAcquire || in.Kind == LockRelease):
		return s, true
	}
	switch in.Kind {
	case LockAcquire:
		return s.acquire(in, out.Gen)
	case LockRelease:
		return s.release(in.Session, in.Gen)
	case LockCheck:
		if out.OK {
			if s.mode != modeOf(in.Shared) {
				return s, false
			}
			return s.bind(in.Gen)
		}
		// An unseen generation may or may not be in.Gen: the model does
		// not record which generations it is not.
		return s, s.mode != modeOf(in.Shared) || s.unbound || s.gen != in.Gen
	}
	return s.lose(in.Session, in.followed), true // LockLost
}

// settle returns the states s can reach by letting some of its pending
// operations take effect, in any order (s itself included), leaving out
// (if prune) those dominated by another.
func (s lockState) settle(prune bool) []lockState {
	out := []lockState{s}
	if s.pending == "" {
		return out
	}
	for i := 0; i < len(out); i++ {
		cur := out[i]
		ps := splitPending(cur.pending)
		for j, p := range ps {
			if j > 0 && ps[j-1] == p {
				continue // a copy does what the first did
			}
			n, ok := cur.takeEffect(p)
			if !ok {
				continue
			}
			n.pending = joinPending(append(ps[:j:j], ps[j+1:]...))
			if prune {
				n = n.prune()
			}
			if !slices.ContainsFunc(out, func(t lockState) bool { return t == n || prune && t.dominates(n) }) {
				out = append(out, n)
			}
		}
	}
	return out
}

// takeEffect is pending operation p taking effect, if it can now and it
// changes the lock (one that changes nothing stays pending: it may change
// something later).
func (s lockState) takeEffect(p pendingOp) (lockState, bool) {
	switch p.kind {
	case LockAcquire:
		return s.acquireUnseen(p.session, modeOf(p.shared))
	case LockRelease:
		return s.release(p.session, p.gen)
	case LockLost:
		return s.lose(p.session, p.followed), true
	}
	return s, false
}

// bind returns s with the current generation shown to be g, if it can be.
func (s lockState) bind(g uint64) (lockState, bool) {
	if !s.unbound {
		return s, s.gen == g
	}
	if g < s.max {
		return s, false
	}
	s.unbound, s.gen, s.max = false, g, g
	return s, true
}

// acquire is an Acquire that returned OK with generation g.
func (s lockState) acquire(in LockInput, g uint64) (lockState, bool) {
	m := modeOf(in.Shared)
	switch {
	case setHas(s.expired, in.Session):
		return s, false
	case setHas(s.holders, in.Session):
		if s.mode != m {
			return s, false
		}
		return s.bind(g)
	case s.mode == free:
		if g <= s.max {
			return s, false
		}
		s.mode, s.holders, s.gen, s.max = m, strconv.Itoa(in.Session), g, g
		return s, true
	case s.mode == shared && m == shared:
		next, ok := s.bind(g)
		next.holders = setAdd(next.holders, in.Session)
		return next, ok
	}
	return s, false
}

// acquireUnseen is an Acquire taking effect with a generation nobody saw;
// false if it cannot take the lock now or would change nothing.
func (s lockState) acquireUnseen(session int, m lockMode) (lockState, bool) {
	switch {
	case setHas(s.expired, session), setHas(s.holders, session):
		return s, false
	case s.mode == free:
		s.mode, s.holders, s.gen, s.unbound, s.max = m, strconv.Itoa(session), 0, true, s.max+1
		return s, true
	case s.mode == shared && m == shared:
		s.holders = setAdd(s.holders, session)
		return s, true
	}
	return s, false
}

// release is a Release by session of generation g (0: any) taking effect.
func (s lockState) release(session int, g uint64) (lockState, bool) {
	if !setHas(s.holders, session) {
		return s, false
	}
	if g != 0 {
		var ok bool
		if s, ok = s.bind(g); !ok {
			return s, false
		}
	}
	s.holders = setDel(s.holders, session)
	if s.holders == "" {
		s.mode, s.gen, s.unbound = free, 0, false
	}
	return s, true
}

// lose expires session: it holds nothing any more, and none of its
// pending operations can take effect. followed: remember it expired.
func (s lockState) lose(session int, followed bool) lockState {
	if next, ok := s.release(session, 0); ok {
		s = next
	}
	if followed {
		s.expired = setAdd(s.expired, session)
	}
	if s.pending != "" {
		ps := splitPending(s.pending)
		s.pending = joinPending(slices.DeleteFunc(ps, func(p pendingOp) bool { return p.session == session }))
	}
	return s
}

func (s lockState) addPending(p pendingOp) lockState {
	s.pending = joinPending(append(splitPending(s.pending), p))
	return s
}

// prune drops the pending operations that can never take effect, or would
// change nothing if they did: those of an expired session, a Release of a
// generation whose hold is over (generations only grow, and a free lock's
// next one exceeds max), an expiry not followed (see LockInput) of a
// session that holds nothing and has nothing pending.
func (s lockState) prune() lockState {
	if s.pending == "" {
		return s
	}
	ps := splitPending(s.pending)
	keep := ps[:0]
	for _, p := range ps {
		switch {
		case setHas(s.expired, p.session):
		case p.kind == LockRelease && p.gen != 0 && (p.gen < s.max || p.gen == s.max && s.mode == free):
		case p.kind == LockLost && !p.followed && !setHas(s.holders, p.session) &&
			!slices.ContainsFunc(ps, func(q pendingOp) bool { return q.session == p.session && q.kind != LockLost }):
			// Nothing of the session's is left for its expiry to undo, and
			// nothing that it constrains comes after it.
		default:
			keep = append(keep, p)
		}
	}
	s.pending = joinPending(keep)
	return s
}

// pendingOp is an operation of unknown outcome that may still take effect.
type pendingOp struct {
	kind     LockKind
	session  int
	shared   bool
	gen      uint64
	followed bool // of a LockLost
}

func (p pendingOp) String() string {
	switch p.kind {
	case LockAcquire:
		return fmt.Sprintf("acquire s%d %s", p.session, modeOf(p.shared))
	case LockRelease:
		if p.gen == 0 {
			return fmt.Sprintf("release s%d any gen", p.session)
		}
		return fmt.Sprintf("release s%d gen %d", p.session, p.gen)
	}
	return fmt.Sprintf("lost s%d", p.session)
}

// encode is p in lockState.pending: "a3x" (acquire by s3, exclusive),
// "a3s", "r3.7" (release by s3 of gen 7), "l3" (s3 lost), "L3" (s3 lost,
// followed).
func (p pendingOp) encode() string {
	switch p.kind {
	case LockAcquire:
		m := "x"
		if p.shared {
			m = "s"
		}
		return "a" + strconv.Itoa(p.session) + m
	case LockRelease:
		return "r" + strconv.Itoa(p.session) + "." + strconv.FormatUint(p.gen, 10)
	}
	if p.followed {
		return "L" + strconv.Itoa(p.session)
	}
	return "l" + strconv.Itoa(p.session)
}

func decodePending(e string) pendingOp {
	var p pendingOp
	body := e[1:]
	switch e[0] {
	case 'a':
		p.kind, p.shared = LockAcquire, body[len(body)-1] == 's'
		body = body[:len(body)-1]
	case 'r':
		p.kind = LockRelease
		var g string
		body, g, _ = strings.Cut(body, ".")
		p.gen, _ = strconv.ParseUint(g, 10, 64)
	default:
		p.kind, p.followed = LockLost, e[0] == 'L'
	}
	p.session, _ = strconv.Atoi(body)
	return p
}

// splitList decodes a list that joinList encoded with sep ("" is empty).
func splitList[T any](s, sep string, decode func(string) T) []T {
	if s == "" {
		return nil
	}
	parts := strings.Split(s, sep)
	out := make([]T, len(parts))
	for i, part := range parts {
		out[i] = decode(part)
	}
	return out
}

// joinList encodes list, each element with encode, joined by sep.
func joinList[T any](list []T, sep string, encode func(T) string) string {
	parts := make([]string, len(list))
	for i, v := range list {
		parts[i] = encode(v)
	}
	return strings.Join(parts, sep)
}

// The pending operations of a lock state, in a canonical order (sorted by
// encoding) so that equal sets make equal states.
func splitPending(pending string) []pendingOp { return splitList(pending, ";", decodePending) }

func joinPending(ps []pendingOp) string {
	ps = slices.Clone(ps)
	slices.SortFunc(ps, func(a, b pendingOp) int { return strings.Compare(a.encode(), b.encode()) })
	return joinList(ps, ";", pendingOp.encode)
}

// A set of sessions, kept sorted: "1,4,7".
func setList(set string) []int {
	return splitList(set, ",", func(s string) int { n, _ := strconv.Atoi(s); return n })
}

func setString(list []int) string { return joinList(list, ",", strconv.Itoa) }

func setHas(set string, v int) bool {
	for _, x := range setList(set) {
		if x == v {
			return true
		}
	}
	return false
}

func setAdd(set string, v int) string {
	list := setList(set)
	i := sort.SearchInts(list, v)
	if i < len(list) && list[i] == v {
		return set
	}
	list = append(list[:i], append([]int{v}, list[i:]...)...)
	return setString(list)
}

func setDel(set string, v int) string {
	list := setList(set)
	i := sort.SearchInts(list, v)
	if i == len(list) || list[i] != v {
		return set
	}
	return setString(append(list[:i], list[i+1:]...))
}

func describeLockOp(input, output any) string {
	in, out := input.(LockInput), output.(LockOutput)
	mode := modeOf(in.Shared)
	var call, ret string
	switch in.Kind {
	case LockAcquire:
		call = fmt.Sprintf("acquire(%s, s%d, %s)", lockName(in.Lock), in.Session, mode)
		ret = "failed"
		if out.OK {
			ret = fmt.Sprintf("gen %d", out.Gen)
		}
	case LockRelease:
		gen := strconv.FormatUint(in.Gen, 10)
		if in.Gen == 0 {
			gen = "any"
		}
		call = fmt.Sprintf("release(%s, s%d, gen %s)", lockName(in.Lock), in.Session, gen)
		ret = "failed"
		if out.OK {
			ret = "ok"
		}
	case LockCheck:
		call = fmt.Sprintf("check(%s, %s, gen %d)", lockName(in.Lock), mode, in.Gen)
		ret = "invalid"
		if out.OK {
			ret = "valid"
		}
	case LockLost:
		lock := "*"
		if in.Lock != "" {
			lock = lockName(in.Lock)
		}
		s := fmt.Sprintf("lost(%s, s%d): session expired", lock, in.Session)
		if out.Unknown {
			s += ", maybe (never confirmed)"
		}
		return s
	default:
		return fmt.Sprintf("%+v → %+v", in, out)
	}
	if out.Unknown {
		ret = "unknown (pending)"
	}
	return call + " → " + ret
}

// lockName is path without its "/ls/<cell>/" prefix: lock paths tend to
// end alike ("…/billing/lock").
func lockName(path string) string {
	if rest, ok := strings.CutPrefix(path, "/ls/"); ok {
		if i := strings.IndexByte(rest, '/'); i >= 0 {
			return rest[i+1:]
		}
	}
	return path
}

// partitionLocks splits a lock history by lock path (in path order). It
// copies a LockLost of Lock "" into every partition where its session has
// an Acquire or Release, drops unknown Checks (they say nothing), ends
// every other unknown operation at its call (see LockModel), and marks the
// LockLosts that are followed (see LockInput).
func partitionLocks(history []porcupine.Operation) [][]porcupine.Operation {
	touched := map[string]map[int]bool{} // lock → sessions acquiring or releasing it
	for _, op := range history {
		if in := op.Input.(LockInput); in.Kind == LockAcquire || in.Kind == LockRelease {
			if touched[in.Lock] == nil {
				touched[in.Lock] = map[int]bool{}
			}
			touched[in.Lock][in.Session] = true
		}
	}
	byLock := map[string][]porcupine.Operation{}
	for _, op := range history {
		in, out := op.Input.(LockInput), op.Output.(LockOutput)
		if out.Unknown {
			if in.Kind == LockCheck {
				continue
			}
			op.Return = op.Call
		}
		if in.Kind == LockLost && in.Lock == "" {
			for lock, sessions := range touched {
				if sessions[in.Session] {
					byLock[lock] = append(byLock[lock], op)
				}
			}
			continue
		}
		byLock[in.Lock] = append(byLock[in.Lock], op)
	}
	locks := make([]string, 0, len(byLock))
	for lock := range byLock {
		locks = append(locks, lock)
	}
	sort.Strings(locks)
	out := make([][]porcupine.Operation, len(locks))
	for i, lock := range locks {
		part := byLock[lock]
		last := map[int]int64{} // session → the last return of its operations an expiry constrains
		for _, op := range part {
			in, out := op.Input.(LockInput), op.Output.(LockOutput)
			if in.Kind == LockAcquire && (out.OK || out.Unknown) || in.Kind == LockRelease && out.Unknown {
				if r, ok := last[in.Session]; !ok || op.Return > r {
					last[in.Session] = op.Return
				}
			}
		}
		for j, op := range part {
			if in := op.Input.(LockInput); in.Kind == LockLost {
				r, ok := last[in.Session]
				in.followed = ok && r >= op.Call
				part[j].Input = in
			}
		}
		out[i] = part
	}
	return out
}

// LockOperation is the porcupine operation of a lock operation called at
// call and returned at ret. An unknown outcome gets no return time (it may
// take effect any time after its call), whatever ret says.
func LockOperation(client int, in LockInput, out LockOutput, call, ret int64) porcupine.Operation {
	if out.Unknown {
		out, ret = LockOutput{Unknown: true}, math.MaxInt64
	}
	return porcupine.Operation{ClientId: client, Input: in, Call: call, Output: out, Return: ret}
}

// LostOperation is the expiry of session, recorded by client: lastAlive
// is the last time the client knew the session alive (when it sent its
// last KeepAlive or call that succeeded), learned the time the cell told it
// the session had expired, or < 0 if it never did (it gave up when its
// grace period ran out, or the run ended). Lock "" stands for every lock
// the session acquired or released.
//
// A learned time must come from the cell (a reply saying the session is
// gone): it bounds when the master expired the session. Without it (the
// operation has no return time, and its output is Unknown) the session may
// have expired any time after lastAlive, or not at all.
func LostOperation(client, session int, lock string, lastAlive, learned int64) porcupine.Operation {
	out := LockOutput{}
	if learned < 0 {
		learned, out.Unknown = math.MaxInt64, true
	}
	return porcupine.Operation{ClientId: client, Input: LockInput{Kind: LockLost, Lock: lock, Session: session}, Call: lastAlive, Output: out, Return: learned}
}

// LockOp is a lock operation under way.
type LockOp struct {
	// Meta, if set before End, is shown with the operation in the
	// visualization and the failure window (an error, a server).
	Meta string

	begun[LockInput]
}

// BeginLock notes the call of a lock operation by client (a porcupine
// client id: one per goroutine that runs operations one at a time, from 0).
// Keep lock operations in a Recorder of their own: LockModel checks lock
// operations only.
func (r *Recorder) BeginLock(client int, in LockInput) *LockOp {
	return &LockOp{begun: begin(r, client, in)}
}

// End notes the return of the operation with its outcome (an Unknown one
// is EndUnknown).
func (o *LockOp) End(out LockOutput) {
	o.add(LockOperation(o.client, o.in, out, o.call, o.r.Now()))
}

// EndUnknown notes that the operation's outcome is unknown: it may take
// effect any time after its call, or never.
func (o *LockOp) EndUnknown() {
	o.add(LockOperation(o.client, o.in, LockOutput{Unknown: true}, o.call, math.MaxInt64))
}

func (o *LockOp) add(op porcupine.Operation) {
	if o.Meta != "" {
		op.Metadata = o.Meta
	}
	o.r.Add(op)
}

// AddLost notes the expiry of session (see LostOperation); learned < 0:
// the cell never confirmed it to the client.
func (r *Recorder) AddLost(client, session int, lock string, lastAlive, learned int64) {
	r.Add(LostOperation(client, session, lock, lastAlive, learned))
}
