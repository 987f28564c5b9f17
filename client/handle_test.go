package client_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/chubby-dev/chubby/client"
	"github.com/chubby-dev/chubby/testing/cell"
	"github.com/chubby-dev/chubby/testing/wait"
	"github.com/chubby-dev/chubby/wire"
)

// TestLockLostLifecycle: LockLost is nil while no lock is held, open while
// it is, closed by Release, and a new acquisition gets a fresh channel; the
// sequencers of successive acquisitions increase (Chubby §2.4).
func TestLockLostLifecycle(t *testing.T) {
	c := cell.Start(t, cell.WithManualClock())
	cl := c.Dial(t, client.Config{})
	h, err := cl.Open(ctxT(t), c.Path("lock"), client.Create())
	if err != nil {
		t.Fatal(err)
	}
	if h.LockLost() != nil {
		t.Fatal("LockLost is not nil before any Acquire")
	}
	if _, err := h.Sequencer(); !errors.Is(err, client.ErrNotHeld) {
		t.Fatalf("Sequencer before Acquire: %v, want ErrNotHeld", err)
	}
	if err := h.Acquire(ctxT(t), client.Exclusive); err != nil {
		t.Fatal(err)
	}
	first := h.LockLost()
	seq1 := mustSeq(t, h)
	if first == nil || wait.Closed(first) {
		t.Fatal("LockLost must be open while the lock is held")
	}
	if err := h.Release(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	if !wait.Closed(first) {
		t.Fatal("Release did not close LockLost")
	}
	if err := h.Release(ctxT(t)); !errors.Is(err, client.ErrNotHeld) {
		t.Fatalf("second Release: %v, want ErrNotHeld", err)
	}
	if err := h.TryAcquire(ctxT(t), client.Exclusive); err != nil {
		t.Fatal(err)
	}
	second := h.LockLost()
	if second == nil || wait.Closed(second) || second == first {
		t.Fatal("a new acquisition must get a fresh, open LockLost")
	}
	if seq2 := mustSeq(t, h); !seq2.Newer(seq1) {
		t.Fatalf("second acquisition %s is not newer than the first %s", seq2, seq1)
	}
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}
	if !wait.Closed(second) {
		t.Fatal("Handle.Close did not release the lock")
	}
}

// TestReleaseWithoutAnswer: a Release whose request never reaches the
// master fails when its context ends; the session still holds the lock (no
// one else can take it), an Acquire through the handle gets that same hold
// back — the same sequencer — and a Release then frees it.
func TestReleaseWithoutAnswer(t *testing.T) {
	c := cell.Start(t, cell.WithManualClock())
	p := c.NewProxy(t)
	cl := c.Dial(t, client.Config{Servers: []string{p.Addr()}, FixedServers: true})
	other := c.Dial(t, client.Config{})
	path := c.Path("lock")
	h, err := cl.Open(ctxT(t), path, client.Create())
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Acquire(ctxT(t), client.Exclusive); err != nil {
		t.Fatal(err)
	}
	seq := mustSeq(t, h)

	p.DropRequests(func(r *wire.Request) bool { return r.Method == wire.MRelease })
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	err = h.Release(ctx)
	cancel()
	if err == nil {
		t.Fatal("a Release the master never saw succeeded")
	}
	p.DropRequests(nil)
	if _, err := h.Sequencer(); !errors.Is(err, client.ErrNotHeld) {
		t.Fatalf("after a failed Release the handle still counts the lock as held: %v", err)
	}
	oh, err := other.Open(ctxT(t), path)
	if err != nil {
		t.Fatal(err)
	}
	if err := oh.TryAcquire(ctxT(t), client.Exclusive); !errors.Is(err, client.ErrLockHeld) {
		t.Fatalf("another session took the lock a failed Release left held: %v", err)
	}
	if err := h.Acquire(ctxT(t), client.Exclusive); err != nil {
		t.Fatal(err)
	}
	if again := mustSeq(t, h); again != seq {
		t.Fatalf("Acquire after the failed Release got %v, want the hold the session still had, %v", again, seq)
	}
	if err := h.Release(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	if err := oh.TryAcquire(ctxT(t), client.Exclusive); err != nil {
		t.Fatalf("the lock was not free after the Release: %v", err)
	}
}
