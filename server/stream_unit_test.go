package server

// Unit tests of stream KeepAlives (wire.KeepAliveArgs.Stream) on a manual
// clock: events go out as pushes while the KeepAlive stays parked, every
// answer of a session leaves in order, and a client that does not read
// cannot queue more than maxStreamedOut answers on the master.

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/chubby-dev/chubby/session"
	"github.com/chubby-dev/chubby/wire"
)

func streamEvent(i int) wire.Event {
	return wire.Event{Type: wire.EventContentsModified, Path: fmt.Sprintf("/ls/local/f%d", i)}
}

// TestStreamKeepAlivePushes: a parked stream KeepAlive is sent each batch
// of events as a push (More, TTL 0) and stays parked; an invalidation ends
// it with a final reply; the next one's pushes come after that reply; the
// end of the hold answers it with a lease; a KeepAlive that does not
// stream is answered with the events, as before.
func TestStreamKeepAlivePushes(t *testing.T) {
	clk := session.NewManualClock(unitStart)
	lt := newUnitLeases(t, clk, &fakeStall{})
	lt.sendOn = func(f func()) { f() } // sends in order, on the caller
	lt.add(clk.Now(), 1, unitTTL, nil, "")
	r := &replies{}

	if err := lt.keepAlive(r, 1, 1, false, 0, true); err != nil {
		t.Fatal(err)
	}
	if n := len(r.all()); n != 0 {
		t.Fatalf("a stream KeepAlive with nothing to deliver was answered %d times", n)
	}
	lt.pushEvents(1, []wire.Event{streamEvent(1)})
	lt.pushEvents(1, []wire.Event{streamEvent(2), streamEvent(3)})
	if _, _, ok := lt.invalidate(1, []string{"/ls/local/cached"}); !ok {
		t.Fatal("no lease for session 1")
	}
	// The client answers the invalidation with its next stream KeepAlive,
	// which then takes the next events.
	if err := lt.keepAlive(r, 2, 1, false, 1, true); err != nil {
		t.Fatal(err)
	}
	lt.pushEvents(1, []wire.Event{streamEvent(4)})
	clk.Advance(unitTTL / 2) // the hold ends
	lt.keepAlive(r, 3, 1, false, 1, false)
	lt.pushEvents(1, []wire.Event{streamEvent(5)})

	got := r.all()
	type ans struct {
		id     uint64
		more   bool
		events []wire.Event
		inval  []string
		lease  bool
	}
	var have []ans
	for _, g := range got {
		if g.err != nil {
			t.Fatalf("answer to %d: %v", g.id, g.err)
		}
		rep := g.body.(wire.KeepAliveReply)
		have = append(have, ans{g.id, g.more, rep.Events, rep.Invalidations, rep.TTL > 0})
	}
	want := []ans{
		{id: 1, more: true, events: []wire.Event{streamEvent(1)}},
		{id: 1, more: true, events: []wire.Event{streamEvent(2), streamEvent(3)}},
		{id: 1, inval: []string{"/ls/local/cached"}, lease: true},
		{id: 2, more: true, events: []wire.Event{streamEvent(4)}},
		{id: 2, lease: true},
		{id: 3, events: []wire.Event{streamEvent(5)}, lease: true},
	}
	if len(have) != len(want) {
		t.Fatalf("answers:\n got %+v\nwant %+v", have, want)
	}
	for i := range want {
		h, w := have[i], want[i]
		if h.id != w.id || h.more != w.more || !slices.Equal(h.events, w.events) || !slices.Equal(h.inval, w.inval) || h.lease != w.lease {
			t.Fatalf("answer %d:\n got %+v\nwant %+v", i, h, w)
		}
	}
}

// TestStreamAnswersStayInOrder: a stream KeepAlive's client sends the next
// one while the first is parked (the loop renews before the hold ends);
// however the master's workers run, the first one's final reply leaves
// before any push of the second, and every push in commit order.
func TestStreamAnswersStayInOrder(t *testing.T) {
	clk := session.NewManualClock(unitStart)
	lt := newUnitLeases(t, clk, &fakeStall{})
	lt.sendOn = func(f func()) { go f() } // sends race, as on the workers
	lt.add(clk.Now(), 1, unitTTL, nil, "")
	r := &replies{}
	const calls, perCall = 20, 10
	n := 0
	for call := uint64(1); call <= calls; call++ {
		if err := lt.keepAlive(r, call, 1, false, 0, true); err != nil {
			t.Fatal(err)
		}
		for range perCall {
			n++
			lt.pushEvents(1, []wire.Event{streamEvent(n)})
		}
	}
	clk.Advance(unitTTL / 2)
	// Done once the last call's final reply is in. (While the sends lag,
	// the out-queue may fill: events then ride on a final reply.)
	deadline := time.Now().Add(10 * time.Second)
	var got []replyRec
	for time.Now().Before(deadline) {
		got = r.all()
		if l := len(got); l > 0 && got[l-1].id == calls && !got[l-1].more {
			break
		}
		time.Sleep(time.Millisecond)
	}
	var call uint64 = 1
	next := 1
	for i, g := range got {
		if g.id != call {
			t.Fatalf("answer %d is to call %d, want %d: an answer overtook another", i, g.id, call)
		}
		for _, ev := range g.body.(wire.KeepAliveReply).Events {
			if ev != streamEvent(next) {
				t.Fatalf("answer %d: event %+v, want %+v", i, ev, streamEvent(next))
			}
			next++
		}
		if !g.more {
			call++
		}
	}
	if call != calls+1 || next != n+1 {
		t.Fatalf("%d calls answered, %d events delivered; want %d and %d", call-1, next-1, calls, n)
	}
}

// blockingReplier holds its first push until released: a client that
// does not read.
type blockingReplier struct {
	replies
	entered chan struct{}
	release chan struct{}
	first   bool
}

func (b *blockingReplier) push(id uint64, body any) {
	b.mu.Lock()
	first := !b.first
	b.first = true
	b.mu.Unlock()
	if first {
		close(b.entered)
		<-b.release
	}
	b.replies.push(id, body)
}

// TestStreamOutQueueBounded: while a session's answers are not being
// written (its client does not read), at most maxStreamedOut answers, and
// maxStreamedBytes of events (plus the last push's), wait on the master;
// later events stay in the session's bounded event queue and go with the
// KeepAlive's reply. Nothing is lost or reordered.
func TestStreamOutQueueBounded(t *testing.T) {
	for _, tc := range []struct {
		name string
		size int // contents per event
	}{{"small events", 0}, {"large events", 16 << 10}} {
		t.Run(tc.name, func(t *testing.T) {
			clk := session.NewManualClock(unitStart)
			lt := newUnitLeases(t, clk, &fakeStall{})
			lt.sendOn = func(f func()) { go f() }
			lt.add(clk.Now(), 1, unitTTL, nil, "")
			b := &blockingReplier{entered: make(chan struct{}), release: make(chan struct{})}
			if err := lt.keepAlive(b, 1, 1, false, 0, true); err != nil {
				t.Fatal(err)
			}
			event := func(i int) wire.Event {
				e := streamEvent(i)
				if tc.size > 0 {
					e.Contents = &wire.EventContents{Data: make([]byte, tc.size)}
				}
				return e
			}
			lt.pushEvents(1, []wire.Event{event(1)})
			<-b.entered // the writer is stuck on the first push
			const total = maxStreamedOut + 50
			for i := 2; i <= total; i++ {
				lt.pushEvents(1, []wire.Event{event(i)})
			}
			lt.mu.Lock()
			l := lt.m[1]
			queued, bytes, waiting := len(l.out), l.outBytes, len(l.events)
			lt.mu.Unlock()
			one := eventCost(event(1))
			if queued > maxStreamedOut || bytes > maxStreamedBytes+one || queued+waiting != total-1 {
				t.Fatalf("out-queue %d answers (%d bytes), event queue %d; want at most %d answers and %d bytes, %d in all",
					queued, bytes, waiting, maxStreamedOut, maxStreamedBytes+one, total-1)
			}
			if queued < maxStreamedOut && bytes < maxStreamedBytes {
				t.Fatalf("out-queue %d answers (%d bytes) with %d events waiting: stopped before either bound", queued, bytes, waiting)
			}
			close(b.release)
			clk.Advance(unitTTL / 2) // the hold ends: the reply takes the rest
			deadline := time.Now().Add(10 * time.Second)
			var got []replyRec
			for time.Now().Before(deadline) {
				if got = b.all(); len(got) > 0 && !got[len(got)-1].more {
					break
				}
				time.Sleep(time.Millisecond)
			}
			var evs []wire.Event
			for _, g := range got {
				evs = append(evs, g.body.(wire.KeepAliveReply).Events...)
			}
			// What one reply does not hold comes with the next KeepAlives,
			// answered at once while events wait.
			for call := uint64(2); len(evs) < total && call < 50; call++ {
				n := len(b.all())
				if err := lt.keepAlive(b, call, 1, false, 0, true); err != nil {
					t.Fatal(err)
				}
				for _, g := range b.all()[n:] {
					evs = append(evs, g.body.(wire.KeepAliveReply).Events...)
				}
			}
			if len(evs) != total {
				t.Fatalf("%d events delivered, want %d", len(evs), total)
			}
			for i, ev := range evs {
				if ev.Type != event(i+1).Type || ev.Path != event(i+1).Path {
					t.Fatalf("event %d: %+v, want %+v", i, ev, event(i+1))
				}
			}
			lt.mu.Lock()
			left := l.outBytes
			lt.mu.Unlock()
			if left != 0 {
				t.Fatalf("%d bytes still counted in the drained out-queue", left)
			}
		})
	}
}
