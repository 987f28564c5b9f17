package client

// Unit tests of how a shared connection gathers KeepAlives into batches.

import (
	"testing"
	"time"

	"github.com/chubby-dev/chubby/wire"
)

func waiterOf(session uint64, urgent bool) *kaWaiter {
	return &kaWaiter{entry: wire.KeepAliveEntry{Session: session, Urgent: urgent}}
}

// gatherWithin runs b.gather(g, first) and fails the test if it has not
// returned within limit: each case below must end long before its hour.
func gatherWithin(t *testing.T, b *kaBatcher, g gathering, first time.Time, limit time.Duration) []*kaWaiter {
	t.Helper()
	got := make(chan []*kaWaiter, 1)
	go func() { got <- b.gather(g, first) }()
	select {
	case q := <-got:
		return q
	case <-time.After(limit):
		t.Fatalf("the batch still gathers after %v with gathering %+v", limit, g)
		return nil
	}
}

// TestGatherEndsWhenQuiet: a batch nobody joins for quiet goes, however
// long max is; one past max goes, however recently a KeepAlive joined.
func TestGatherEndsWhenQuiet(t *testing.T) {
	var b kaBatcher
	now := time.Now()
	if !b.add(waiterOf(1, false), now) {
		t.Fatal("the first KeepAlive did not begin a batch")
	}
	if b.add(waiterOf(2, false), now) {
		t.Fatal("a second KeepAlive began a batch while one gathers")
	}
	q := gatherWithin(t, &b, gathering{quiet: 5 * time.Millisecond, max: time.Hour}, now, 10*time.Second)
	if len(q) != 2 {
		t.Fatalf("the batch carries %d KeepAlives, want 2", len(q))
	}
	if !b.add(waiterOf(3, false), time.Now()) {
		t.Fatal("a KeepAlive after the batch went did not begin the next")
	}
	// Past max: the last arrival is always fresh, yet the batch goes.
	b.last = time.Now().Add(time.Hour)
	q = gatherWithin(t, &b, gathering{quiet: time.Hour, max: 5 * time.Millisecond}, time.Now(), 10*time.Second)
	if len(q) != 1 || q[0].entry.Session != 3 {
		t.Fatalf("the second batch is %v, want session 3's KeepAlive", q)
	}
}

// TestGatherUrgentGoesAtOnce: an urgent KeepAlive, or the first after a
// reply delivered invalidations (the acknowledgement a write waits for),
// ends a batch that would otherwise gather for an hour; an ordinary one
// does not make the next batch urgent.
func TestGatherUrgentGoesAtOnce(t *testing.T) {
	hour := gathering{quiet: time.Hour, max: time.Hour}
	var b kaBatcher
	now := time.Now()
	b.add(waiterOf(1, false), now)
	b.add(waiterOf(2, true), now)
	if q := gatherWithin(t, &b, hour, now, 10*time.Second); len(q) != 2 {
		t.Fatalf("the urgent batch carries %d KeepAlives, want 2", len(q))
	}

	b.answered(&wire.KeepAliveManyReply{Sessions: []wire.KeepAliveResult{
		{Session: 7, Reply: wire.KeepAliveReply{Invalidations: []string{"/ls/local/a"}}},
		{Session: 8},
	}})
	now = time.Now()
	b.add(waiterOf(8, false), now)
	if b.urgent {
		t.Fatal("a session answered without invalidations made its batch urgent")
	}
	b.add(waiterOf(7, false), now)
	if !b.urgent {
		t.Fatal("the acknowledgement of an invalidation did not make its batch urgent")
	}
	if q := gatherWithin(t, &b, hour, now, 10*time.Second); len(q) != 2 {
		t.Fatalf("the acknowledging batch carries %d KeepAlives, want 2", len(q))
	}
	if b.add(waiterOf(7, false), time.Now()); b.urgent {
		t.Fatal("session 7's second KeepAlive after one reply was urgent again")
	}
}

// TestSplitKeepAlivesByEpochAndUrgency: a gathered batch goes as one call
// per master epoch and urgency, none over MaxKeepAliveMany sessions; the
// urgent KeepAlives of a client just back do not ride with ordinary ones,
// which the master would then answer at once too.
func TestSplitKeepAlivesByEpochAndUrgency(t *testing.T) {
	var q []*kaWaiter
	add := func(n int, epoch uint64, urgent bool) {
		for range n {
			w := waiterOf(uint64(len(q)+1), urgent)
			w.epoch = epoch
			q = append(q, w)
		}
	}
	add(3, 1, false)
	add(2, 1, true)
	add(wire.MaxKeepAliveMany+1, 2, false)
	add(1, 1, false)
	gone := waiterOf(99999, true) // its Client stopped waiting
	gone.epoch = 1
	gone.answered.Store(true)
	q = append(q, gone)
	type shape struct {
		epoch  uint64
		urgent bool
		n      int
	}
	var got []shape
	for _, c := range splitKeepAlives(q) {
		for _, w := range c.ws {
			if w.epoch != c.epoch || w.entry.Urgent != c.ws[0].entry.Urgent {
				t.Fatalf("a call for epoch %d mixes %+v", c.epoch, w.entry)
			}
		}
		got = append(got, shape{c.epoch, c.ws[0].entry.Urgent, len(c.ws)})
	}
	want := []shape{{1, false, 4}, {1, true, 2}, {2, false, wire.MaxKeepAliveMany}, {2, false, 1}}
	if len(got) != len(want) {
		t.Fatalf("calls %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("calls %+v, want %+v", got, want)
		}
	}
}
