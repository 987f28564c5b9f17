package server

import (
	"container/heap"
	"crypto/subtle"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/chubby-dev/chubby/fs"
	"github.com/chubby-dev/chubby/session"
	"github.com/chubby-dev/chubby/wire"
)

// leaseTable is the master's in-memory view of session leases. A KeepAlive
// touches only this table: no raft write, no disk, no goroutine while it is
// held (a parked poll is a struct and a runtime timer).
//
// Like etcd's lessor, the table has an explicit lifecycle and never acts on
// the cell by itself: Promote installs a lease for every session when this
// server becomes master, Demote drops them all when it stops, and a lease
// that runs out is handed out on an out-queue (Expired, TakeExpired) for
// the master loop to confirm its leadership and propose the expiry.
type leaseTable struct {
	clock   session.Clock
	log     hclog.Logger
	stall   stallDetector
	metrics leaseMetrics
	// sendOn, if set, runs the sends of event replies (goSend); set once
	// before the table is used.
	sendOn func(func())

	mu sync.Mutex
	m  map[uint64]*lease
	// size is len(m), readable without the lock.
	size atomic.Int64
	// owners counts the leases by principal (MaxSessionsPerPrincipal).
	owners map[string]int
	// nUnflushed counts the leases with an open unflushed channel.
	nUnflushed int
	rng        *rand.Rand // KeepAlive hold jitter

	// expired are the sessions whose leases ran out, marked ending, not
	// yet taken by the master loop; expiredC has a value while it is not
	// empty.
	expired  []uint64
	expiredC chan struct{}

	// due orders the leases by when to look at them next (lease.due); one
	// timer, wake, is armed for the earliest, at wakeAt (zero: not armed).
	// A KeepAlive only moves the lease's end: its entry comes up at the
	// old end, finds the lease renewed and goes back in at the new one. So
	// leases that run out together cost one goroutine working through them
	// in order, not a goroutine each (a million timers firing at once
	// queued the stall monitor's tick behind them, and the master took its
	// own expiry work for a pause of the process).
	due    dueHeap
	wake   session.Timer
	wakeAt time.Time

	// manyDue is, by connection, when its latest parked KeepAliveMany
	// is answered (manyHoldLocked).
	manyDue map[replier]manyDue

	// summary logs fresh leases after a stall per interval, not per session.
	summary *logSummary
	// kaRate counts KeepAlives per second of the lease clock over the last
	// kaRateWindow seconds (the status page's KeepAlive rate).
	kaRate [kaRateWindow]struct {
		sec int64
		n   int
	}
}

// kaRateWindow is how many seconds the status page's KeepAlive rate covers.
const kaRateWindow = 10

// stallDetector tells when this process stalled (see stallMonitor).
type stallDetector interface {
	stallsSince(now, since time.Time) []stall
}

// leaseMetrics are the series the lease table updates.
type leaseMetrics struct {
	sessions      prometheus.Gauge
	keepAlives    prometheus.Counter
	invalidations prometheus.Counter
	// urgent counts KeepAlives sent urgent (the client in jeopardy or just
	// reconnected); leaseUsed observes, per KeepAlive, the time since the
	// session's previous one on this master as a fraction of its TTL.
	urgent    prometheus.Counter
	leaseUsed prometheus.Observer
}

type lease struct {
	id      uint64
	secret  []byte // every call of the session carries it (empty: a session from before secrets)
	owner   string // the principal that created it (empty: from before principals)
	noCache bool   // it caches nothing (CreateSession.NoCache)
	ttl     time.Duration
	expires time.Time
	// renewed is when the lease was last granted or extended here: its
	// creation, its promotion by this master, its last KeepAlive.
	renewed time.Time
	// due is when the lease's entry in the table's due heap comes up (an
	// entry with another time is stale and dropped).
	due    time.Time
	ending bool // an expiry command is in flight
	// credited: stalls up to this time have been given back to the lease.
	credited time.Time
	poll     *poll
	// poll2 is a later KeepAliveMany's poll that renewed the session while
	// poll, an earlier KeepAliveMany's, was parked (its client sent again
	// before that hold ended): each call is answered at its own time, so
	// one session's early KeepAlive does not answer every other session of
	// the earlier call at once (keepAliveMany).
	poll2 *poll

	// Invalidations sent (or to send) and not yet acknowledged; writers
	// wait on their channels.
	invals   []*pendingInval
	invalSeq uint64
	// Events waiting for the next KeepAlive reply.
	events  []wire.Event
	dropped uint64
	// fillBytes: the event contents (fill.go) among events.
	fillBytes int
	// out holds the answers to the session's stream KeepAlives not yet
	// written, in order (queueLocked); draining is set while a goroutine
	// writes them.
	out      []streamed
	outBytes int // the events' cost in out
	draining bool
	// unflushed is open while a session carried over from an earlier master
	// has not sent this master a KeepAlive: its client may not have heard of
	// the failover and may still serve what it cached under the old master,
	// which told this one nothing. Writes wait for it as for an
	// unacknowledged invalidation of everything (Chubby §2.9, failover).
	unflushed chan struct{}
}

// goSend runs a reply's send on another goroutine: the server's worker
// pool's if it gave one (sendOn), else a new goroutine.
func (t *leaseTable) goSend(f func()) {
	if t.sendOn != nil {
		t.sendOn(f)
		return
	}
	go f()
}

func newLeaseTable(clock session.Clock, log hclog.Logger, stall stallDetector, m leaseMetrics) *leaseTable {
	return &leaseTable{clock: clock, log: log, stall: stall, metrics: m, m: map[uint64]*lease{}, owners: map[string]int{}, manyDue: map[replier]manyDue{},
		rng:      rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 0x9e3779b97f4a7c15)),
		expiredC: make(chan struct{}, 1), summary: newLogSummary(log, clock, summaryInterval)}
}

// Promote installs a lease of TTL from now for every session of the
// replicated state: a new master cannot know what an earlier one granted,
// but no grant exceeded TTL (DESIGN invariant 3). Each session also starts
// unflushed (see lease.unflushed).
func (t *leaseTable) Promote(now time.Time, sessions []fs.SessionInfo) {
	t.mu.Lock()
	parked := t.clearLocked()
	for _, si := range sessions {
		t.addLocked(now, si.ID, time.Duration(si.TTL), si.Secret, si.Principal)
		if si.NoCache { // nothing cached to flush: writes need not wait for it
			t.m[si.ID].noCache = true
			continue
		}
		t.m[si.ID].unflushed = make(chan struct{})
		t.nUnflushed++
	}
	t.sizedLocked()
	t.mu.Unlock()
	answerAll(parked, nil, wire.ErrNotMaster)
}

// Demote drops every lease and every expiry not yet taken (this server is
// no longer master). Parked polls are answered with not_master so clients
// look for the new master; writers waiting on acknowledgements are freed.
func (t *leaseTable) Demote() {
	t.mu.Lock()
	parked := t.clearLocked()
	t.sizedLocked()
	t.mu.Unlock()
	answerAll(parked, nil, wire.ErrNotMaster)
}

// Expired has a value while TakeExpired has sessions to hand out.
func (t *leaseTable) Expired() <-chan struct{} { return t.expiredC }

// TakeExpired hands out the sessions whose leases ran out since the last
// call. Each is marked as being expired (its calls answer ErrUnavailable)
// until the master either ends it (remove) or abandons the expiry
// (retryExpiry, graceAfterStall).
func (t *leaseTable) TakeExpired() []uint64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := t.expired
	t.expired = nil
	return out
}

// count is how many sessions have a lease here. It takes no lock: every
// CreateSession asks, and a flood of them contended for the table's lock.
func (t *leaseTable) count() int { return int(t.size.Load()) }

// sizedLocked publishes the number of leases after a change (t.mu held).
func (t *leaseTable) sizedLocked() {
	t.size.Store(int64(len(t.m)))
	t.metrics.sessions.Set(float64(len(t.m)))
}

// add grants a new session its first lease, unless it has one already (a
// retried CreateSession answered from the replicated state).
func (t *leaseTable) add(now time.Time, id uint64, ttl time.Duration, secret []byte, owner string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, ok := t.m[id]; ok {
		return
	}
	t.addLocked(now, id, ttl, secret, owner)
	t.sizedLocked()
}

func (t *leaseTable) addLocked(now time.Time, id uint64, ttl time.Duration, secret []byte, owner string) {
	l := &lease{id: id, secret: secret, owner: owner, ttl: ttl, expires: now.Add(ttl), renewed: now}
	t.scheduleLocked(l, l.expires)
	if old, ok := t.m[id]; ok {
		t.owners[old.owner]--
	}
	t.m[id] = l
	t.owners[owner]++
}

// setNoCache marks session id as caching nothing (CreateSession.NoCache).
func (t *leaseTable) setNoCache(id uint64) {
	t.mu.Lock()
	if l, ok := t.m[id]; ok {
		l.noCache = true
	}
	t.mu.Unlock()
}

// noCache reports whether session id caches nothing.
func (t *leaseTable) noCache(id uint64) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	l, ok := t.m[id]
	return ok && l.noCache
}

// deleteLocked forgets lease id (t.mu held).
func (t *leaseTable) deleteLocked(id uint64) {
	if l, ok := t.m[id]; ok {
		if t.owners[l.owner]--; t.owners[l.owner] <= 0 {
			delete(t.owners, l.owner)
		}
		delete(t.m, id)
	}
}

// owned is how many sessions of principal this master has.
func (t *leaseTable) owned(principal string) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.owners[principal]
}

func (t *leaseTable) clearLocked() []*poll {
	t.expired = nil
	t.due = nil
	clear(t.manyDue)
	if t.wake != nil {
		t.wake.Stop()
	}
	t.wakeAt = time.Time{}
	select {
	case <-t.expiredC:
	default:
	}
	var parked []*poll
	for id, l := range t.m {
		l.releaseLocked()
		t.flushedLocked(l)
		for _, p := range []*poll{l.poll, l.poll2} {
			if p != nil && !p.answered { // a KeepAliveMany's poll once
				p.answered = true
				p.timer.Stop()
				parked = append(parked, p)
			}
		}
		t.deleteLocked(id)
	}
	return parked
}

// remove forgets a session ended in the replicated state; a parked poll is
// told the session expired.
func (t *leaseTable) remove(id uint64) {
	t.mu.Lock()
	l, ok := t.m[id]
	if !ok {
		t.mu.Unlock()
		return
	}
	l.releaseLocked()
	t.flushedLocked(l)
	p, p2 := l.poll, l.poll2
	t.deleteLocked(id)
	t.sizedLocked()
	var many2 earlyReply
	if p2 != nil { // a later KeepAliveMany's: answered as a KeepAliveMany's p below
		many2 = earlyReply{p: p2, body: t.answerManyLocked(p2)}
	}
	var many earlyReply
	switch {
	case p == nil:
	case p.many:
		// The others of its KeepAliveMany are answered now; this one is
		// left out of the reply, and its client's next KeepAlive learns
		// that the session is gone.
		many = earlyReply{p: p, body: t.answerManyLocked(p)}
		p = nil
	default:
		p.answered = true
		p.timer.Stop()
	}
	t.mu.Unlock()
	many.send()
	many2.send()
	if p != nil {
		p.c.reply(p.reqID, nil, fs.ErrSessionExpired)
	}
}

// check reports whether the session has a lease on this master: nil if
// it has, ErrSessionExpired if it has none, and ErrUnavailable while its
// expiry is in flight — that expiry can still be abandoned (leadership not
// confirmed, the proposal failed, the master found it had stalled) and the
// session live on, so "expired" would be a claim the cell has not made yet.
// The client retries on ErrUnavailable and learns the outcome.
func (t *leaseTable) check(id uint64) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	_, err := t.leaseLocked(id)
	return err
}

// checkCaller is check for a call that names session id with secret,
// from principal: it also refuses (permission_denied) a caller without the
// session's secret, or another principal than the one that created it, so
// that nobody can renew, end or act for another client's session.
func (t *leaseTable) checkCaller(id uint64, secret []byte, principal string) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	_, err := t.callerLocked(id, secret, principal)
	return err
}

// callerLocked is checkCaller returning the lease; t.mu is held.
func (t *leaseTable) callerLocked(id uint64, secret []byte, principal string) (*lease, error) {
	l, err := t.leaseLocked(id)
	if err != nil {
		return nil, err
	}
	if len(l.secret) > 0 && subtle.ConstantTimeCompare(l.secret, secret) != 1 {
		return nil, fmt.Errorf("%w: the call names session %d without its secret", fs.ErrPermission, id)
	}
	if l.owner != "" && l.owner != principal {
		return nil, fmt.Errorf("%w: session %d belongs to %s, the call comes from %s", fs.ErrPermission, id, l.owner, principal)
	}
	return l, nil
}

// leaseLocked returns the session's lease, or check's error; t.mu is held.
func (t *leaseTable) leaseLocked(id uint64) (*lease, error) {
	l, ok := t.m[id]
	switch {
	case !ok:
		return nil, fmt.Errorf("%w: session %d", fs.ErrSessionExpired, id)
	case l.ending:
		return nil, fmt.Errorf("%w: session %d is being expired", wire.ErrUnavailable, id)
	}
	return l, nil
}

func (t *leaseTable) extendLocked(l *lease, now time.Time) {
	if e := now.Add(l.ttl); e.After(l.expires) {
		l.expires = e
	}
}

// scheduleLocked puts lease l in the due heap to come up at at, and arms
// the wake timer if that is earlier than it is armed for.
func (t *leaseTable) scheduleLocked(l *lease, at time.Time) {
	l.due = at
	heap.Push(&t.due, dueEntry{at: at, id: l.id})
	if t.wakeAt.IsZero() || at.Before(t.wakeAt) {
		t.armLocked(at)
	}
}

func (t *leaseTable) armLocked(at time.Time) {
	t.wakeAt = at
	if d := at.Sub(t.clock.Now()); t.wake == nil {
		t.wake = t.clock.AfterFunc(d, t.expire)
	} else {
		t.wake.Reset(d)
	}
}

// expireChunk bounds the leases expire looks at per hold of the table's
// lock, so KeepAlives are not held up behind a flood of expiries.
const expireChunk = 4096

// expire runs when the wake timer fires: it looks at every lease whose
// entry has come up, in order. A lease renewed meanwhile goes back in at
// its new end. A lease that ran out is handed out as expired unless the
// stall monitor saw this process stall since the lease's last renewal
// (then it gets a fresh lease: the session may have been unable to reach
// a paused master); the master confirms its leadership before it proposes
// the expiries. How late the timer fired says nothing here: a master busy
// with many expiries fires late without having stalled.
func (t *leaseTable) expire() {
	for {
		now := t.clock.Now()
		t.mu.Lock()
		for n := 0; n < expireChunk && len(t.due) > 0 && !t.due[0].at.After(now); n++ {
			e := heap.Pop(&t.due).(dueEntry)
			l, ok := t.m[e.id]
			if !ok || l.ending || !l.due.Equal(e.at) {
				continue // gone, being expired, or a stale entry
			}
			if now.Before(l.expires) {
				t.scheduleLocked(l, l.expires)
				continue
			}
			if t.creditStallsLocked(l, now) {
				t.summary.add(hclog.Warn, "leases ran out while the master stalled; sessions given back the time the stall took", "session", e.id, "until", l.expires)
				t.scheduleLocked(l, l.expires)
				continue
			}
			l.ending = true
			t.expired = append(t.expired, e.id)
		}
		more := len(t.due) > 0 && !t.due[0].at.After(now)
		if !more {
			t.wakeAt = time.Time{}
			if len(t.due) > 0 {
				t.armLocked(t.due[0].at)
			}
		}
		if len(t.expired) > 0 {
			select {
			case t.expiredC <- struct{}{}:
			default:
			}
		}
		t.mu.Unlock()
		if !more {
			return
		}
	}
}

// endingLocked returns the lease of a session being expired, nil if the
// session has no lease or its lease is not being expired (it was renewed
// by a new master since it was handed out).
func (t *leaseTable) endingLocked(id uint64) *lease {
	if l, ok := t.m[id]; ok && l.ending {
		return l
	}
	return nil
}

// creditStallsLocked gives lease l, which ran out by now, back the lease
// time that stalls of this process took from it since its last renewal (or
// since stalls were last credited to it), and reports whether that leaves
// it alive at now. A stall that ate part of the lease's window pushes its
// end back by the part it ate; one that outlasted the lease's end leaves
// the session, once the process runs again, the lease time it had left
// when the stall began. So a session that could not reach a paused master
// is not expired for the pause, and a session abandoned for good still
// expires about a TTL after the last stall, however many there are.
func (t *leaseTable) creditStallsLocked(l *lease, now time.Time) bool {
	from := l.renewed
	if l.credited.After(from) {
		from = l.credited
	}
	stalls := t.stall.stallsSince(now, from)
	if len(stalls) == 0 {
		return false
	}
	for _, st := range stalls {
		start := st.start
		if start.Before(from) {
			start = from
		}
		end, resumed := st.end, st.end // the end of the part eaten; when the process ran again
		if l.expires.Before(end) {
			end = l.expires
		}
		if eaten := end.Sub(start); eaten > 0 {
			if l.expires.After(resumed) {
				resumed = l.expires
			}
			l.expires = resumed.Add(eaten)
		}
	}
	l.credited = now
	if last := stalls[len(stalls)-1].end; last.After(now) {
		l.credited = last
	}
	return now.Before(l.expires)
}

// graceAfterStall looks again, just before the master proposes the expiry
// of session id, for stalls since the lease was last renewed or credited:
// if they leave the lease alive, the expiry is off. It reports whether the
// expiry is off: the session given that grace, or no longer being expired.
func (t *leaseTable) graceAfterStall(id uint64) bool {
	now := t.clock.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	l := t.endingLocked(id)
	if l == nil {
		return true
	}
	if !t.creditStallsLocked(l, now) {
		return false
	}
	l.ending = false
	t.scheduleLocked(l, l.expires)
	return true
}

// retryExpiry abandons an expiry that could not be made (leadership not
// confirmed, the proposal failed): the lease timer looks again in a second.
func (t *leaseTable) retryExpiry(id uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if l := t.endingLocked(id); l != nil {
		l.ending = false
		t.scheduleLocked(l, t.clock.Now().Add(time.Second))
	}
}

// countKeepAliveLocked counts a KeepAlive in the second of now.
func (t *leaseTable) countKeepAliveLocked(now time.Time) {
	sec := now.Unix()
	b := &t.kaRate[sec%kaRateWindow]
	if b.sec != sec {
		b.sec, b.n = sec, 0
	}
	b.n++
}

// leaseStates counts the sessions with a lease here by how their client is
// doing, as far as the master can tell.
type leaseStates struct {
	// Safe: renewed within the last two thirds of its TTL.
	Safe int
	// Late: no KeepAlive for more than two thirds of its TTL; its client's
	// local lease has most likely run out (jeopardy), its master lease not.
	Late int
	// Unflushed: carried over from an earlier master and not heard from
	// since this one took over (writes wait for it).
	Unflushed int
	// Expiring: its lease ran out; the expiry is being proposed.
	Expiring int
	// KeepAliveRate is KeepAlives per second over the last kaRateWindow-1
	// full seconds.
	KeepAliveRate float64
}

// states classifies every lease at now. It takes the table's lock once and
// looks at each lease: O(sessions).
func (t *leaseTable) states(now time.Time) leaseStates {
	t.mu.Lock()
	defer t.mu.Unlock()
	var st leaseStates
	for _, l := range t.m {
		switch {
		case l.ending:
			st.Expiring++
		case l.unflushed != nil:
			st.Unflushed++
		case now.Sub(l.renewed) > 2*l.ttl/3:
			st.Late++
		default:
			st.Safe++
		}
	}
	sec, n := now.Unix(), 0
	for _, b := range t.kaRate {
		if b.sec < sec && b.sec > sec-kaRateWindow { // the last full seconds
			n += b.n
		}
	}
	st.KeepAliveRate = float64(n) / (kaRateWindow - 1)
	return st
}

// leaseView is what the status page shows of one session's lease.
type leaseView struct {
	TTL       time.Duration
	Expires   time.Time
	Renewed   time.Time
	Unflushed bool
	Ending    bool
}

// views returns the leases of the sessions ids that have one here.
func (t *leaseTable) views(ids []uint64) map[uint64]leaseView {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make(map[uint64]leaseView, len(ids))
	for _, id := range ids {
		if l, ok := t.m[id]; ok {
			out[id] = leaseView{TTL: l.ttl, Expires: l.expires, Renewed: l.renewed, Unflushed: l.unflushed != nil, Ending: l.ending}
		}
	}
	return out
}

// dueEntry is a lease's place in the due heap.
type dueEntry struct {
	at time.Time
	id uint64
}

// dueHeap is a min-heap of dueEntry by at (container/heap).
type dueHeap []dueEntry

func (h dueHeap) Len() int           { return len(h) }
func (h dueHeap) Less(i, j int) bool { return h[i].at.Before(h[j].at) }
func (h dueHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *dueHeap) Push(x any)        { *h = append(*h, x.(dueEntry)) }
func (h *dueHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	*h = old[:len(old)-1]
	return e
}
