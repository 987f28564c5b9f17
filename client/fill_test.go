package client_test

// Tests of event fills on the client (issue 13): a handle that caches and
// watches a small file gets the new contents with its contents_modified
// event, installed in the cache before the event is delivered, so the read
// a watcher makes right after the event is a cache hit with the new value.

import (
	"testing"
	"time"

	"github.com/chubby-dev/chubby/client"
	"github.com/chubby-dev/chubby/testing/cell"
	"github.com/chubby-dev/chubby/testing/wait"
)

// nextContentsEvent waits for the next contents_modified event of path.
func nextContentsEvent(t *testing.T, cl *client.Client, path string) {
	t.Helper()
	deadline := time.After(wait.Timeout)
	for {
		select {
		case e := <-cl.Events():
			if e.Type == client.EventContentsModified && e.Path == path {
				return
			}
		case <-deadline:
			t.Fatalf("no contents_modified event of %s within %v", path, wait.Timeout)
		}
	}
}

// TestReadAfterEventIsCacheHit: writes by another client reach a caching
// watcher with their event; the watcher's read right after each event is
// answered from its cache (a hit, no miss, no RPC) with the new value —
// also the first time, before the watcher ever read the file.
func TestReadAfterEventIsCacheHit(t *testing.T) {
	c := cell.Start(t)
	w, r := c.Dial(t, client.Config{}), c.Dial(t, client.Config{})
	f := c.Path("config")
	if _, err := w.WriteFile(ctxT(t), f, []byte("v0")); err != nil {
		t.Fatal(err)
	}
	h, err := r.Open(ctxT(t), f, client.WithEvents(client.EventContentsModified))
	if err != nil {
		t.Fatal(err)
	}
	for i, v := range []string{"v1", "v2", "v3"} {
		st, err := w.WriteFile(ctxT(t), f, []byte(v))
		if err != nil {
			t.Fatal(err)
		}
		nextContentsEvent(t, r, f)
		before := r.CacheStats()
		data, got, err := h.GetContentsAndStat(ctxT(t))
		if err != nil {
			t.Fatal(err)
		}
		after := r.CacheStats()
		if string(data) != v || got != st {
			t.Fatalf("write %d: read %q %+v after its event, want %q %+v", i, data, got, v, st)
		}
		if after.Hits != before.Hits+1 || after.Misses != before.Misses {
			t.Fatalf("write %d: the read after the event was not a cache hit (hits %d→%d, misses %d→%d)",
				i, before.Hits, after.Hits, before.Misses, after.Misses)
		}
		if after.Refills != uint64(i+1) {
			t.Fatalf("write %d: %d refills, want %d", i, after.Refills, i+1)
		}
	}
}

// TestNonCachingWatcherGetsNoFill: a NoCache handle, and a client with its
// cache off, get the plain event; their reads go to the master.
func TestNonCachingWatcherGetsNoFill(t *testing.T) {
	c := cell.Start(t)
	w := c.Dial(t, client.Config{})
	noCache, off := c.Dial(t, client.Config{}), c.Dial(t, client.Config{DisableCache: true})
	f := c.Path("config")
	if _, err := w.WriteFile(ctxT(t), f, []byte("v0")); err != nil {
		t.Fatal(err)
	}
	hn, err := noCache.Open(ctxT(t), f, client.WithEvents(client.EventContentsModified), client.NoCache())
	if err != nil {
		t.Fatal(err)
	}
	ho, err := off.Open(ctxT(t), f, client.WithEvents(client.EventContentsModified))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.WriteFile(ctxT(t), f, []byte("v1")); err != nil {
		t.Fatal(err)
	}
	for _, x := range []struct {
		cl *client.Client
		h  *client.Handle
	}{{noCache, hn}, {off, ho}} {
		nextContentsEvent(t, x.cl, f)
		if data, _, err := x.h.GetContentsAndStat(ctxT(t)); err != nil || string(data) != "v1" {
			t.Fatalf("read %q, %v; want v1", data, err)
		}
		if s := x.cl.CacheStats(); s.Refills != 0 || s.Hits != 0 {
			t.Fatalf("a non-caching watcher's cache: %+v", s)
		}
	}
}
