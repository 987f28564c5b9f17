package client_test

// Tests of the calls the recipes (client/election, client/assign) are built
// on: Subscribe, LockContext, and the creating Open's InitialContents and
// CreateFenced.

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/chubby-dev/chubby/client"
	"github.com/chubby-dev/chubby/testing/cell"
	"github.com/chubby-dev/chubby/testing/wait"
)

// TestSubscribeSeesEveryEventBesideEvents: a subscriber sees the events of
// a watched directory in order while Events still delivers them; after
// cancel it sees nothing more.
func TestSubscribeSeesEveryEventBesideEvents(t *testing.T) {
	c := cell.Start(t)
	cl := c.Dial(t, client.Config{})
	d := c.Path("d")
	mustOpen(t, cl, d, client.CreateDir(), client.WithEvents(client.EventChildAdded, client.EventChildRemoved))
	var mu sync.Mutex
	var got []ev
	woke := make(chan struct{}, 1)
	cancel := cl.Subscribe(func(e client.Event) {
		mu.Lock()
		got = append(got, ev{e.Type, e.Path})
		mu.Unlock()
		select {
		case woke <- struct{}{}:
		default:
		}
	})
	h := mustOpen(t, cl, c.Path("d", "f"), client.Create())
	if err := h.Delete(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	want := []ev{{client.EventChildAdded, c.Path("d", "f")}, {client.EventChildRemoved, c.Path("d", "f")}}
	expectEvents(t, cl, "Events beside a subscriber", want...)
	wait.For(t, wait.Timeout, "the subscriber to see both events", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(got) >= 2
	})
	mu.Lock()
	if len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("subscriber saw %v, want %v", got, want)
	}
	mu.Unlock()
	cancel()
	mustOpen(t, cl, c.Path("d", "g"), client.Create())
	expectEvents(t, cl, "after cancel", ev{client.EventChildAdded, c.Path("d", "g")})
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 2 {
		t.Fatalf("a cancelled subscriber saw %v", got[2:])
	}
}

// TestLockContextDoneWhenLost: LockContext is done, with a *LockLostError
// cause, once the lock is released; without a lock it is done at once.
func TestLockContextDoneWhenLost(t *testing.T) {
	c := cell.Start(t)
	cl := c.Dial(t, client.Config{})
	h := mustOpen(t, cl, c.Path("l"), client.Create())
	if ctx := h.LockContext(); ctx.Err() == nil || !errors.Is(context.Cause(ctx), client.ErrNotHeld) {
		t.Fatalf("LockContext without a lock: err %v cause %v", ctx.Err(), context.Cause(ctx))
	}
	if err := h.Acquire(ctxT(t), client.Exclusive); err != nil {
		t.Fatal(err)
	}
	ctx := h.LockContext()
	if ctx.Err() != nil {
		t.Fatalf("LockContext of a held lock is done: %v", context.Cause(ctx))
	}
	if err := h.Release(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ctx.Done():
	case <-time.After(wait.Timeout):
		t.Fatal("LockContext not done after Release")
	}
	var lost *client.LockLostError
	if !errors.As(context.Cause(ctx), &lost) || lost.Reason != client.LostReleased {
		t.Fatalf("cause %v, want a LockLostError for release", context.Cause(ctx))
	}
}

// TestOpenCreatesWithContentsFenced: InitialContents fill a created file in
// the same write; CreateFenced lets only the current holder of the lock
// create, so a deposed holder's create fails with ErrBadSequencer and
// leaves no file.
func TestOpenCreatesWithContentsFenced(t *testing.T) {
	c := cell.Start(t)
	a := c.Dial(t, client.Config{})
	b := c.Dial(t, client.Config{})
	lk := c.Path("lock")
	ha := mustOpen(t, a, lk, client.Create())
	if err := ha.Acquire(ctxT(t), client.Exclusive, client.LockDelay(client.NoLockDelay)); err != nil {
		t.Fatal(err)
	}
	seqA, _ := ha.Sequencer()
	f := c.Path("rec")
	h, err := a.Open(ctxT(t), f, client.Ephemeral(), client.FailIfExists(), client.InitialContents([]byte("a")), client.CreateFenced(seqA))
	if err != nil {
		t.Fatal(err)
	}
	data, st, err := mustOpen(t, b, f).GetContentsAndStat(ctxT(t))
	if err != nil || string(data) != "a" || !st.Ephemeral || st.Size != 1 {
		t.Fatalf("created file reads %q %+v %v; want \"a\", ephemeral", data, st, err)
	}
	if err := h.Delete(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	if err := ha.Release(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	hb := mustOpen(t, b, lk)
	if err := hb.Acquire(ctxT(t), client.Exclusive); err != nil {
		t.Fatal(err)
	}
	_, err = a.Open(ctxT(t), f, client.Ephemeral(), client.InitialContents([]byte("stale")), client.CreateFenced(seqA))
	if !errors.Is(err, client.ErrBadSequencer) {
		t.Fatalf("create fenced by a released sequencer: %v, want ErrBadSequencer", err)
	}
	if _, err := b.Open(ctxT(t), f); !errors.Is(err, client.ErrNoSuchNode) {
		t.Fatalf("after a refused fenced create the file is there: %v", err)
	}
	if _, err := a.Open(ctxT(t), f, client.InitialContents([]byte("x"))); !errors.Is(err, client.ErrBadRequest) {
		t.Fatalf("InitialContents on an Open that does not create: %v, want ErrBadRequest", err)
	}
	big := make([]byte, 256<<10+1)
	if _, err := a.Open(ctxT(t), c.Path("big"), client.Create(), client.InitialContents(big)); !errors.Is(err, client.ErrTooLarge) {
		t.Fatalf("oversize initial contents: %v, want ErrTooLarge", err)
	}
}

// TestNoCacheCostsLockChangesNothing: a node opened with NoCache is not
// cached, so another session's lock grant on it sends this session no
// invalidation; opened the usual way, it does. IsDir tells a directory.
func TestNoCacheCostsLockChangesNothing(t *testing.T) {
	c := cell.Start(t)
	a := c.Dial(t, client.Config{})
	b := c.Dial(t, client.Config{})
	cached, uncached := c.Path("cached"), c.Path("uncached")
	mustOpen(t, b, cached, client.CreateDir())
	mustOpen(t, b, uncached, client.CreateDir())
	if h := mustOpen(t, a, uncached, client.NoCache()); !h.IsDir() {
		t.Fatal("IsDir false for a directory")
	}
	mustOpen(t, a, cached)
	lockOnce := func(p string) {
		h := mustOpen(t, b, p)
		if err := h.Acquire(ctxT(t), client.Exclusive); err != nil {
			t.Fatal(err)
		}
		if err := h.Release(ctxT(t)); err != nil {
			t.Fatal(err)
		}
	}
	before := a.CacheStats().Invalidations
	lockOnce(uncached)
	if n := a.CacheStats().Invalidations - before; n != 0 {
		t.Fatalf("a lock grant on a node opened NoCache sent %d invalidations", n)
	}
	lockOnce(cached)
	wait.For(t, 0, "the cached node's invalidation", func() bool { return a.CacheStats().Invalidations > before })
}
