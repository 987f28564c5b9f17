package server_test

// Tests of event fills on the master (issue 13; server/fill.go): a
// contents_modified event carries the committed contents and stat to a
// watcher that asked for them (wire.EvContents) and may cache them, and
// from then on that session counts as a cacher of the node, invalidated
// before the next write commits (DESIGN invariant 5). The watchers are raw
// wire sessions, so the test sees exactly what the master sends.

import (
	"bytes"
	"slices"
	"testing"
	"time"

	"github.com/chubby-dev/chubby/client"
	"github.com/chubby-dev/chubby/testing/cell"
	"github.com/chubby-dev/chubby/wire"
)

// rawWatch opens path on a raw session subscribed to contents_modified,
// with contents if withContents. The Open itself does not ask to cache.
func rawWatch(t *testing.T, r *cell.RawConn, path string, withContents bool) {
	t.Helper()
	ev := wire.EvContentsModified
	if withContents {
		ev |= wire.EvContents
	}
	var rep wire.StatReply
	rawCall(t, r, wire.MOpen, wire.OpenArgs{Path: path, Events: ev}, &rep)
}

// rawSession follows a raw session's KeepAlives: it acknowledges every
// invalidation it is sent and keeps what it received.
type rawSession struct {
	r      *cell.RawConn
	ack    uint64
	invals []string
	events []wire.Event
	poll   uint64 // a parked KeepAlive
}

func newRawFollower(t *testing.T, r *cell.RawConn) *rawSession {
	return &rawSession{r: r, poll: parkKeepAlive(t, r)}
}

// next waits for the parked KeepAlive's reply, records it and parks the
// next one, acknowledging what the reply invalidated.
func (s *rawSession) next(t *testing.T) wire.KeepAliveReply {
	t.Helper()
	rep := keepAliveReply(t, s.r, s.poll, "a watcher's KeepAlive")
	s.invals = append(s.invals, rep.Invalidations...)
	s.events = append(s.events, rep.Events...)
	s.ack = rep.InvalSeq
	id, err := s.r.Go(wire.MKeepAlive, wire.KeepAliveArgs{AckInval: s.ack})
	if err != nil {
		t.Fatal(err)
	}
	s.poll = id
	return rep
}

// event follows the session until a contents_modified event of path
// arrives, and returns it.
func (s *rawSession) event(t *testing.T, path string) wire.Event {
	t.Helper()
	deadline := time.Now().Add(cell.RawTimeout)
	for time.Now().Before(deadline) {
		for i, ev := range s.events {
			if ev.Type == wire.EventContentsModified && ev.Path == path {
				s.events = slices.Delete(s.events, i, i+1)
				return ev
			}
		}
		s.next(t)
	}
	t.Fatalf("no contents_modified event of %s", path)
	return wire.Event{}
}

// TestEventCarriesContentsToCachingWatcher: of three sessions watching a
// file, the one that asked for contents gets the committed contents and
// stat on its event; the one that did not gets the plain event. A file
// over the fill limit reaches even the first as a plain event.
func TestEventCarriesContentsToCachingWatcher(t *testing.T) {
	c := cell.Start(t)
	w := c.Dial(t, client.Config{})
	small, big := c.Path("small"), c.Path("big")
	for _, p := range []string{small, big} {
		if _, err := w.WriteFile(ctxT(t), p, []byte("v1")); err != nil {
			t.Fatal(err)
		}
	}
	filler, plain := c.NewRawSession(t, 0), c.NewRawSession(t, 0)
	rawWatch(t, filler, small, true)
	rawWatch(t, filler, big, true)
	rawWatch(t, plain, small, false)
	fs, ps := newRawFollower(t, filler), newRawFollower(t, plain)

	st, err := w.WriteFile(ctxT(t), small, []byte("v2"))
	if err != nil {
		t.Fatal(err)
	}
	ev := fs.event(t, small)
	if ev.Contents == nil {
		t.Fatalf("the caching watcher's event %+v carries no contents", ev)
	}
	if string(ev.Contents.Data) != "v2" || ev.Contents.Stat != st {
		t.Fatalf("event contents %q %+v, want v2 and the write's stat %+v", ev.Contents.Data, ev.Contents.Stat, st)
	}
	if ev := ps.event(t, small); ev.Contents != nil {
		t.Fatalf("a watcher that did not ask for contents got %q", ev.Contents.Data)
	}

	large := bytes.Repeat([]byte("x"), 16<<10+1)
	if _, err := w.WriteFile(ctxT(t), big, large); err != nil {
		t.Fatal(err)
	}
	if ev := fs.event(t, big); ev.Contents != nil {
		t.Fatalf("an event of a %d-byte file carries its contents", len(large))
	}
	exact := bytes.Repeat([]byte("y"), 16<<10)
	if _, err := w.WriteFile(ctxT(t), big, exact); err != nil {
		t.Fatal(err)
	}
	if ev := fs.event(t, big); ev.Contents == nil || !bytes.Equal(ev.Contents.Data, exact) {
		t.Fatalf("an event of a file at the limit (%d bytes) carries no (or other) contents", len(exact))
	}
}

// TestFilledWatcherIsInvalidatedByNextWrite: a session that got contents
// with an event counts as a cacher of the node from then on, though it
// never read it: the next write sends it an invalidation (numbered above
// the fill) and does not return before the session acknowledged it — also
// when that session is the writer itself (a fill of an earlier write may
// still be on its way to it and land after its own write returned).
func TestFilledWatcherIsInvalidatedByNextWrite(t *testing.T) {
	c := cell.Start(t)
	w := c.Dial(t, client.Config{})
	f := c.Path("f")
	if _, err := w.WriteFile(ctxT(t), f, []byte("v1")); err != nil {
		t.Fatal(err)
	}
	r := c.NewRawSession(t, 0)
	rawWatch(t, r, f, true)
	s := newRawFollower(t, r)

	if _, err := w.WriteFile(ctxT(t), f, []byte("v2")); err != nil { // r caches nothing yet: no wait
		t.Fatal(err)
	}
	ev := s.event(t, f)
	if ev.Contents == nil {
		t.Fatal("no contents on the event")
	}
	if slices.Contains(s.invals, f) {
		t.Fatalf("the session was invalidated before it cached anything: %v", s.invals)
	}

	done := asyncWrite(w, f, "v3")
	rep := s.next(t) // the invalidation answers the parked poll
	for deadline := time.Now().Add(cell.RawTimeout); !slices.Contains(rep.Invalidations, f); rep = s.next(t) {
		if time.Now().After(deadline) {
			t.Fatal("the next write did not invalidate the filled session")
		}
	}
	if rep.InvalSeq <= ev.Contents.InvalSeq {
		t.Fatalf("invalidation numbered %d, not above the fill's %d", rep.InvalSeq, ev.Contents.InvalSeq)
	}
	wantReturned(t, done, "the write after the filled session acknowledged (its next KeepAlive, parked by next)")
	ev = s.event(t, f)
	if ev.Contents == nil || string(ev.Contents.Data) != "v3" {
		t.Fatalf("the second event: %+v", ev)
	}

	// The filled session writes the file itself: it is invalidated too,
	// and its write waits for that acknowledgement.
	wid, err := r.Go(wire.MSetContents, wire.SetContentsArgs{Path: f, Data: []byte("v4")})
	if err != nil {
		t.Fatal(err)
	}
	// The raw connection answers in any order; follow KeepAlives until the
	// invalidation is seen (the write's reply is stashed meanwhile).
	s.invals = nil
	for deadline := time.Now().Add(cell.RawTimeout); !slices.Contains(s.invals, f); s.next(t) {
		if time.Now().After(deadline) {
			t.Fatal("the filled session's own write did not invalidate it")
		}
	}
	var st wire.StatReply
	if err := r.Result(wid, &st); err != nil {
		t.Fatalf("the filled session's own write: %v", err)
	}
}
