package server_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/chubby-dev/chubby/client"
	"github.com/chubby-dev/chubby/server"
	"github.com/chubby-dev/chubby/testing/cell"
	"github.com/chubby-dev/chubby/testing/wait"
	"github.com/chubby-dev/chubby/wire"
)

// streamAnswer reads the raw connection's next answer, which must be to
// KeepAlive call id, a push if more.
func streamAnswer(t *testing.T, r *cell.RawConn, id uint64, more bool, what string) wire.KeepAliveReply {
	t.Helper()
	resp, err := r.ReadResponse(cell.RawTimeout)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	if resp.ID != id || resp.More != more {
		t.Fatalf("%s: an answer to call %d (more %v), want call %d (more %v)", what, resp.ID, resp.More, id, more)
	}
	var rep wire.KeepAliveReply
	if err := cell.DecodeResult(resp, &rep); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	if more && rep.TTL != 0 {
		t.Fatalf("%s: a push grants a lease (TTL %d)", what, rep.TTL)
	}
	if !more && rep.TTL <= 0 {
		t.Fatalf("%s: a final answer without a lease", what)
	}
	return rep
}

// TestStreamKeepAliveOnTheWire: a session's stream KeepAlive takes each
// write's event as a push (wire.Response.More) and stays parked: five
// writes, one KeepAlive, where each event used to end the call and need
// another. An event with contents makes the session a cacher of the file,
// so the next write ends the KeepAlive with its invalidation (a write
// waits for the acknowledgement, which only a new KeepAlive carries), and
// that write's event is pushed on the KeepAlive that acknowledged it.
func TestStreamKeepAliveOnTheWire(t *testing.T) {
	c := cell.Start(t)
	w := c.Dial(t, client.Config{})
	plain, filled := c.Path("plain"), c.Path("filled")
	for _, p := range []string{plain, filled} {
		if _, err := w.WriteFile(ctxT(t), p, []byte("v0")); err != nil {
			t.Fatal(err)
		}
	}
	r := c.NewRawSession(t, 0)
	rawWatch(t, r, plain, false)
	rawWatch(t, r, filled, true)
	id, err := r.Go(wire.MKeepAlive, wire.KeepAliveArgs{Stream: true})
	if err != nil {
		t.Fatal(err)
	}
	waitParked(t, c, 2, "the writer's KeepAlive and the stream")

	for i := range 5 {
		if _, err := w.WriteFile(ctxT(t), plain, []byte{byte('a' + i)}); err != nil {
			t.Fatal(err)
		}
		rep := streamAnswer(t, r, id, true, "a write's event")
		if len(rep.Events) != 1 || rep.Events[0].Type != wire.EventContentsModified || rep.Events[0].Path != plain || rep.Events[0].Contents != nil {
			t.Fatalf("push %d: %+v, want one plain contents_modified of %s", i, rep.Events, plain)
		}
	}
	if n := server.ParkedKeepAlives(c.Server()); n != 2 {
		t.Fatalf("%d KeepAlives parked after the pushes, want the same 2", n)
	}

	if _, err := w.WriteFile(ctxT(t), filled, []byte("f1")); err != nil {
		t.Fatal(err)
	}
	rep := streamAnswer(t, r, id, true, "the filled file's event")
	if len(rep.Events) != 1 || rep.Events[0].Contents == nil || string(rep.Events[0].Contents.Data) != "f1" {
		t.Fatalf("push: %+v, want the event of %s with contents f1", rep.Events, filled)
	}
	done := asyncWrite(w, filled, "f2")
	rep = streamAnswer(t, r, id, false, "the next write's invalidation")
	if !slices.Contains(rep.Invalidations, filled) {
		t.Fatalf("final answer: invalidations %v, want %s", rep.Invalidations, filled)
	}
	if returned(done) {
		t.Fatal("the write returned before its invalidation was acknowledged")
	}
	id2, err := r.Go(wire.MKeepAlive, wire.KeepAliveArgs{Stream: true, AckInval: rep.InvalSeq})
	if err != nil {
		t.Fatal(err)
	}
	wantReturned(t, done, "the write after the acknowledgement")
	rep = streamAnswer(t, r, id2, true, "the acknowledged write's event")
	if len(rep.Events) != 1 || rep.Events[0].Contents == nil || string(rep.Events[0].Contents.Data) != "f2" {
		t.Fatalf("push: %+v, want the event of %s with contents f2", rep.Events, filled)
	}
}

// TestClientWatcherRenewsOncePerWrite: a client.Client watching a file it
// caches hears of each write with the new contents (a push on its parked
// KeepAlive) and sends one KeepAlive per write — the acknowledgement of
// the invalidation the write needs — where an event that ended its
// KeepAlive cost a second one to park again.
func TestClientWatcherRenewsOncePerWrite(t *testing.T) {
	c := cell.Start(t)
	writer := c.Dial(t, client.Config{})
	f := c.Path("config")
	if _, err := writer.WriteFile(ctxT(t), f, []byte("v0")); err != nil {
		t.Fatal(err)
	}
	watcher := c.Dial(t, client.Config{})
	h, err := watcher.Open(ctxT(t), f, client.WithEvents(client.EventContentsModified))
	if err != nil {
		t.Fatal(err)
	}
	waitParked(t, c, 2, "both clients")
	const writes = 20
	before := server.KeepAlivesReceived(c.Server())
	for i := 1; i <= writes; i++ {
		want := fmt.Sprint("v", i)
		if _, err := writer.WriteFile(ctxT(t), f, []byte(want)); err != nil {
			t.Fatal(err)
		}
		select {
		case ev := <-watcher.Events():
			if ev.Type != client.EventContentsModified || ev.Path != f {
				t.Fatalf("write %d: event %+v", i, ev)
			}
		case <-time.After(wait.Timeout):
			t.Fatalf("write %d: no event", i)
		}
		data, _, err := h.GetContentsAndStat(ctxT(t))
		if err != nil || string(data) != want {
			t.Fatalf("write %d: the watcher reads %q, %v; want %q", i, data, err, want)
		}
	}
	waitParked(t, c, 2, "both clients after the writes")
	got := server.KeepAlivesReceived(c.Server()) - before
	if got > writes+writes/4 {
		t.Fatalf("%v KeepAlives for %d writes, want about one per write", got, writes)
	}
	t.Logf("%v KeepAlives for %d writes", got, writes)
}
