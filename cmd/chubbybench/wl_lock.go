package main

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/chubby-dev/chubby/client"
)

// runLock: each client Acquires and Releases a lock of its own.
func runLock(ctx context.Context, e *env) (*Result, error) {
	cs, err := e.dialWithDir(ctx, e.o.clients)
	if err != nil {
		return nil, err
	}
	hs, err := openEach(ctx, cs, func(i int) string { return e.file(fmt.Sprintf("lock-%d", i)) }, client.Create(), client.NoCache())
	if err != nil {
		return nil, err
	}
	defer closeHandles(hs)
	ws, window, intr := e.loop(ctx, len(cs), func(ctx context.Context, w *worker) error {
		h := hs[w.id]
		t0 := time.Now()
		if err := h.Acquire(ctx, client.Exclusive); err != nil {
			return err
		}
		if err := h.Release(ctx); err != nil {
			return err
		}
		w.observe(time.Since(t0))
		return nil
	})
	r := e.result(ws, window, intr)
	r.OpsMeaning = "Acquire+Release cycles"
	r.LatencyOf = "Acquire+Release cycle"
	return r, nil
}

// runContended: every client takes one lock in turn.
func runContended(ctx context.Context, e *env) (*Result, error) {
	cs, err := e.dialWithDir(ctx, e.o.clients)
	if err != nil {
		return nil, err
	}
	path := e.file("lock")
	hs, err := openEach(ctx, cs, func(int) string { return path }, client.Create(), client.NoCache())
	if err != nil {
		return nil, err
	}
	defer closeHandles(hs)

	var (
		ex      exclusion
		handoff handoffClock
		toOther atomic.Int64
	)
	ws, window, intr := e.loop(ctx, len(cs), func(ctx context.Context, w *worker) error {
		h := hs[w.id]
		if err := h.Acquire(ctx, e.o.mode); err != nil {
			return err
		}
		granted := time.Now()
		ex.enter()
		if rel, last, ok := handoff.last(); ok && e.measuring() {
			w.record(granted.Sub(rel))
			if last != w.id {
				toOther.Add(1)
			}
		}
		if e.o.hold > 0 {
			time.Sleep(e.o.hold)
		}
		ex.leave()
		handoff.releasing(w.id)
		return h.Release(ctx)
	})
	r := e.result(ws, window, intr)
	r.OpsMeaning = "hand-offs"
	r.LatencyOf = "hand-off: one holder's Release start to the next holder's Acquire return"
	r.Extras = []Figure{
		{"handoffs_per_s", r.OpsPerSec(), "hand-offs per second"},
		{"handoffs_to_other_client", toOther.Load(), "hand-offs to another client than the last holder"},
		{"max_holders", int64(ex.max.Load()), "most holders inside the critical section at once (1 unless mutual exclusion broke)"},
		{"overlaps", ex.overlaps.Load(), "acquisitions that found another holder inside (0 unless mutual exclusion broke)"},
	}
	return r, nil
}

// exclusion counts the holders inside the critical section: it sees any
// two clients holding the lock at once.
type exclusion struct {
	inside   atomic.Int32
	max      atomic.Int32
	overlaps atomic.Int64
}

func (x *exclusion) enter() {
	n := x.inside.Add(1)
	if n > 1 {
		x.overlaps.Add(1)
	}
	for {
		m := x.max.Load()
		if n <= m || x.max.CompareAndSwap(m, n) {
			return
		}
	}
}

func (x *exclusion) leave() { x.inside.Add(-1) }

// handoffClock remembers when the last holder started its Release, and
// which client it was.
type handoffClock struct {
	mu     sync.Mutex
	at     time.Time
	holder int
}

// releasing notes that client id is about to release the lock.
func (c *handoffClock) releasing(id int) {
	c.mu.Lock()
	c.at, c.holder = time.Now(), id
	c.mu.Unlock()
}

// last returns when the last Release started and by whom; ok is false
// before the first.
func (c *handoffClock) last() (at time.Time, holder int, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.at, c.holder, !c.at.IsZero()
}

// openEach opens, for each client i, the node at path(i).
func openEach(ctx context.Context, cs []*client.Client, path func(i int) string, opts ...client.OpenOption) ([]*client.Handle, error) {
	hs := make([]*client.Handle, len(cs))
	for i, c := range cs {
		h, err := c.Open(ctx, path(i), opts...)
		if err != nil {
			closeHandles(hs)
			return nil, err
		}
		hs[i] = h
	}
	return hs, nil
}

// closeHandles closes every handle (releasing a lock one still holds).
func closeHandles(hs []*client.Handle) {
	for _, h := range hs {
		if h != nil {
			h.Close()
		}
	}
}
