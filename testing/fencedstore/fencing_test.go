package fencedstore_test

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/chubby-dev/chubby/client"
	"github.com/chubby-dev/chubby/testing/cell"
	"github.com/chubby-dev/chubby/testing/fencedstore"
)

// pauseRounds runs the scenario of Chubby §2.4 and of every "two holders
// after a pause" report against etcd and Consul: a lock holder reads a
// counter from a downstream store and is then paused (here: its link to the
// cell is cut, as a stop-the-world GC would starve its KeepAlives) for
// longer than its session TTL plus its lock-delay. The cell expires its
// session and, after the lock-delay, grants the lock to a contender, which
// increments the counter. Only then does the paused holder wake and write
// its own increment, carrying its now superseded sequencer.
//
// It returns the store's final counter and how many increments the store
// acknowledged.
func pauseRounds(t *testing.T, fenced bool, rounds int) (final, acked int, staleErrs int) {
	t.Helper()
	c := cell.Start(t)
	store, err := fencedstore.Start(fenced)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	kv := fencedstore.Client{URL: store.URL()}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	contender := c.Dial(t, client.Config{})
	ch, err := contender.Open(ctx, c.Path("counter-lock"), client.Create())
	if err != nil {
		t.Fatal(err)
	}
	// The counter starts at 0, written under the lock like every write.
	if err := ch.Acquire(ctx, client.Exclusive); err != nil {
		t.Fatal(err)
	}
	first, _ := ch.Sequencer()
	if err := kv.Put("counter", "0", first); err != nil {
		t.Fatal(err)
	}
	if err := ch.Release(ctx); err != nil {
		t.Fatal(err)
	}
	for r := 0; r < rounds; r++ {
		p := c.NewProxy(t)
		holder := c.Dial(t, client.Config{Servers: []string{p.Addr()}, FixedServers: true, SessionTTL: time.Second})
		h, err := holder.Open(ctx, c.Path("counter-lock"), client.Create())
		if err != nil {
			t.Fatal(err)
		}
		if err := h.Acquire(ctx, client.Exclusive, client.LockDelay(300*time.Millisecond)); err != nil {
			t.Fatal(err)
		}
		oldSeq, _ := h.Sequencer()
		v, err := kv.Get("counter")
		if err != nil {
			t.Fatal(err)
		}

		// The holder pauses: its KeepAlives stop reaching the cell.
		p.Break()

		// The contender is granted the lock only after the holder's session
		// expired and its lock-delay ran out; it increments the counter.
		if err := ch.Acquire(ctx, client.Exclusive); err != nil {
			t.Fatal(err)
		}
		newSeq, _ := ch.Sequencer()
		if !newSeq.Newer(oldSeq) {
			t.Fatalf("round %d: new holder's sequencer %s is not newer than %s", r, newSeq, oldSeq)
		}
		v2, err := kv.Get("counter")
		if err != nil {
			t.Fatal(err)
		}
		n2, _ := strconv.Atoi(v2)
		if err := kv.Put("counter", strconv.Itoa(n2+1), newSeq); err != nil {
			t.Fatalf("round %d: the current holder's write was refused: %v", r, err)
		}
		acked++
		if err := ch.Release(ctx); err != nil {
			t.Fatal(err)
		}

		// The paused holder wakes, unaware, and writes what it computed
		// before the pause.
		n, _ := strconv.Atoi(v)
		switch err := kv.Put("counter", strconv.Itoa(n+1), oldSeq); {
		case err == nil:
			acked++
		case errors.Is(err, fencedstore.ErrStale):
			staleErrs++
		default:
			t.Fatal(err)
		}
		p.Heal()
		holder.Close()
	}
	v, err := kv.Get("counter")
	if err != nil {
		t.Fatal(err)
	}
	final, _ = strconv.Atoi(v)
	return final, acked, staleErrs
}

// TestFencingRejectsPausedHolder: with the store checking sequencers, the
// woken holder's write is refused every time and no acknowledged increment
// is lost.
func TestFencingRejectsPausedHolder(t *testing.T) {
	t.Parallel()
	const rounds = 3
	final, acked, stale := pauseRounds(t, true, rounds)
	if stale != rounds {
		t.Errorf("%d of %d stale writes were refused; every one must be", stale, rounds)
	}
	if final != acked {
		t.Errorf("counter is %d but the store acknowledged %d increments: an increment was lost", final, acked)
	}
}

// TestWithoutFencingUpdatesAreLost: the same schedule against a store that
// trusts lock holders loses the contender's increments — the hazard is real,
// and it is the sequencer that removes it.
func TestWithoutFencingUpdatesAreLost(t *testing.T) {
	t.Parallel()
	const rounds = 3
	final, acked, stale := pauseRounds(t, false, rounds)
	if stale != 0 {
		t.Fatalf("an unfenced store refused %d writes", stale)
	}
	if final >= acked {
		t.Errorf("counter is %d after %d acknowledged increments: expected lost updates without fencing", final, acked)
	}
}
