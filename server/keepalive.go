package server

import (
	"time"

	"github.com/chubby-dev/chubby/session"
	"github.com/chubby-dev/chubby/wire"
)

// replier answers a call on a client connection (a *conn). push sends a
// partial answer (wire.Response.More): the call stays open for more.
type replier interface {
	reply(id uint64, body any, err error)
	push(id uint64, body any)
}

// poll is a parked KeepAlive, answered when its hold ends or earlier. A
// KeepAliveMany parks one poll for all of its sessions (many): answering it
// answers every one of them, in one reply.
type poll struct {
	c     replier
	reqID uint64
	timer session.Timer
	// ids are the sessions the poll renews; each one's lease points at the
	// poll (lease.poll, or lease.poll2) until it is answered.
	ids  []uint64
	many bool
	// stream: a KeepAlive that takes event pushes (wire.KeepAliveArgs.Stream)
	// while it is parked; every answer to it goes out through its lease's
	// out-queue (queueLocked), in order.
	stream bool
	// answered is set (t.mu held) once a reply is built or the poll given
	// up; a timer that fires later does nothing.
	answered bool
}

// keepAlive records the acknowledged invalidations, extends the lease to
// now+TTL — now being when the KeepAlive arrived — and parks the call until
// its hold ends. It answers at once when
// urgent or when there is something to deliver; a previous parked poll of the
// same session is answered at once. A stream KeepAlive is sent the
// session's events as they come (pushEvents) while it stays parked.
func (t *leaseTable) keepAlive(c replier, reqID, id uint64, urgent bool, ackInval uint64, stream bool) error {
	now := t.clock.Now()
	t.mu.Lock()
	l, err := t.leaseLocked(id)
	if err != nil {
		t.mu.Unlock()
		return err
	}
	old := t.renewLocked(l, now, ackInval)
	old2 := t.takePollLocked(l) // a second KeepAliveMany's poll of the session
	answerNow := urgent || l.hasDeliveriesLocked()
	var rep wire.KeepAliveReply
	var drain func()
	switch {
	case answerNow && stream:
		// After what is queued for the session's earlier KeepAlive.
		drain = t.queueLocked(l, c, reqID, l.replyLocked(), final)
	case answerNow:
		rep = l.replyLocked()
	default:
		p := &poll{c: c, reqID: reqID, ids: []uint64{id}, stream: stream}
		p.timer = t.clock.AfterFunc(session.KeepAliveHold(l.ttl, t.rng), func() { t.answer(p) })
		l.poll = p
	}
	t.mu.Unlock()
	old.send()
	old2.send()
	t.metrics.keepAlives.Inc()
	if urgent {
		t.metrics.urgent.Inc()
	}
	switch {
	case drain != nil:
		drain()
	case answerNow && !stream:
		c.reply(reqID, rep, nil)
	}
	return nil
}

// maxStreamedOut bounds a session's answers queued but not yet written
// (lease.out), and maxStreamedBytes the events among them (eventCost):
// past either, events wait in the session's event queue (which has its own
// bounds) for its next KeepAlive's reply, as for a KeepAlive that does not
// stream, so a client that does not read cannot grow the server's memory
// by more than that.
const (
	maxStreamedOut   = 64
	maxStreamedBytes = wire.KeepAliveBytes
)

// final, as queueLocked's pushCost, queues a stream KeepAlive's final reply.
const final = -1

// streamed is an answer queued on a lease's out-queue: a push (more) or the
// final reply of a stream KeepAlive.
type streamed struct {
	c     replier
	reqID uint64
	body  wire.KeepAliveReply
	more  bool
	cost  int // of a push's events, counted in lease.outBytes
}

// queueLocked queues an answer to a stream KeepAlive of l behind the
// session's answers queued before it: a push carrying events of pushCost
// bytes (counted in l.outBytes until written), or with pushCost < 0 the
// final reply. It returns the func that writes them
// (without t.mu), or nil when a drain already under way will: one drain at
// a time per session, so a final reply never overtakes an earlier push and
// the pushes of one KeepAlive never overtake the final reply of the one
// before (sends otherwise run on several workers and may cross).
func (t *leaseTable) queueLocked(l *lease, c replier, reqID uint64, body wire.KeepAliveReply, pushCost int) func() {
	s := streamed{c: c, reqID: reqID, body: body, more: pushCost >= 0}
	if s.more {
		s.cost = pushCost
		l.outBytes += pushCost
	}
	l.out = append(l.out, s)
	if l.draining {
		return nil
	}
	l.draining = true
	return func() { t.drain(l) }
}

// drain writes l's queued answers in order until none is left.
func (t *leaseTable) drain(l *lease) {
	for {
		t.mu.Lock()
		if len(l.out) == 0 {
			l.out = nil
			l.draining = false
			t.mu.Unlock()
			return
		}
		s := l.out[0]
		l.out[0] = streamed{}
		l.out = l.out[1:]
		l.outBytes -= s.cost
		t.mu.Unlock()
		if s.more {
			s.c.push(s.reqID, s.body)
		} else {
			s.c.reply(s.reqID, s.body, nil)
		}
	}
}

// keepAliveMany is keepAlive for the sessions of a KeepAliveMany from
// principal: each entry is checked as its session's own KeepAlive would be
// (a refusal answers that entry, not the call) and renewed — a session
// parked on an earlier KeepAliveMany leaves that one parked (lease.poll2),
// a session's own parked KeepAlive is answered at once; then one poll
// is parked for all of them, held session.KeepAliveManyHold, unless one
// is urgent, has something to deliver or was refused: then every session
// is answered at once.
func (t *leaseTable) keepAliveMany(c replier, reqID uint64, principal string, entries []wire.KeepAliveEntry) {
	now := t.clock.Now()
	p := &poll{c: c, reqID: reqID, many: true, ids: make([]uint64, 0, len(entries))}
	var refused []wire.KeepAliveResult
	var early []earlyReply
	answerNow := false
	var minTTL time.Duration
	urgent := 0
	t.mu.Lock()
	for _, e := range entries {
		l, err := t.callerLocked(e.Session, e.Secret, principal)
		if err != nil {
			refused = append(refused, wire.KeepAliveResult{Session: e.Session, Code: wire.Code(err), Error: err.Error()})
			answerNow = true
			continue
		}
		if l.poll == p || l.poll2 == p { // named twice
			continue
		}
		t.renewOnlyLocked(l, now, e.AckInval)
		if l.poll2 != nil { // a third: the earliest is answered now
			early = append(early, t.takePollLocked(l))
		}
		if l.poll != nil && l.poll.many {
			// Parked on an earlier KeepAliveMany: that one stays parked
			// for its other sessions, and this one answers the session
			// too (see lease.poll2).
			l.poll2 = p
		} else {
			early = append(early, t.takePollLocked(l)) // a KeepAlive of its own, answered now
			l.poll = p
		}
		if e.Urgent {
			urgent++
		}
		answerNow = answerNow || e.Urgent || l.hasDeliveriesLocked()
		p.ids = append(p.ids, l.id)
		if minTTL == 0 || l.ttl < minTTL {
			minTTL = l.ttl
		}
	}
	var rep wire.KeepAliveManyReply
	if answerNow {
		rep = t.answerManyLocked(p)
		rep.Sessions = append(rep.Sessions, refused...)
	} else {
		p.timer = t.clock.AfterFunc(t.manyHoldLocked(p, now, session.KeepAliveManyHold(minTTL)), func() { t.answer(p) })
	}
	t.mu.Unlock()
	for _, e := range early {
		e.send()
	}
	t.metrics.keepAlives.Add(float64(len(p.ids)))
	t.metrics.urgent.Add(float64(urgent))
	if answerNow {
		c.reply(reqID, rep, nil)
	}
}

// manyHoldLocked is how long to hold KeepAliveMany poll p, parked now: at
// most hold, and no later than the end of another KeepAliveMany parked on
// the same connection. The connection's calls are then answered together,
// their sessions send their next KeepAlives together, and the client joins
// them in one call: sessions created at different times (in calls of their
// own) end up renewing in one call per connection, where calls answered
// at their own times would stay apart for good.
func (t *leaseTable) manyHoldLocked(p *poll, now time.Time, hold time.Duration) time.Duration {
	at := now.Add(hold)
	if d, ok := t.manyDue[p.c]; ok && !d.p.answered && d.at.After(now) && d.at.Before(at) {
		return d.at.Sub(now)
	}
	t.manyDue[p.c] = manyDue{p: p, at: at}
	return hold
}

// manyDue is the end of the hold of a connection's parked KeepAliveMany.
type manyDue struct {
	p  *poll
	at time.Time
}

// renewLocked is what a KeepAlive of lease l does before it parks: it
// frees the writers waiting for the invalidations acknowledged up to
// ackInval, extends the lease from now, and takes the session's parked
// poll to be answered at once (returned).
func (t *leaseTable) renewLocked(l *lease, now time.Time, ackInval uint64) earlyReply {
	t.renewOnlyLocked(l, now, ackInval)
	return t.takePollLocked(l)
}

// renewOnlyLocked is renewLocked without the taking of the parked poll.
func (t *leaseTable) renewOnlyLocked(l *lease, now time.Time, ackInval uint64) {
	t.ackLocked(l, ackInval)
	if l.unflushed == nil { // a session carried over has no earlier KeepAlive here
		t.metrics.leaseUsed.Observe(float64(now.Sub(l.renewed)) / float64(l.ttl))
	}
	t.countKeepAliveLocked(now)
	// A KeepAlive of this master's epoch: the client has flushed its cache.
	t.flushedLocked(l)
	t.extendLocked(l, now)
	l.renewed = now
}

// hasDeliveriesLocked: the session has invalidations, events or a count of
// dropped events to deliver, so its KeepAlive is answered at once.
func (l *lease) hasDeliveriesLocked() bool {
	return len(l.invals) > 0 || len(l.events) > 0 || l.dropped > 0
}

// answer ends a poll's hold with a reply that grants the lease. The lease is
// not extended again here: the client counts its lease from when it sent
// the KeepAlive, which the extension on arrival already covers, and a
// client that died while its poll was parked must not have its session
// outlive its last KeepAlive by more than the TTL (issue 16: a dead
// holder's lock moved up to a hold — a third of the TTL — late).
func (t *leaseTable) answer(p *poll) {
	t.mu.Lock()
	if p.answered {
		t.mu.Unlock()
		return
	}
	var body any
	if p.many {
		body = t.answerManyLocked(p)
	} else {
		l, ok := t.m[p.ids[0]]
		if !ok || l.poll != p {
			t.mu.Unlock()
			return
		}
		p.answered = true
		l.poll = nil
		if p.stream {
			drain := t.queueLocked(l, p.c, p.reqID, l.replyLocked(), final)
			t.mu.Unlock()
			if drain != nil {
				drain()
			}
			return
		}
		body = l.replyLocked()
	}
	t.mu.Unlock()
	p.c.reply(p.reqID, body, nil)
}

// answerManyLocked answers a KeepAliveMany's poll: a reply for each of its
// sessions that still has a lease parked on it, as many as fit a frame
// (those that do not are left out, and their clients send again at once;
// the first always goes).
func (t *leaseTable) answerManyLocked(p *poll) wire.KeepAliveManyReply {
	p.answered = true
	if p.timer != nil {
		p.timer.Stop()
	}
	if t.manyDue[p.c].p == p {
		delete(t.manyDue, p.c)
	}
	rep := wire.KeepAliveManyReply{Sessions: make([]wire.KeepAliveResult, 0, len(p.ids))}
	used := 0
	for _, id := range p.ids {
		l, ok := t.m[id]
		if !ok {
			continue
		}
		switch p {
		case l.poll: // a later KeepAliveMany's poll, if any, takes its place
			l.poll, l.poll2 = l.poll2, nil
		case l.poll2:
			l.poll2 = nil
		default:
			continue
		}
		need := l.replyBoundLocked()
		if len(rep.Sessions) > 0 && used+need > wire.ReplyBudget {
			continue
		}
		used += need
		rep.Sessions = append(rep.Sessions, wire.KeepAliveResult{Session: id, Reply: l.replyLocked()})
	}
	return rep
}

// replyBoundLocked is at least the encoded size of the session's next
// KeepAlive reply (replyLocked): its pending invalidations and events, at
// most wire.KeepAliveBytes of them plus the first invalidation, which
// always goes.
func (l *lease) replyBoundLocked() int {
	const fixed = 64 // the session id, TTL, numbers and field names
	pending, first := 0, 0
	for i, pi := range l.invals {
		cost := 0
		for _, p := range pi.paths {
			cost += len(p) + 5
		}
		if i == 0 {
			first = cost
		}
		pending += cost
	}
	for _, e := range l.events {
		pending += eventCost(e)
	}
	return fixed + min(pending, wire.KeepAliveBytes+first)
}

// replyLocked builds a KeepAlive reply: the lease, the unacknowledged
// invalidations and the queued events (which it takes), within
// wire.KeepAliveBytes. Invalidations come first, each path once; InvalSeq
// is that of the last invalidation whose paths all fit, so the client
// acknowledges only what it dropped. Events that do not fit stay queued for
// the next reply, which keepAlive then answers at once.
func (l *lease) replyLocked() wire.KeepAliveReply {
	rep := wire.KeepAliveReply{TTL: int64(l.ttl), Dropped: l.dropped}
	budget := wire.KeepAliveBytes
	seen := map[string]bool{}
	for i, pi := range l.invals {
		cost := 0
		for _, p := range pi.paths {
			if !seen[p] {
				cost += len(p) + 5
			}
		}
		if cost > budget && i > 0 { // the first always goes: progress
			break
		}
		budget -= cost
		for _, p := range pi.paths {
			if !seen[p] {
				seen[p] = true
				rep.Invalidations = append(rep.Invalidations, p)
			}
		}
		rep.InvalSeq = pi.seq
	}
	if len(l.invals) == 0 {
		rep.InvalSeq = l.invalSeq
	}
	rep.Events, _ = l.takeEventsLocked(budget)
	l.dropped = 0
	return rep
}

// takeEventsLocked takes the queued events that fit budget bytes (the first
// always goes), and returns them with their cost (eventCost).
func (l *lease) takeEventsLocked(budget int) (evs []wire.Event, cost int) {
	n := 0
	for n < len(l.events) {
		ec := eventCost(l.events[n])
		if ec > budget-cost && n > 0 {
			break
		}
		cost += ec
		if c := l.events[n].Contents; c != nil {
			l.fillBytes -= len(c.Data)
		}
		n++
	}
	evs = l.events[:n:n]
	l.events = l.events[n:]
	if len(l.events) == 0 {
		l.events = nil
	}
	return evs, cost
}

// pushLocked sends l's queued events (and the count of dropped ones) to
// its parked stream KeepAlive p as pushes, leaving p parked, until the
// session's out-queue is full (the rest then wait for p's reply). It
// returns the drain to run without t.mu (nil: none needed).
func (t *leaseTable) pushLocked(l *lease, p *poll) (drain func()) {
	for len(l.events) > 0 || l.dropped > 0 {
		if len(l.out) >= maxStreamedOut || l.outBytes >= maxStreamedBytes {
			break
		}
		evs, cost := l.takeEventsLocked(wire.KeepAliveBytes)
		rep := wire.KeepAliveReply{Events: evs, Dropped: l.dropped}
		l.dropped = 0
		if d := t.queueLocked(l, p.c, p.reqID, rep, cost); d != nil {
			drain = d
		}
	}
	return drain
}

// answerAll replies to parked polls; called without t.mu so a slow client
// connection never blocks the lease table.
func answerAll(ps []*poll, body any, err error) {
	for _, p := range ps {
		p.c.reply(p.reqID, body, err)
	}
}

// earlyReply is a parked poll taken to be answered early, with its reply
// (a wire.KeepAliveReply, or a wire.KeepAliveManyReply for every session
// of a KeepAliveMany).
type earlyReply struct {
	p    *poll
	body any
	// drain, if set, writes a stream KeepAlive's queued answers instead.
	drain func()
}

func (e earlyReply) send() {
	switch {
	case e.drain != nil:
		e.drain()
	case e.p != nil:
		e.p.c.reply(e.p.reqID, e.body, nil)
	}
}

// takePollLocked takes the session's parked poll, if any, to be answered
// at once: with the session's reply, or a KeepAliveMany's with the replies
// of all its sessions (a later KeepAliveMany's poll of the session, if any,
// stays parked and becomes its poll).
func (t *leaseTable) takePollLocked(l *lease) earlyReply {
	p := l.poll
	if p == nil {
		return earlyReply{}
	}
	if p.many {
		return earlyReply{p: p, body: t.answerManyLocked(p)}
	}
	p.answered = true
	p.timer.Stop()
	l.poll = nil
	if p.stream {
		return earlyReply{drain: t.queueLocked(l, p.c, p.reqID, l.replyLocked(), final)}
	}
	return earlyReply{p: p, body: l.replyLocked()}
}

type pendingInval struct {
	seq   uint64
	paths []string
	acked chan struct{}
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

// releaseLocked frees every writer waiting on this session's acknowledgements
// (the session is gone, or this server is no longer master).
func (l *lease) releaseLocked() {
	for _, pi := range l.invals {
		close(pi.acked)
	}
	l.invals = nil
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

// maxQueuedEvents bounds a session's undelivered events; past it events are
// dropped and counted (a slow consumer never blocks the master).
const maxQueuedEvents = 1024

// pushEvents queues events for a session and answers its parked KeepAlive.
// An event's contents are stamped with the session's invalidation number
// as of now (fill.go), or dropped if maxQueuedFillBytes already wait.
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
		if e.Contents != nil {
			if l.fillBytes+len(e.Contents.Data) > maxQueuedFillBytes {
				e.Contents = nil
			} else {
				c := *e.Contents // shared by the watchers: each its own number
				c.InvalSeq = l.invalSeq
				e.Contents = &c
				l.fillBytes += len(c.Data)
			}
		}
		l.events = append(l.events, e)
	}
	if sp := l.poll; sp != nil && sp.stream && len(l.invals) == 0 {
		// A stream KeepAlive: the events go out now and it stays parked,
		// so the client need not send another KeepAlive to hear of the
		// next write (half the messages of a config fan-out).
		// If its out-queue is full (a client that does not read), the
		// rest wait for the KeepAlive's reply at the end of its hold.
		drain := t.pushLocked(l, sp)
		t.mu.Unlock()
		if drain != nil {
			t.goSend(drain)
		}
		return
	}
	p := t.takePollLocked(l)
	t.mu.Unlock()
	// pushEvents runs on raft's apply goroutine: never write to a client's
	// socket there. The reply is built (in order) above; only the send is
	// left to another goroutine: a kept worker's, whose stack has already
	// grown to what encoding and sending take (a new goroutine per send
	// grew and copied its stack on every event).
	if p.p != nil || p.drain != nil {
		t.goSend(p.send)
	}
}
