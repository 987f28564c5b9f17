package server

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/chubby-dev/chubby/fs"
	"github.com/chubby-dev/chubby/session"
	"github.com/chubby-dev/chubby/wire"
)

// stallThreshold: a timer that fires this late means the master
// itself was stalled (GC, SIGSTOP, a slow disk); the session is given a fresh
// lease instead of being expired for the master's own pause.
const stallThreshold = 500 * time.Millisecond

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

	mu sync.Mutex
	m  map[uint64]*lease
	// nUnflushed counts the leases with an open unflushed channel.
	nUnflushed int
	rng        *rand.Rand // KeepAlive hold jitter

	// expired are the sessions whose leases ran out, marked ending, not
	// yet taken by the master loop; expiredC has a value while it is not
	// empty.
	expired  []uint64
	expiredC chan struct{}
}

// stallDetector says whether this process stalled (see stallMonitor).
type stallDetector interface {
	stalledSince(now, since time.Time) bool
}

// leaseMetrics are the series the lease table updates.
type leaseMetrics struct {
	sessions      prometheus.Gauge
	keepAlives    prometheus.Counter
	invalidations prometheus.Counter
}

// replier answers a call on a client connection (a *conn).
type replier interface {
	reply(id uint64, body any, err error)
}

type lease struct {
	id      uint64
	ttl     time.Duration
	expires time.Time
	timer   session.Timer // fires at expires
	ending  bool          // an expiry command is in flight
	poll    *poll

	// Invalidations sent (or to send) and not yet acknowledged; writers
	// wait on their channels.
	invals   []*pendingInval
	invalSeq uint64
	// Events waiting for the next KeepAlive reply.
	events  []wire.Event
	dropped uint64
	// unflushed is open while a session carried over from an earlier master
	// has not sent this master a KeepAlive: its client may not have heard of
	// the failover and may still serve what it cached under the old master,
	// which told this one nothing. Writes wait for it as for an
	// unacknowledged invalidation of everything (Chubby §2.9, failover).
	unflushed chan struct{}
}

type pendingInval struct {
	seq   uint64
	paths []string
	acked chan struct{}
}

// maxQueuedEvents bounds a session's undelivered events; past it events are
// dropped and counted (a slow consumer never blocks the master).
const maxQueuedEvents = 1024

// replyLocked builds a KeepAlive reply: the lease, every unacknowledged
// invalidation, and the queued events (which it takes).
func (l *lease) replyLocked() wire.KeepAliveReply {
	rep := wire.KeepAliveReply{TTL: int64(l.ttl), InvalSeq: l.invalSeq, Events: l.events, Dropped: l.dropped}
	for _, pi := range l.invals {
		rep.Invalidations = append(rep.Invalidations, pi.paths...)
	}
	l.events, l.dropped = nil, 0
	return rep
}

// releaseLocked frees every writer waiting on this session's acknowledgements
// (the session is gone, or this server is no longer master).
func (l *lease) releaseLocked() {
	for _, pi := range l.invals {
		close(pi.acked)
	}
	l.invals = nil
}

// poll is a parked KeepAlive, answered when its hold ends or earlier.
type poll struct {
	c     replier
	reqID uint64
	timer session.Timer
}

func newLeaseTable(clock session.Clock, log hclog.Logger, stall stallDetector, m leaseMetrics) *leaseTable {
	return &leaseTable{clock: clock, log: log, stall: stall, metrics: m, m: map[uint64]*lease{},
		rng:      rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 0x9e3779b97f4a7c15)),
		expiredC: make(chan struct{}, 1)}
}

// Promote installs a lease of TTL from now for every session of the
// replicated state: a new master cannot know what an earlier one granted,
// but no grant exceeded TTL (DESIGN invariant 3). Each session also starts
// unflushed (see lease.unflushed).
func (t *leaseTable) Promote(now time.Time, sessions []fs.SessionInfo) {
	t.mu.Lock()
	parked := t.clearLocked()
	for _, si := range sessions {
		t.addLocked(now, si.ID, time.Duration(si.TTL))
		t.m[si.ID].unflushed = make(chan struct{})
		t.nUnflushed++
	}
	t.metrics.sessions.Set(float64(len(t.m)))
	t.mu.Unlock()
	answerAll(parked, nil, wire.ErrNotMaster)
}

// Demote drops every lease and every expiry not yet taken (this server is
// no longer master). Parked polls are answered with not_master so clients
// look for the new master; writers waiting on acknowledgements are freed.
func (t *leaseTable) Demote() {
	t.mu.Lock()
	parked := t.clearLocked()
	t.metrics.sessions.Set(0)
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

// add grants a new session its first lease.
func (t *leaseTable) add(now time.Time, id uint64, ttl time.Duration) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.addLocked(now, id, ttl)
	t.metrics.sessions.Set(float64(len(t.m)))
}

func (t *leaseTable) addLocked(now time.Time, id uint64, ttl time.Duration) {
	l := &lease{id: id, ttl: ttl, expires: now.Add(ttl)}
	l.timer = t.clock.AfterFunc(ttl, func() { t.timeout(id) })
	t.m[id] = l
}

func (t *leaseTable) clearLocked() []*poll {
	t.expired = nil
	select {
	case <-t.expiredC:
	default:
	}
	var parked []*poll
	for id, l := range t.m {
		l.timer.Stop()
		l.releaseLocked()
		t.flushedLocked(l)
		if p := l.poll; p != nil {
			p.timer.Stop()
			parked = append(parked, p)
		}
		delete(t.m, id)
	}
	return parked
}

// answerAll replies to parked polls; called without t.mu so a slow client
// connection never blocks the lease table.
func answerAll(ps []*poll, body any, err error) {
	for _, p := range ps {
		p.c.reply(p.reqID, body, err)
	}
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
	l.timer.Stop()
	l.releaseLocked()
	t.flushedLocked(l)
	p := l.poll
	if p != nil {
		p.timer.Stop()
	}
	delete(t.m, id)
	t.metrics.sessions.Set(float64(len(t.m)))
	t.mu.Unlock()
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

// keepAlive records the acknowledged invalidations, extends the lease to
// now+TTL and parks the call until its hold ends. It answers at once when
// urgent or when there is something to deliver; a previous parked poll of the
// same session is answered at once.
func (t *leaseTable) keepAlive(c replier, reqID, id uint64, urgent bool, ackInval uint64) error {
	now := t.clock.Now()
	t.mu.Lock()
	l, err := t.leaseLocked(id)
	if err != nil {
		t.mu.Unlock()
		return err
	}
	t.ackLocked(l, ackInval)
	// A KeepAlive of this master's epoch: the client has flushed its cache.
	t.flushedLocked(l)
	t.extendLocked(l, now)
	old := t.takePollLocked(l)
	answerNow := urgent || len(l.invals) > 0 || len(l.events) > 0 || l.dropped > 0
	var rep wire.KeepAliveReply
	if answerNow {
		rep = l.replyLocked()
	} else {
		p := &poll{c: c, reqID: reqID}
		p.timer = t.clock.AfterFunc(session.KeepAliveHold(l.ttl, t.rng), func() { t.answer(id, p) })
		l.poll = p
	}
	t.mu.Unlock()
	old.send()
	t.metrics.keepAlives.Inc()
	if answerNow {
		c.reply(reqID, rep, nil)
	}
	return nil
}

// ackLocked frees the writers waiting for invalidations up to seq.
func (t *leaseTable) ackLocked(l *lease, seq uint64) {
	kept := l.invals[:0]
	for _, pi := range l.invals {
		if pi.seq <= seq {
			close(pi.acked)
			continue
		}
		kept = append(kept, pi)
	}
	l.invals = kept
}

// flushedLocked frees the writers waiting for a session carried over from an
// earlier master: it has talked to this master, or it ended.
func (t *leaseTable) flushedLocked(l *lease) {
	if l.unflushed != nil {
		close(l.unflushed)
		l.unflushed = nil
		t.nUnflushed--
	}
}

// unflushed returns, for every session but except that has not talked to
// this master since it took over, what a write must wait for: its first
// KeepAlive here, or the end of its lease as of now (the most an earlier
// master can have granted it: its local lease, and with it its cache, ends
// before that).
func (t *leaseTable) unflushed(except uint64) []ackWait {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.nUnflushed == 0 {
		return nil
	}
	var out []ackWait
	for id, l := range t.m {
		if l.unflushed != nil && id != except {
			out = append(out, ackWait{session: id, done: l.unflushed, deadline: l.expires})
		}
	}
	return out
}

// answer ends a poll's hold: the lease is extended again and granted.
func (t *leaseTable) answer(id uint64, p *poll) {
	now := t.clock.Now()
	t.mu.Lock()
	l, ok := t.m[id]
	if !ok || l.poll != p {
		t.mu.Unlock()
		return
	}
	p.timer.Stop()
	l.poll = nil
	t.extendLocked(l, now)
	rep := l.replyLocked()
	t.mu.Unlock()
	p.c.reply(p.reqID, rep, nil)
}

// invalidate queues an invalidation of paths for a session and answers its
// parked KeepAlive at once. The returned channel is closed when the session
// acknowledges it (or ends); deadline is the session's lease as of now: the
// client can renew its local lease only through a reply that carries this
// invalidation, so once deadline passes its cache cannot serve the paths.
// ok is false if the session has no lease here.
func (t *leaseTable) invalidate(id uint64, paths []string) (acked <-chan struct{}, deadline time.Time, ok bool) {
	t.mu.Lock()
	l, found := t.m[id]
	if !found {
		t.mu.Unlock()
		return nil, time.Time{}, false
	}
	l.invalSeq++
	pi := &pendingInval{seq: l.invalSeq, paths: paths, acked: make(chan struct{})}
	l.invals = append(l.invals, pi)
	deadline = l.expires
	p := t.takePollLocked(l)
	t.mu.Unlock()
	t.metrics.invalidations.Inc()
	p.send()
	return pi.acked, deadline, true
}

// pushEvents queues events for a session and answers its parked KeepAlive.
func (t *leaseTable) pushEvents(id uint64, evs []wire.Event) {
	t.mu.Lock()
	l, ok := t.m[id]
	if !ok {
		t.mu.Unlock()
		return
	}
	for _, e := range evs {
		if len(l.events) >= maxQueuedEvents {
			l.dropped++
			continue
		}
		l.events = append(l.events, e)
	}
	p := t.takePollLocked(l)
	t.mu.Unlock()
	// pushEvents runs on raft's apply goroutine: never write to a client's
	// socket there. The reply is built (in order) above; only the send is
	// left to a goroutine.
	if p.p != nil {
		go p.send()
	}
}

// earlyReply is a parked poll taken to be answered early, with its reply.
type earlyReply struct {
	p   *poll
	rep wire.KeepAliveReply
}

func (e earlyReply) send() {
	if e.p != nil {
		e.p.c.reply(e.p.reqID, e.rep, nil)
	}
}

func (t *leaseTable) takePollLocked(l *lease) earlyReply {
	p := l.poll
	if p == nil {
		return earlyReply{}
	}
	p.timer.Stop()
	l.poll = nil
	return earlyReply{p: p, rep: l.replyLocked()}
}

func (t *leaseTable) extendLocked(l *lease, now time.Time) {
	if e := now.Add(l.ttl); e.After(l.expires) {
		l.expires = e
	}
	l.timer.Reset(l.expires.Sub(now))
}

// timeout runs when a lease's timer fires. The lease is handed out as
// expired only if it really ended and the timer was not delayed by a stall
// of this process; the master then confirms its leadership before it
// proposes the expiry.
func (t *leaseTable) timeout(id uint64) {
	now := t.clock.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	l, ok := t.m[id]
	if !ok || l.ending {
		return
	}
	if now.Before(l.expires) {
		l.timer.Reset(l.expires.Sub(now))
		return
	}
	if late := now.Sub(l.expires); late > stallThreshold || t.stall.stalledSince(now, l.expires.Add(-l.ttl)) {
		t.log.Warn("lease ran out while the master stalled; giving the session a fresh lease", "session", id, "late", late)
		l.expires = now.Add(l.ttl)
		l.timer.Reset(l.ttl)
		return
	}
	l.ending = true
	t.expired = append(t.expired, id)
	select {
	case t.expiredC <- struct{}{}:
	default:
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

// graceAfterStall gives a session whose expiry is in flight a fresh lease
// if the master turns out to have stalled since the session's last
// renewal, and reports whether the expiry is off: given that grace, or no
// longer in flight at all.
func (t *leaseTable) graceAfterStall(id uint64) bool {
	now := t.clock.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	l := t.endingLocked(id)
	if l == nil {
		return true
	}
	if !t.stall.stalledSince(now, l.expires.Add(-l.ttl)) {
		return false
	}
	l.ending = false
	l.expires = now.Add(l.ttl)
	l.timer.Reset(l.ttl)
	return true
}

// retryExpiry abandons an expiry that could not be made (leadership not
// confirmed, the proposal failed): the lease timer looks again in a second.
func (t *leaseTable) retryExpiry(id uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if l := t.endingLocked(id); l != nil {
		l.ending = false
		l.timer.Reset(time.Second)
	}
}
