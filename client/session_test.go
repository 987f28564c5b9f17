package client_test

// Tests of the client's side of sessions (Chubby §2.8 "Sessions and
// KeepAlives": local lease, jeopardy, grace period, safe/expired events) on a
// real one-server cell. Both clocks are ManualClocks: the server's moves
// KeepAlive holds and the master's leases, the client's moves its local
// lease, grace period and reconnect backoff. A fault-injecting proxy between
// them makes renewals fail.

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/chubby-dev/chubby/client"
	"github.com/chubby-dev/chubby/session"
	"github.com/chubby-dev/chubby/testing/cell"
	"github.com/chubby-dev/chubby/testing/leak"
	"github.com/chubby-dev/chubby/testing/wait"
	"github.com/chubby-dev/chubby/wire"
)

// TestMain fails the package if a test leaves a goroutine behind, but for
// the stranded raft waiter testing/leak names.
func TestMain(m *testing.M) { leak.VerifyTestMain(m) }

const callTimeout = 10 * time.Second

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	t.Cleanup(cancel)
	return ctx
}

// rig is a cell, a client of it through a proxy, and the two clocks.
type rig struct {
	c  *cell.Cell
	sc *session.ManualClock // the server's
	cc *session.ManualClock // the client's
	p  *cell.Proxy
	cl *client.Client
}

func newRig(t *testing.T, cfg client.Config) *rig {
	t.Helper()
	c := cell.Start(t, cell.WithManualClock())
	r := &rig{c: c, sc: c.Manual(t), cc: session.NewManualClock(cell.Epoch), p: c.NewProxy(t)}
	cfg.Servers = []string{r.p.Addr()}
	cfg.FixedServers = true // the proxy is the only way to the master
	cfg.Clock = r.cc
	r.cl = c.Dial(t, cfg)
	// The first KeepAlive is parked on the master (its hold runs on sc).
	wait.For(t, 0, "the client's first KeepAlive", func() bool { return r.p.Count(wire.MKeepAlive) >= 1 })
	return r
}

// holdLock takes an exclusive lock through a new handle.
func (r *rig) holdLock(t *testing.T, name string) *client.Handle {
	t.Helper()
	h, err := r.cl.Open(ctxT(t), r.c.Path(name), client.Create())
	if err != nil {
		t.Fatal(err)
	}
	if err := h.TryAcquire(ctxT(t), client.Exclusive); err != nil {
		t.Fatal(err)
	}
	return h
}

// leaseEnd is when the client's local lease ends, on the client's clock.
func (r *rig) leaseEnd() time.Time { return r.cc.Now().Add(r.cl.Session().LeaseLeft) }

// reconnect heals the proxy and moves the client's clock in small steps
// (its reconnect backoff runs on it) until a new KeepAlive reaches the
// master; then moves the server's clock until the master answers it.
func (r *rig) reconnect(t *testing.T, until func() bool) {
	t.Helper()
	n := r.p.Count(wire.MKeepAlive)
	r.p.Heal()
	for i := 0; r.p.Count(wire.MKeepAlive) == n; i++ {
		if i == 400 {
			t.Fatal("the client did not reconnect within 40 s of its clock")
		}
		r.cc.Advance(100 * time.Millisecond)
		wait.Until(5*time.Millisecond, func() bool { return r.p.Count(wire.MKeepAlive) > n })
	}
	for i := 0; !until(); i++ {
		if i == 50 {
			t.Fatal("the master did not answer the KeepAlive")
		}
		r.sc.Advance(500 * time.Millisecond)
		wait.Until(20*time.Millisecond, until)
	}
}

// events collects what the client delivered so far.
func events(cl *client.Client) []client.EventType {
	var out []client.EventType
	for {
		select {
		case e := <-cl.Events():
			out = append(out, e.Type)
		default:
			return out
		}
	}
}

// nextEvent waits for the next event, failing unless it is want.
func nextEvent(t *testing.T, cl *client.Client, want client.EventType) client.Event {
	t.Helper()
	select {
	case e := <-cl.Events():
		if e.Type != want {
			t.Fatalf("event %s, want %s", e.Type, want)
		}
		return e
	case <-time.After(wait.Timeout):
		t.Fatalf("no %s event within %v", want, wait.Timeout)
	}
	return client.Event{}
}

// TestJeopardySafeExpired walks the client through §2.8: when the local
// lease runs out the session is in jeopardy — the lock-lost signal fires at
// that very moment, not before (while the lease is valid the lock is safe
// even with the master unreachable) and not after; a renewal within the
// grace period makes it safe again; a grace period without one expires it,
// after which every call fails with ErrSessionExpired.
func TestJeopardySafeExpired(t *testing.T) {
	const ttl, grace = 12 * time.Second, 20 * time.Second
	r := newRig(t, client.Config{SessionTTL: ttl, Grace: grace})
	h := r.holdLock(t, "lock")
	lost := h.LockLost()
	end := r.leaseEnd()
	if want := cell.Epoch.Add(ttl - session.DriftMargin(ttl)); !end.Equal(want) {
		t.Fatalf("local lease ends at %v, want the send time + TTL - drift = %v", end, want)
	}

	// The master becomes unreachable; renewals fail.
	r.p.Break()
	r.cc.Advance(end.Sub(r.cc.Now()) - time.Millisecond)
	wait.Never(t, 50*time.Millisecond, "LockLost closed while the local lease is still valid", func() bool { return wait.Closed(lost) })
	if evs := events(r.cl); len(evs) != 0 {
		t.Fatalf("events before the lease ended: %v", evs)
	}

	// The local lease ends: jeopardy, and the lock may be lost.
	r.cc.Advance(time.Millisecond)
	wait.For(t, 0, "LockLost to close when the local lease ends", func() bool { return wait.Closed(lost) })
	e := nextEvent(t, r.cl, client.EventJeopardy)
	if !e.Time.Equal(end) {
		t.Fatalf("jeopardy at %v, want the end of the local lease %v", e.Time, end)
	}
	if st := r.cl.State(); st != client.SessionJeopardy {
		t.Fatalf("state %v, want jeopardy", st)
	}

	// The master is back within the grace period: safe again.
	r.reconnect(t, func() bool { return r.cl.State() == client.SessionSafe })
	nextEvent(t, r.cl, client.EventSafe)
	if !wait.Closed(lost) {
		t.Fatal("LockLost reopened; the signal is final for that acquisition")
	}
	ok, err := r.cl.CheckSequencer(ctxT(t), mustSeq(t, h))
	if err != nil || !ok {
		t.Fatalf("after a recovered jeopardy the master still has the lock: CheckSequencer = %v, %v", ok, err)
	}

	// Unreachable again, for longer than the grace period: expired.
	r.p.Break()
	end = r.leaseEnd()
	r.cc.Advance(end.Sub(r.cc.Now()))
	nextEvent(t, r.cl, client.EventJeopardy)
	r.cc.Advance(grace - time.Millisecond)
	wait.Never(t, 50*time.Millisecond, "the session expired before the grace period ended", func() bool { return wait.Closed(r.cl.Done()) })
	r.cc.Advance(time.Millisecond)
	e = nextEvent(t, r.cl, client.EventExpired)
	if want := end.Add(grace); !e.Time.Equal(want) {
		t.Fatalf("expired at %v, want the end of the grace period %v", e.Time, want)
	}
	wait.For(t, 0, "Done to close", func() bool { return wait.Closed(r.cl.Done()) })
	if st := r.cl.State(); st != client.SessionExpired {
		t.Fatalf("state %v, want expired", st)
	}
	if _, err := h.GetStat(ctxT(t)); !errors.Is(err, client.ErrSessionExpired) {
		t.Fatalf("call after expiry: %v, want ErrSessionExpired", err)
	}
	if evs := events(r.cl); len(evs) != 0 {
		t.Fatalf("unexpected further events: %v", evs)
	}
}

// TestMasterExpiryEndsSessionOnReconnect: when the master has already ended
// the session (its lease ran out on the master's clock), a client in
// jeopardy learns so on its first KeepAlive after reconnecting and expires at
// once, without waiting out its grace period.
func TestMasterExpiryEndsSessionOnReconnect(t *testing.T) {
	const ttl, grace = 12 * time.Second, 45 * time.Second
	r := newRig(t, client.Config{SessionTTL: ttl, Grace: grace})
	h := r.holdLock(t, "lock")
	lost := h.LockLost()

	r.p.Break()
	end := r.leaseEnd()
	r.cc.Advance(end.Sub(r.cc.Now()))
	nextEvent(t, r.cl, client.EventJeopardy)
	if !wait.Closed(lost) {
		t.Fatal("LockLost open in jeopardy")
	}

	// The master's lease runs out (its timers fire on time: no stall).
	r.sc.Advance(2 * ttl)
	wait.For(t, 0, "the master to expire the session", func() bool { return r.c.Status().Sessions == 0 })

	r.reconnect(t, func() bool { return wait.Closed(r.cl.Done()) })
	nextEvent(t, r.cl, client.EventExpired)
	if !r.cc.Now().Before(end.Add(grace)) {
		t.Fatal("test bug: the grace period ran out; the master's word was not what expired the session")
	}
	if _, err := h.GetStat(ctxT(t)); !errors.Is(err, client.ErrSessionExpired) {
		t.Fatalf("call after expiry: %v, want ErrSessionExpired", err)
	}
	if evs := events(r.cl); len(evs) != 0 {
		t.Fatalf("unexpected further events: %v", evs)
	}
}

// TestStateDoesNotSwallowJeopardy: asking for the session's state (State,
// Session) at the moment the local lease ends must not consume the
// transition: the lock-lost signal and the jeopardy event still come.
func TestStateDoesNotSwallowJeopardy(t *testing.T) {
	const ttl = 12 * time.Second
	r := newRig(t, client.Config{SessionTTL: ttl})
	h := r.holdLock(t, "lock")
	lost := h.LockLost()
	r.p.Break()
	end := r.leaseEnd()
	r.cc.Advance(end.Sub(r.cc.Now()))
	if st := r.cl.State(); st != client.SessionJeopardy {
		t.Fatalf("state %v, want jeopardy", st)
	}
	if info := r.cl.Session(); info.State != client.SessionJeopardy || info.LeaseLeft != 0 {
		t.Fatalf("session %+v, want jeopardy with no lease left", info)
	}
	wait.For(t, 0, "LockLost to close", func() bool { return wait.Closed(lost) })
	nextEvent(t, r.cl, client.EventJeopardy)
	// Leave the session in a state Close can end quickly.
	r.reconnect(t, func() bool { return r.cl.State() == client.SessionSafe })
}

// TestEventsNeverBlock: a program that never reads Events must not stall the
// session: events beyond the buffer are dropped and counted, and the
// KeepAlive loop goes on (it recovers from jeopardy twice).
func TestEventsNeverBlock(t *testing.T) {
	const ttl = 12 * time.Second
	r := newRig(t, client.Config{SessionTTL: ttl, EventBuffer: 1})
	for round := range 2 {
		r.p.Break()
		r.cc.Advance(r.leaseEnd().Sub(r.cc.Now()))
		wait.For(t, 0, "jeopardy", func() bool { return r.cl.State() == client.SessionJeopardy })
		r.reconnect(t, func() bool { return r.cl.State() == client.SessionSafe })
		t.Logf("round %d: safe again; dropped %d", round, r.cl.DroppedEvents())
	}
	// jeopardy, safe, jeopardy, safe: the first fills the buffer.
	wait.For(t, 0, "three dropped events", func() bool { return r.cl.DroppedEvents() == 3 })
	if evs := events(r.cl); len(evs) != 1 || evs[0] != client.EventJeopardy {
		t.Fatalf("buffered events %v, want the first jeopardy only", evs)
	}
	done := make(chan error, 1)
	go func() { done <- r.cl.Close() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Close: %v", err)
		}
	case <-time.After(wait.Timeout):
		t.Fatal("Close blocked")
	}
}

func mustSeq(t *testing.T, h *client.Handle) client.Sequencer {
	t.Helper()
	seq, err := h.Sequencer()
	if err != nil {
		t.Fatal(err)
	}
	return seq
}
