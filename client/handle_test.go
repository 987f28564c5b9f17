package client_test

import (
	"errors"
	"testing"

	"github.com/chubby-dev/chubby/client"
	"github.com/chubby-dev/chubby/testing/cell"
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
	if first == nil || isClosed(first) {
		t.Fatal("LockLost must be open while the lock is held")
	}
	if err := h.Release(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	if !isClosed(first) {
		t.Fatal("Release did not close LockLost")
	}
	if err := h.Release(ctxT(t)); !errors.Is(err, client.ErrNotHeld) {
		t.Fatalf("second Release: %v, want ErrNotHeld", err)
	}
	if err := h.TryAcquire(ctxT(t), client.Exclusive); err != nil {
		t.Fatal(err)
	}
	second := h.LockLost()
	if second == nil || isClosed(second) || second == first {
		t.Fatal("a new acquisition must get a fresh, open LockLost")
	}
	if seq2 := mustSeq(t, h); !seq2.Newer(seq1) {
		t.Fatalf("second acquisition %s is not newer than the first %s", seq2, seq1)
	}
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}
	if !isClosed(second) {
		t.Fatal("Handle.Close did not release the lock")
	}
}
