package client_test

import (
	"testing"
	"time"

	"github.com/chubby-dev/chubby/client"
)

// TestReacquireAfterJeopardyRenewsLockContext: a session that came back
// from jeopardy still holds its lock on the master; Acquire through the
// same handle gets the same hold back (same sequencer), and LockContext
// and LockLost follow it again instead of staying done from the jeopardy
// (what client/assign relies on to keep an item across a short outage).
func TestReacquireAfterJeopardyRenewsLockContext(t *testing.T) {
	r := newRig(t, client.Config{SessionTTL: 12 * time.Second, LockDelay: client.NoLockDelay})
	h := r.holdLock(t, "lock")
	seq, _ := h.Sequencer()
	lost := h.LockContext()

	r.p.Break()
	r.cc.Advance(r.leaseEnd().Sub(r.cc.Now()))
	recv(t, lost.Done(), "the lock-lost signal at jeopardy")
	r.reconnect(t, func() bool { return r.cl.State() == client.SessionSafe })

	if err := h.Acquire(ctxT(t), client.Exclusive); err != nil {
		t.Fatal(err)
	}
	again, err := h.Sequencer()
	if err != nil || again != seq {
		t.Fatalf("re-acquire after jeopardy: sequencer %v (%v), want the same hold %v", again, err, seq)
	}
	if ctx := h.LockContext(); ctx.Err() != nil {
		t.Fatalf("LockContext of the re-acquired hold is done: %v", ctx.Err())
	}
	select {
	case <-h.LockLost():
		t.Fatal("LockLost of the re-acquired hold is closed")
	default:
	}
	if err := h.Release(ctxT(t)); err != nil {
		t.Fatal(err)
	}
}
