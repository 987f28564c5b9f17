package client_test

// Tests of events (Chubby §2.5 "Events"): each type is produced by the
// action that causes it, delivered on KeepAlive replies after the change
// committed, in commit order, filtered by the handle's event mask; a
// consumer that never reads never stalls the session; master failover is
// reported before the events that follow it.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/chubby-dev/chubby/client"
	"github.com/chubby-dev/chubby/testing/cell"
	"github.com/chubby-dev/chubby/testing/wait"
	"github.com/chubby-dev/chubby/wire"
)

// ev is an expected event.
type ev struct {
	typ  client.EventType
	path string
}

func (e ev) String() string { return fmt.Sprintf("%s %s", e.typ, e.path) }

// expectEvents reads the next len(want) events and fails unless they are
// want, in order.
func expectEvents(t *testing.T, cl *client.Client, what string, want ...ev) {
	t.Helper()
	var got []ev
	for len(got) < len(want) {
		select {
		case e := <-cl.Events():
			got = append(got, ev{e.Type, e.Path})
		case <-time.After(wait.Timeout):
			t.Fatalf("%s: events %v, then nothing for %v; want %v", what, got, wait.Timeout, want)
		}
	}
	if !slices.Equal(got, want) {
		t.Fatalf("%s: events %v, want %v", what, got, want)
	}
}

// noEvents checks that nothing more arrives for d.
func noEvents(t *testing.T, cl *client.Client, d time.Duration, what string) {
	t.Helper()
	select {
	case e := <-cl.Events():
		t.Fatalf("%s: unexpected event %s %s", what, e.Type, e.Path)
	case <-time.After(d):
	}
}

// TestEachEventFromItsCause opens a file and its directory with every event
// type subscribed and makes the changes that cause each handle event, one at
// a time: each change produces exactly its events, in commit order (those of
// the file before those of its directory for one change).
func TestEachEventFromItsCause(t *testing.T) {
	c := cell.Start(t)
	w := c.Dial(t, client.Config{})
	b := c.Dial(t, client.Config{})
	other := c.Dial(t, client.Config{})
	d, f, g := c.Path("d"), c.Path("d", "f"), c.Path("d", "g")
	mustOpen(t, b, d, client.CreateDir())
	if _, err := b.WriteFile(ctxT(t), f, []byte("v0")); err != nil {
		t.Fatal(err)
	}
	mustOpen(t, w, d, client.WithEvents())
	mustOpen(t, w, f, client.WithEvents())
	noEvents(t, w, 50*time.Millisecond, "after opening")

	hb := mustOpen(t, b, f)
	if _, err := hb.SetContents(ctxT(t), []byte("v1")); err != nil {
		t.Fatal(err)
	}
	expectEvents(t, w, "write the file", ev{client.EventContentsModified, f}, ev{client.EventChildModified, f})

	if _, err := b.WriteFile(ctxT(t), g, nil); err != nil {
		t.Fatal(err)
	}
	expectEvents(t, w, "create a child", ev{client.EventChildAdded, g})

	if err := hb.TryAcquire(ctxT(t), client.Exclusive); err != nil {
		t.Fatal(err)
	}
	expectEvents(t, w, "another session takes the lock", ev{client.EventLockAcquired, f})

	ho := mustOpen(t, other, f)
	if err := ho.TryAcquire(ctxT(t), client.Exclusive); !errors.Is(err, client.ErrLockHeld) {
		t.Fatalf("TryAcquire of a held lock: %v, want ErrLockHeld", err)
	}
	expectEvents(t, w, "a third session asks for the held lock", ev{client.EventConflictingLock, f})

	if err := hb.Release(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	noEvents(t, w, 50*time.Millisecond, "release")
	if err := hb.Delete(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	expectEvents(t, w, "delete the file", ev{client.EventHandleInvalid, f}, ev{client.EventChildRemoved, f})

	// The deleted file's subscription is gone: re-creating it is a
	// child_added for the directory only.
	if _, err := b.WriteFile(ctxT(t), f, []byte("again")); err != nil {
		t.Fatal(err)
	}
	expectEvents(t, w, "re-create the file", ev{client.EventChildAdded, f})
	if _, err := b.WriteFile(ctxT(t), f, []byte("again2")); err != nil {
		t.Fatal(err)
	}
	expectEvents(t, w, "write the re-created file", ev{client.EventChildModified, f})
	noEvents(t, w, 50*time.Millisecond, "at the end")
}

// TestEventsInCommitOrder: concurrent writers change several children of a
// watched directory; the events arrive in the order the writes committed
// (the order of the content generations the writes returned). The mask
// subscribes child_modified only: the creations are not delivered.
func TestEventsInCommitOrder(t *testing.T) {
	c := cell.Start(t)
	w := c.Dial(t, client.Config{EventBuffer: 1024})
	d := c.Path("d")
	mustOpen(t, w, d, client.CreateDir())
	const writers, each = 4, 25
	clients := make([]*client.Client, writers)
	for i := range clients {
		clients[i] = c.Dial(t, client.Config{})
		if _, err := clients[i].WriteFile(ctxT(t), c.Path("d", fmt.Sprint("c", i)), nil); err != nil {
			t.Fatal(err)
		}
	}
	mustOpen(t, w, d, client.WithEvents(client.EventChildModified))

	type commit struct {
		gen  uint64
		path string
	}
	var (
		mu      sync.Mutex
		commits []commit
		wg      sync.WaitGroup
	)
	for i, cl := range clients {
		wg.Add(1)
		go func(i int, cl *client.Client) {
			defer wg.Done()
			p := c.Path("d", fmt.Sprint("c", i))
			for j := 0; j < each; j++ {
				st, err := cl.WriteFile(context.Background(), p, []byte(fmt.Sprint(j)))
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				commits = append(commits, commit{st.ContentGen, p})
				mu.Unlock()
			}
		}(i, cl)
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	sort.Slice(commits, func(i, j int) bool { return commits[i].gen < commits[j].gen })
	want := make([]ev, len(commits))
	for i, cm := range commits {
		want[i] = ev{client.EventChildModified, cm.path}
	}
	expectEvents(t, w, "concurrent writes", want...)
	noEvents(t, w, 50*time.Millisecond, "after the writes")
}

// TestSlowConsumerNeverBlocksSession: a program that subscribed to events
// and never reads them (buffer of one) while many events are produced keeps
// its session: the lease is renewed throughout (the TTL is short, and the
// run is several TTLs long), calls succeed, and the dropped events are
// counted.
func TestSlowConsumerNeverBlocksSession(t *testing.T) {
	const ttl = time.Second
	c := cell.Start(t)
	slow := c.Dial(t, client.Config{SessionTTL: ttl, EventBuffer: 1})
	b := c.Dial(t, client.Config{})
	d := c.Path("d")
	mustOpen(t, b, d, client.CreateDir())
	mustOpen(t, slow, d, client.WithEvents())
	start := time.Now()
	writes := 0
	for time.Since(start) < 2*ttl+ttl/2 {
		if _, err := b.WriteFile(ctxT(t), c.Path("d", fmt.Sprint("f", writes%10)), []byte(fmt.Sprint(writes))); err != nil {
			t.Fatal(err)
		}
		writes++
		if writes%20 == 0 {
			if st := slow.State(); st != client.SessionSafe {
				t.Fatalf("the slow consumer's session is %v after %v", st, time.Since(start).Round(time.Millisecond))
			}
		}
	}
	wait.For(t, 0, "dropped events to be counted", func() bool { return slow.DroppedEvents() > 0 })
	info := slow.Session()
	if info.State != client.SessionSafe || info.LeaseLeft <= 0 {
		t.Fatalf("after %d writes in %v: session %+v, want safe with lease left", writes, time.Since(start).Round(time.Millisecond), info)
	}
	if _, err := slow.WriteFile(ctxT(t), c.Path("d", "mine"), []byte("still here")); err != nil {
		t.Fatalf("a call by the slow consumer: %v", err)
	}
	t.Logf("%d writes, %d events dropped", writes, slow.DroppedEvents())
}

// TestFailoverEventBeforeLaterEvents: after a master failover the client
// reports master_failover, re-subscribes its handles on the new master, and
// the events of later changes follow it.
func TestFailoverEventBeforeLaterEvents(t *testing.T) {
	c := cell.Start(t)
	p := c.NewProxy(t)
	w := c.Dial(t, client.Config{Servers: []string{p.Addr()}, FixedServers: true})
	b := c.Dial(t, client.Config{})
	f := c.Path("f")
	if _, err := b.WriteFile(ctxT(t), f, []byte("v0")); err != nil {
		t.Fatal(err)
	}
	mustOpen(t, w, f, client.WithEvents(client.EventContentsModified))
	opens := p.Count(wire.MOpen)
	if _, err := b.WriteFile(ctxT(t), f, []byte("v1")); err != nil {
		t.Fatal(err)
	}
	expectEvents(t, w, "before the failover", ev{client.EventContentsModified, f})

	c.Restart(t)
	expectEvents(t, w, "the failover", ev{client.EventMasterFailover, ""})
	wait.For(t, 0, "the client to re-subscribe on the new master", func() bool { return p.Count(wire.MOpen) > opens })
	if _, err := b.WriteFile(ctxT(t), f, []byte("v2")); err != nil {
		t.Fatal(err)
	}
	expectEvents(t, w, "after the failover", ev{client.EventContentsModified, f})
	noEvents(t, w, 50*time.Millisecond, "at the end")
}

// TestJeopardyEventsInterleave: a watching, caching client cut off from the
// master reports jeopardy when its local lease ends; a write of the file it
// caches meanwhile waits for it (its lease on the master has not ended); once
// it reconnects it processes the invalidation, reports safe, acknowledges,
// and then receives the write's contents_modified: session and handle
// events in the order things happened.
func TestJeopardyEventsInterleave(t *testing.T) {
	r := newRig(t, client.Config{SessionTTL: 12 * time.Second})
	f := r.c.Path("f")
	if _, err := r.cl.WriteFile(ctxT(t), f, []byte("v1")); err != nil {
		t.Fatal(err)
	}
	h := mustOpen(t, r.cl, f, client.WithEvents(client.EventContentsModified))
	read(t, h)
	b := r.c.Dial(t, client.Config{})

	r.p.Break()
	r.cc.Advance(r.leaseEnd().Sub(r.cc.Now()))
	expectEvents(t, r.cl, "the local lease ended", ev{client.EventJeopardy, ""})
	done := make(chan error, 1)
	go func() {
		_, err := b.WriteFile(context.Background(), f, []byte("v2"))
		done <- err
	}()
	wait.Never(t, 100*time.Millisecond, "the write returning while the cut-off cacher's lease on the master runs", func() bool { return len(done) > 0 })
	r.reconnect(t, func() bool { return r.cl.State() == client.SessionSafe })
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(wait.Timeout):
		t.Fatal("the write did not return after the cacher reconnected")
	}
	expectEvents(t, r.cl, "reconnected", ev{client.EventSafe, ""}, ev{client.EventContentsModified, f})
	if v := read(t, h); v != "v2" {
		t.Fatalf("read after reconnecting: %q, want v2", v)
	}
}
