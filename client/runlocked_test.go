package client_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/chubby-dev/chubby/client"
	"github.com/chubby-dev/chubby/session"
	"github.com/chubby-dev/chubby/testing/cell"
	"github.com/chubby-dev/chubby/testing/wait"
	"github.com/chubby-dev/chubby/wire"
)

// lockedRun is a RunLocked in the background whose fn reports what it saw
// and returns only when told to.
type lockedRun struct {
	started   chan client.Sequencer
	cancelled chan error     // the cause of fn's ctx, once done
	cancelAt  chan time.Time // the client's clock when fn saw it
	proceed   chan error     // what fn returns
	result    chan error     // what RunLocked returned
}

func startRunLocked(t *testing.T, h *client.Handle, clk interface{ Now() time.Time }, opts ...client.LockOption) *lockedRun {
	t.Helper()
	r := &lockedRun{started: make(chan client.Sequencer, 1), cancelled: make(chan error, 1), cancelAt: make(chan time.Time, 1),
		proceed: make(chan error), result: make(chan error, 1)}
	go func() {
		r.result <- h.RunLocked(context.Background(), client.Exclusive, func(ctx context.Context, seq client.Sequencer) error {
			r.started <- seq
			select {
			case <-ctx.Done():
				r.cancelAt <- clk.Now()
				r.cancelled <- context.Cause(ctx)
			case err := <-r.proceed:
				return err
			}
			return <-r.proceed
		}, opts...)
	}()
	select {
	case seq := <-r.started:
		r.started <- seq
	case <-time.After(wait.Timeout):
		t.Fatal("RunLocked did not run fn")
	}
	return r
}

func (r *lockedRun) seq() client.Sequencer {
	seq := <-r.started
	r.started <- seq
	return seq
}

func recv[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(wait.Timeout):
		t.Fatalf("no %s within %v", what, wait.Timeout)
	}
	var zero T
	return zero
}

// TestRunLockedCancelsAtJeopardy: fn's context is cancelled the moment the
// local lease runs out — while the master still holds the lock for the
// session, so before it could grant it to anybody else — with a
// *LockLostError whose StopBy lies before the master's lease of the session
// ends. RunLocked releases the lock only after fn has returned.
func TestRunLockedCancelsAtJeopardy(t *testing.T) {
	const ttl = 12 * time.Second
	r := newRig(t, client.Config{SessionTTL: ttl, LockDelay: client.NoLockDelay})
	observer := r.c.Dial(t, client.Config{})
	h, err := r.cl.Open(ctxT(t), r.c.Path("lock"), client.Create())
	if err != nil {
		t.Fatal(err)
	}
	run := startRunLocked(t, h, r.cc)
	seq := run.seq()

	r.p.Break()
	end := r.leaseEnd()
	r.cc.Advance(end.Sub(r.cc.Now()) - time.Millisecond)
	wait.Never(t, 50*time.Millisecond, "fn's ctx cancelled while the local lease is valid", func() bool { return len(run.cancelled) > 0 })
	r.cc.Advance(time.Millisecond)
	at := recv(t, run.cancelAt, "cancellation of fn's ctx at jeopardy")
	cause := recv(t, run.cancelled, "cause")
	var lost *client.LockLostError
	if !errors.As(cause, &lost) || !errors.Is(cause, client.ErrLockLost) || lost.Reason != client.LostJeopardy {
		t.Fatalf("cause %v, want a jeopardy LockLostError", cause)
	}
	if !at.Equal(end) || !lost.At.Equal(end) {
		t.Fatalf("cancelled at %v (error says %v), want the end of the local lease %v", at, lost.At, end)
	}
	// The master's lease of the session lasts until at least the send time
	// of the last renewal + TTL; with no lock-delay the lock can move then.
	if masterEnd := end.Add(session.DriftMargin(ttl)); !lost.StopBy.After(end) || !lost.StopBy.Before(masterEnd) {
		t.Fatalf("StopBy %v, want after jeopardy %v and before the master's lease ends %v", lost.StopBy, end, masterEnd)
	}
	// The master has not moved: the lock is still the session's.
	if ok, err := observer.CheckSequencer(ctxT(t), seq); err != nil || !ok {
		t.Fatalf("at jeopardy the master no longer has the lock: %v, %v", ok, err)
	}

	// fn has not returned: RunLocked neither returns nor releases.
	r.reconnect(t, func() bool { return r.cl.State() == client.SessionSafe })
	wait.Never(t, 50*time.Millisecond, "RunLocked returned before fn", func() bool { return len(run.result) > 0 })
	if ok, err := observer.CheckSequencer(ctxT(t), seq); err != nil || !ok {
		t.Fatalf("the lock was released while fn still ran: %v, %v", ok, err)
	}
	if got, err := h.Sequencer(); err != nil || got != seq {
		t.Fatalf("the handle let go of the lock while fn still ran: %v, %v", got, err)
	}

	run.proceed <- nil
	if err := recv(t, run.result, "RunLocked's return"); !errors.Is(err, client.ErrLockLost) {
		t.Fatalf("RunLocked after a jeopardy = %v, want ErrLockLost", err)
	}
	if ok, err := observer.CheckSequencer(ctxT(t), seq); err != nil || ok {
		t.Fatalf("the lock was not released after fn returned: %v, %v", ok, err)
	}
}

// TestRunLockedStopByLockDelay: with lock-delay, StopBy leaves fn half of it
// (at most 2 s) after jeopardy.
func TestRunLockedStopByLockDelay(t *testing.T) {
	r := newRig(t, client.Config{SessionTTL: 12 * time.Second})
	h, err := r.cl.Open(ctxT(t), r.c.Path("lock"), client.Create())
	if err != nil {
		t.Fatal(err)
	}
	run := startRunLocked(t, h, r.cc, client.LockDelay(time.Second))
	r.p.Break()
	end := r.leaseEnd()
	r.cc.Advance(end.Sub(r.cc.Now()))
	var lost *client.LockLostError
	if cause := recv(t, run.cancelled, "cancellation at jeopardy"); !errors.As(cause, &lost) {
		t.Fatalf("cause %v, want a LockLostError", cause)
	}
	if want := end.Add(500 * time.Millisecond); !lost.StopBy.Equal(want) {
		t.Fatalf("StopBy %v, want jeopardy + lock-delay/2 = %v", lost.StopBy, want)
	}
	r.reconnect(t, func() bool { return r.cl.State() == client.SessionSafe })
	run.proceed <- nil
	recv(t, run.result, "RunLocked's return")
}

// TestRunLockedReturnsFnError: fn runs with the lock held and its sequencer;
// its error is RunLocked's; the lock is released after it returns.
func TestRunLockedReturnsFnError(t *testing.T) {
	c := cell.Start(t, cell.WithManualClock())
	cl := c.Dial(t, client.Config{})
	other := c.Dial(t, client.Config{})
	h, err := cl.Open(ctxT(t), c.Path("lock"), client.Create())
	if err != nil {
		t.Fatal(err)
	}
	boom := errors.New("boom")
	var during bool
	err = h.RunLocked(ctxT(t), client.Exclusive, func(ctx context.Context, seq client.Sequencer) error {
		ok, err := other.CheckSequencer(ctx, seq)
		during = ok && err == nil && ctx.Err() == nil
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("RunLocked = %v, want fn's error", err)
	}
	if !during {
		t.Fatal("fn ran without a valid sequencer")
	}
	if _, err := h.Sequencer(); !errors.Is(err, client.ErrNotHeld) {
		t.Fatalf("after RunLocked the handle still holds the lock: %v", err)
	}
	oh, err := other.Open(ctxT(t), c.Path("lock"))
	if err != nil {
		t.Fatal(err)
	}
	if err := oh.TryAcquire(ctxT(t), client.Exclusive); err != nil {
		t.Fatalf("the lock was not released: %v", err)
	}
	// Held elsewhere, and ctx ends while waiting: fn never runs.
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	err = h.RunLocked(ctx, client.Exclusive, func(context.Context, client.Sequencer) error {
		t.Error("fn ran without the lock")
		return nil
	})
	if err == nil {
		t.Fatal("RunLocked of a lock held elsewhere succeeded")
	}
}

// TestRunLockedCancelsOnRelease: releasing the lock (here: closing the
// handle) while fn runs cancels fn's ctx; RunLocked reports the loss.
func TestRunLockedCancelsOnRelease(t *testing.T) {
	c := cell.Start(t, cell.WithManualClock())
	p := c.NewProxy(t)
	cl := c.Dial(t, client.Config{Servers: []string{p.Addr()}, FixedServers: true})
	h, err := cl.Open(ctxT(t), c.Path("lock"), client.Create())
	if err != nil {
		t.Fatal(err)
	}
	run := startRunLocked(t, h, session.RealClock{})
	releases := p.Count(wire.MRelease)
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}
	var lost *client.LockLostError
	if cause := recv(t, run.cancelled, "cancellation on Close"); !errors.As(cause, &lost) || lost.Reason != client.LostReleased {
		t.Fatalf("cause %v, want a released LockLostError", cause)
	}
	run.proceed <- nil
	if err := recv(t, run.result, "RunLocked's return"); !errors.Is(err, client.ErrLockLost) {
		t.Fatalf("RunLocked = %v, want ErrLockLost", err)
	}
	if n := p.Count(wire.MRelease) - releases; n != 1 {
		t.Fatalf("%d Release calls, want the handle's one", n)
	}
}
