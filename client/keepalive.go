package client

// The KeepAlive loop: renewing the lease, reconnecting after a failure,
// jeopardy and the grace period, expiry, and delivering events.

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"time"

	"github.com/chubby-dev/chubby/session"
	"github.com/chubby-dev/chubby/wire"
)

// keepAliveLoop renews the lease. A KeepAlive is always parked on the
// master, which answers it after about a third of the TTL — or at once
// when the next KeepAlive of the session arrives: the loop sends the next
// one when the answer comes or when session.RenewInterval has passed since
// the last send, whichever is first, so at most two are in flight. When no
// renewal arrives before the local lease ends the session is in jeopardy;
// the loop keeps reconnecting (with jittered backoff) until the grace
// period ends.
func (c *Client) keepAliveLoop() {
	defer close(c.done)
	c.mu.Lock()
	retry := c.newRenewalRetrier(c.lease.TTL)
	c.mu.Unlock()
	type result struct {
		sentAt time.Time
		epoch  uint64 // the master's the KeepAlive went to
		rep    wire.KeepAliveReply
		err    error
		conn   *rpcConn
		push   bool // events pushed to a parked KeepAlive, not its answer
	}
	// The answers and pushes, in the order the connection's reader got
	// them (a final answer's events before the next KeepAlive's pushes);
	// the reader never blocks on the loop.
	results := newInbox[result]()
	inflight := 0
	var kaConn *rpcConn    // the connection of the KeepAlives in flight
	var nextSend time.Time // when to send another while one is parked
	// urgent: ask the master to answer at once (fresh connection or
	// jeopardy) rather than hold the poll for a third of the TTL.
	urgent := false
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for {
		c.mu.Lock()
		conn, epoch := c.conn, c.epoch
		c.mu.Unlock()
		if conn == nil && inflight == 0 {
			if err := c.connect(ctx); err != nil {
				c.log.Debug("reconnect failed", "err", err)
				if !c.sleep(retry.next()) {
					return
				}
				continue
			}
			urgent = true
			continue
		}
		now := c.clock.Now()
		if conn != nil && (inflight == 0 || (inflight == 1 && conn == kaConn && !now.Before(nextSend))) {
			inflight++
			kaConn = conn
			c.mu.Lock()
			args := wire.KeepAliveArgs{Urgent: urgent || c.lease.State() != SessionSafe, AckInval: c.invalAck.Load()}
			ttl := c.lease.TTL
			c.mu.Unlock()
			c.rngMu.Lock()
			nextSend = now.Add(session.RenewInterval(ttl, c.rng))
			c.rngMu.Unlock()
			conn.keepAlive(ctx, epoch, c.session(), args, func(rep wire.KeepAliveReply, err error) {
				results.put(result{sentAt: now, epoch: epoch, rep: rep, err: err, conn: conn})
			}, func(rep wire.KeepAliveReply, err error) {
				results.put(result{epoch: epoch, rep: rep, err: err, conn: conn, push: true})
			})
		}
		c.mu.Lock()
		wake := c.lease.Expiry()
		if c.lease.State() != SessionSafe {
			wake = c.lease.GraceEnd()
		}
		c.mu.Unlock()
		if inflight == 1 && conn != nil && conn == kaConn && nextSend.Before(wake) {
			wake = nextSend // the loop's top sends the next KeepAlive then
		}
		if !wake.After(c.clock.Now()) {
			// A deadline passed while the loop was busy (reconnecting):
			// act on it now rather than through a timer armed in the past.
			if c.checkLease() == SessionExpired {
				return
			}
			continue
		}
		timer := c.clock.NewTimer(wake.Sub(c.clock.Now()))
		if !wake.After(c.clock.Now()) {
			// The clock passed wake while the timer was armed (a test's
			// ManualClock jumps at any moment): a timer armed for a time
			// already past would wait for the next move of the clock.
			timer.Stop()
			continue
		}
		select {
		case <-results.ready:
			timer.Stop()
			r, ok := results.take()
			if !ok {
				continue
			}
			if r.push {
				if r.err != nil {
					// Its events are lost: counted as the master's drops are.
					c.dropped.Add(1)
					c.log.Warn("an event push from the master could not be read", "err", r.err)
					continue
				}
				c.pushed(r.epoch, r.rep)
				continue
			}
			inflight--
			switch {
			case r.err == nil:
				retry.reset()
				urgent = false
				c.renewed(r.sentAt, r.epoch, r.rep)
				if len(r.rep.Events) > 0 && len(r.rep.Invalidations) == 0 {
					// Let the consumer the events just woke run before
					// this goroutine writes the next KeepAlive: a config
					// reader then has its new value a system call sooner,
					// and when a write reaches many readers at once their
					// re-parking KeepAlives no longer go ahead of the
					// deliveries still waiting (chubbybench fanout, 3
					// servers: last reader's p99 about 10 % lower). Not
					// after invalidations: that KeepAlive is the
					// acknowledgement a write waits for.
					runtime.Gosched()
				}
			case errors.Is(r.err, ErrSessionExpired):
				c.expire()
				return
			default:
				c.log.Debug("keepalive failed", "err", r.err)
				c.mu.Lock()
				moved := r.epoch != c.epoch && r.conn == c.conn
				c.mu.Unlock()
				if moved { // refused for the epoch rehello left behind
					continue
				}
				if c.rehello(ctx, r.conn, r.epoch, r.err) {
					retry.reset()
					urgent = true
					continue
				}
				c.dropConn(r.conn)
				if c.checkLease() == SessionExpired {
					return
				}
				if inflight > 0 {
					continue // the other one fails too, on the dropped connection
				}
				if !c.sleep(retry.next()) {
					return
				}
			}
		case <-timer.C():
			st := c.checkLease()
			if st == SessionExpired {
				return
			}
			if st == SessionJeopardy && inflight > 0 {
				// No answer for a whole lease, yet the connection is up
				// (a paused master, or a partition that drops packets):
				// give it up and look for the master among every server
				// for the grace period, instead of waiting on it.
				c.dropConn(kaConn)
			}
		case <-c.stop:
			timer.Stop()
			return
		}
	}
}

// renewed applies a KeepAlive answer of the master of epoch: invalidations,
// events (refilling the cache from those that carry contents before
// delivering them), then the renewed local lease (from sentAt, when that
// KeepAlive was sent).
func (c *Client) renewed(sentAt time.Time, epoch uint64, rep wire.KeepAliveReply) {
	c.mu.Lock()
	current := epoch == c.epoch // not an answer of a master since replaced
	c.mu.Unlock()
	// Invalidations first: the renewed lease below must not make a dropped
	// entry servable again. Their numbers are recorded before they are
	// acknowledged: a write commits only once its invalidation is, and
	// from then on no event of an earlier write refills (server/fill.go).
	if len(rep.Invalidations) > 0 {
		if current {
			c.cache.InvalidateAt(rep.InvalSeq, rep.Invalidations...)
		} else {
			c.cache.Invalidate(rep.Invalidations...)
		}
	}
	c.invalAck.Store(rep.InvalSeq)
	c.deliverEvents(current, rep)
	c.mu.Lock()
	before := c.lease.Renewed(sentAt, time.Duration(rep.TTL))
	c.cache.SetLeaseEnd(c.lease.Expiry())
	c.mu.Unlock()
	if before == SessionJeopardy {
		if !c.cfg.DisableCache {
			c.cache.Enable()
		}
		c.emit(Event{Type: EventSafe})
	}
}

// pushed applies the events the master of epoch pushed to a parked stream
// KeepAlive: no lease, no invalidation, only events.
func (c *Client) pushed(epoch uint64, rep wire.KeepAliveReply) {
	c.mu.Lock()
	current := epoch == c.epoch
	c.mu.Unlock()
	c.deliverEvents(current, rep)
}

// deliverEvents refills the cache from the events of a reply (of the
// current master) that carry contents and delivers them, then reports
// dropped ones.
func (c *Client) deliverEvents(current bool, rep wire.KeepAliveReply) {
	for _, ev := range rep.Events {
		if ev.Type == wire.EventHandleInvalid {
			// The node is gone; so is the master's subscription.
			c.mu.Lock()
			delete(c.watches, ev.Path)
			c.mu.Unlock()
		}
		if ev.Contents != nil && current {
			c.refill(ev)
		}
		c.emit(Event{Type: EventType(ev.Type), Path: ev.Path})
	}
	if rep.Dropped > 0 {
		c.dropped.Add(rep.Dropped)
		c.log.Warn("the master dropped events for this session: its queue was full", "dropped", rep.Dropped)
	}
}

// inbox is an unbounded FIFO whose putter never blocks; ready has a value
// while it holds something.
type inbox[T any] struct {
	mu    sync.Mutex
	items []T
	ready chan struct{}
}

func newInbox[T any]() *inbox[T] { return &inbox[T]{ready: make(chan struct{}, 1)} }

func (q *inbox[T]) put(v T) {
	q.mu.Lock()
	q.items = append(q.items, v)
	q.mu.Unlock()
	select {
	case q.ready <- struct{}{}:
	default:
	}
}

// take returns the oldest item (ok false if none), leaving ready set if
// more remain.
func (q *inbox[T]) take() (v T, ok bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.items) == 0 {
		return v, false
	}
	v = q.items[0]
	var zero T
	q.items[0] = zero
	q.items = q.items[1:]
	if len(q.items) == 0 {
		q.items = nil
	} else {
		select {
		case q.ready <- struct{}{}:
		default:
		}
	}
	return v, true
}

// sleep waits d on the client's clock, or less: it wakes at the end of the
// local lease (in jeopardy, of the grace period), so that jeopardy — and with
// it the lock-lost signal — and expiry are acted on the moment they happen,
// not a backoff later. It returns false if the client is stopping or the
// session has expired.
func (c *Client) sleep(d time.Duration) bool {
	select {
	case <-c.stop:
		return false
	default:
	}
	c.mu.Lock()
	deadline := c.lease.Expiry()
	if c.lease.State() != SessionSafe {
		deadline = c.lease.GraceEnd()
	}
	c.mu.Unlock()
	if left := deadline.Sub(c.clock.Now()); left < d {
		d = left
	}
	if d > 0 {
		t := c.clock.NewTimer(d)
		defer t.Stop()
		if !deadline.After(c.clock.Now()) {
			return c.checkLease() != SessionExpired // see keepAliveLoop: past before armed
		}
		select {
		case <-t.C():
		case <-c.stop:
			return false
		}
	}
	return c.checkLease() != SessionExpired
}

// checkLease advances the lease state for now, emitting jeopardy (and
// signalling lock loss) or expiry.
func (c *Client) checkLease() SessionState {
	c.mu.Lock()
	before := c.lease.State()
	after := c.lease.Check(c.clock.Now())
	c.mu.Unlock()
	if before == SessionSafe && after != SessionSafe {
		c.cache.Disable()
		c.loseLocks(LostJeopardy)
		c.emit(Event{Type: EventJeopardy})
	}
	if after == SessionExpired && before != SessionExpired {
		c.expire()
	}
	return after
}

// expire ends the session locally: every handle and lock becomes invalid.
func (c *Client) expire() {
	conn, first := c.markExpired()
	if !first {
		return
	}
	c.cache.Disable()
	c.loseLocks(LostExpired)
	if conn != nil {
		conn.close()
	}
	c.emit(Event{Type: EventExpired})
}

// markExpired records the expiry; it returns the connection to close and
// whether this is the first time.
func (c *Client) markExpired() (*rpcConn, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	first := !c.expired
	c.expired = true
	c.lease.Expire()
	return c.conn, first
}

// loseLocks fires the lock-lost signal of every held lock.
func (c *Client) loseLocks(reason string) {
	c.mu.Lock()
	hs := make([]*Handle, 0, len(c.held))
	for h := range c.held {
		hs = append(hs, h)
	}
	c.mu.Unlock()
	for _, h := range hs {
		h.markLost(reason)
	}
}

func (c *Client) emit(e Event) {
	if e.Time.IsZero() {
		e.Time = c.clock.Now()
	}
	c.subMu.Lock()
	for _, fn := range c.subs {
		fn(e)
	}
	c.subMu.Unlock()
	select {
	case c.events <- e:
	default:
		c.dropped.Add(1)
	}
}

// Events delivers session events (jeopardy, safe, expired, master_failover).
// A consumer that falls behind loses events, never blocks the session;
// DroppedEvents counts them.
func (c *Client) Events() <-chan Event { return c.events }

// DroppedEvents is how many events were dropped because Events was full.
func (c *Client) DroppedEvents() uint64 { return c.dropped.Load() }
