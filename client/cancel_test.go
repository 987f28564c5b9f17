package client_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/chubby-dev/chubby/client"
	"github.com/chubby-dev/chubby/testing/cell"
)

// TestCancelledAcquireLeavesNoHold: a blocking Acquire whose context ends
// at a random moment (0–2 ms, while its request is on the way or queued)
// never leaves the lock to its session once the holder releases: the
// client's CancelAcquire may reach the master before the Acquire it
// cancels, and the master must still cancel it (before the fix, about one
// cancel in fifty left a hold nobody knew of). 150 rounds; the
// deterministic case is server's TestCancelBeforeItsAcquireLeavesNoWait.
func TestCancelledAcquireLeavesNoHold(t *testing.T) {
	c := cell.Start(t)
	a := c.Dial(t, client.Config{LockDelay: client.NoLockDelay})
	b := c.Dial(t, client.Config{LockDelay: client.NoLockDelay})
	ha := mustOpen(t, a, c.Path("l"), client.Create())
	hb := mustOpen(t, b, c.Path("l"))
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 150 {
		if err := ha.Acquire(ctxT(t), client.Exclusive); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Duration(rng.IntN(2000))*time.Microsecond)
		err := hb.Acquire(ctx, client.Exclusive)
		cancel()
		if err == nil {
			t.Fatalf("round %d: granted while held", i)
		}
		if err := ha.Release(ctxT(t)); err != nil {
			t.Fatal(err)
		}
		if err := ha.TryAcquire(ctxT(t), client.Exclusive); errors.Is(err, client.ErrLockHeld) {
			t.Fatalf("round %d: after its Acquire was cancelled, b's session was granted the lock", i)
		} else if err != nil {
			t.Fatal(err)
		}
		if err := ha.Release(ctxT(t)); err != nil {
			t.Fatal(err)
		}
	}
}
