package server_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/chubby-dev/chubby/client"
	"github.com/chubby-dev/chubby/testing/cell"
	"github.com/chubby-dev/chubby/testing/wait"
)

// The processor controller (chubbyd -procs auto) runs a server on one
// processor while its calls come one at a time, and on all of them once
// they overlap: CallLoad must count a client that waits for each answer as
// never overlapping (the call stops counting before its reply goes out), a
// call parked waiting for a lock as not running, and concurrent clients as
// overlapping.
func TestCallLoadOverlapsOnlyConcurrentCalls(t *testing.T) {
	c := cell.Start(t, cell.WithManualClock())
	holder := c.Dial(t, client.Config{})
	waiter := c.Dial(t, client.Config{})
	writer := c.Dial(t, client.Config{})
	lock := c.Path("lock")
	h := open(t, holder, lock, client.Create())
	if err := h.Acquire(ctxT(t), client.Exclusive); err != nil {
		t.Fatalf("acquire: %v", err)
	}
	// A blocking Acquire parks for as long as the test runs.
	queue(t, c, open(t, waiter, lock), ctxT(t))

	calls0, over0 := c.Server().CallLoad()
	const n = 40
	for i := range n {
		if _, err := writer.WriteFile(ctxT(t), c.Path(fmt.Sprint("serial", i%4)), []byte("x")); err != nil {
			t.Fatalf("write %d: %v", i, err)
		}
	}
	calls1, over1 := c.Server().CallLoad()
	if calls1-calls0 < n {
		t.Fatalf("%d serial writes counted as %d calls", n, calls1-calls0)
	}
	if over1 != over0 {
		t.Fatalf("one client's serial writes (with a parked Acquire): %d of %d calls counted as overlapping, want 0", over1-over0, calls1-calls0)
	}

	// Eight clients writing at once overlap.
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for w := range 8 {
		cl := c.Dial(t, client.Config{})
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 20 {
				if _, err := cl.WriteFile(ctxT(t), c.Path(fmt.Sprint("w", w)), []byte(fmt.Sprint(i))); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("concurrent write: %v", err)
	}
	calls2, over2 := c.Server().CallLoad()
	if over2 == over1 {
		t.Fatalf("8 concurrent writers: none of %d calls counted as overlapping", calls2-calls1)
	}
}

// A write's event goes to every reader at once: its sends overlap, so
// the controller runs a fan-out on every processor.
func TestCallLoadOverlapsAnEventsSends(t *testing.T) {
	c := cell.Start(t, cell.WithManualClock())
	writer := c.Dial(t, client.Config{})
	path := c.Path("config")
	if _, err := writer.WriteFile(ctxT(t), path, []byte("v0")); err != nil {
		t.Fatalf("write: %v", err)
	}
	const readers = 16
	var evs []<-chan client.Event
	for range readers {
		cl := c.Dial(t, client.Config{})
		open(t, cl, path, client.WithEvents(client.EventContentsModified))
		evs = append(evs, cl.Events())
	}
	calls0, over0 := c.Server().CallLoad()
	if _, err := writer.WriteFile(ctxT(t), path, []byte("v1")); err != nil {
		t.Fatalf("write: %v", err)
	}
	for i, ch := range evs {
		deadline := time.After(wait.Timeout)
	events:
		for {
			select {
			case ev := <-ch:
				if ev.Type == client.EventContentsModified && ev.Path == path {
					break events
				}
			case <-deadline:
				t.Fatalf("reader %d: no %s event within %v", i, client.EventContentsModified, wait.Timeout)
			}
		}
	}
	calls1, over1 := c.Server().CallLoad()
	if calls1-calls0 < readers {
		t.Fatalf("an event to %d readers counted %d sends and calls", readers, calls1-calls0)
	}
	if over1 == over0 {
		t.Fatalf("an event's %d sends: none counted as overlapping", calls1-calls0)
	}
}
