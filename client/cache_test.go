package client_test

// Tests of the client cache on a real one-server cell (Chubby §2.9
// "Caching"): reads, stats, listings and absence are answered locally while
// the local lease is valid; a write commits only after every caching session
// dropped the node, so once the write returns no cache serves the old value;
// the cache is flushed on master failover and never used after the local
// lease ran out. The reading client goes through a proxy, whose call counts
// show which reads reached the master.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/chubby-dev/chubby/client"
	"github.com/chubby-dev/chubby/testing/cell"
	"github.com/chubby-dev/chubby/testing/wait"
	"github.com/chubby-dev/chubby/wire"
)

// cacheRig is a cell, a caching reader A that reaches it through a proxy,
// and a writer B connected directly.
type cacheRig struct {
	c    *cell.Cell
	p    *cell.Proxy
	a, b *client.Client
}

func newCacheRig(t *testing.T, opts ...cell.Option) *cacheRig {
	t.Helper()
	c := cell.Start(t, opts...)
	r := &cacheRig{c: c, p: c.NewProxy(t)}
	r.a = c.Dial(t, client.Config{Servers: []string{r.p.Addr()}, FixedServers: true, EventBuffer: 64})
	r.b = c.Dial(t, client.Config{})
	return r
}

// write sets path's contents through B (creating the file if needed).
func (r *cacheRig) write(t *testing.T, path, data string) {
	t.Helper()
	if _, err := r.b.WriteFile(ctxT(t), path, []byte(data)); err != nil {
		t.Fatalf("B writes %s: %v", path, err)
	}
}

// read reads through h and returns the contents.
func read(t *testing.T, h *client.Handle) string {
	t.Helper()
	data, _, err := h.GetContentsAndStat(ctxT(t))
	if err != nil {
		t.Fatalf("read %s: %v", h.Path(), err)
	}
	return string(data)
}

func mustOpen(t *testing.T, cl *client.Client, path string, opts ...client.OpenOption) *client.Handle {
	t.Helper()
	h, err := cl.Open(ctxT(t), path, opts...)
	if err != nil {
		t.Fatalf("open %s: %v", path, err)
	}
	return h
}

// readCounted reads through A's handle and reports the value and whether
// the read reached the master (a miss) or was answered from A's cache (a
// hit), checking that the cache's counters and the proxy agree.
func (r *cacheRig) readCounted(t *testing.T, h *client.Handle) (string, bool) {
	t.Helper()
	before, calls := r.a.CacheStats(), r.p.Count(wire.MGetContents)
	v := read(t, h)
	after := r.a.CacheStats()
	hit := after.Hits == before.Hits+1
	if !hit {
		// The proxy counts a call once it has forwarded it, which may be
		// after the reply came back.
		wait.For(t, 0, "the proxy to count the GetContents call", func() bool { return r.p.Count(wire.MGetContents) > calls })
	}
	if calls2 := r.p.Count(wire.MGetContents); hit != (calls2 == calls) || calls2 > calls+1 {
		t.Fatalf("read of %s: cache hits %d→%d but GetContents calls %d→%d", h.Path(), before.Hits, after.Hits, calls, calls2)
	}
	return v, hit
}

// wantCalls waits until the proxy has counted want calls of m — it counts a
// call once it has forwarded it, which may be after the reply came back —
// and fails if it counted more.
func wantCalls(t *testing.T, p *cell.Proxy, m wire.Method, want int) {
	t.Helper()
	if !wait.Until(0, func() bool { return p.Count(m) >= want }) || p.Count(m) != want {
		t.Fatalf("%d %s calls reached the master, want %d", p.Count(m), m, want)
	}
}

// TestCachedReadIsLocal: the second read of a file is a cache hit that costs
// no call; the stat and a repeated Open of the same path are answered from
// the cache too.
func TestCachedReadIsLocal(t *testing.T) {
	r := newCacheRig(t)
	f := r.c.Path("f")
	r.write(t, f, "v1")
	opens := r.p.Count(wire.MOpen)
	h := mustOpen(t, r.a, f)
	wantCalls(t, r.p, wire.MOpen, opens+1)
	if v, hit := r.readCounted(t, h); v != "v1" || hit {
		t.Fatalf("first read: %q hit=%v, want v1 from the master", v, hit)
	}
	for i := 0; i < 3; i++ {
		if v, hit := r.readCounted(t, h); v != "v1" || !hit {
			t.Fatalf("read %d: %q hit=%v, want v1 from the cache", i+2, v, hit)
		}
	}
	wantCalls(t, r.p, wire.MGetContents, 1)
	stats := r.p.Count(wire.MGetStat)
	st, err := h.GetStat(ctxT(t))
	if err != nil || st.Size != 2 {
		t.Fatalf("GetStat: %+v %v", st, err)
	}
	h2 := mustOpen(t, r.a, f)
	if h2.Instance() != h.Instance() {
		t.Fatalf("cached Open bound instance %d, want %d", h2.Instance(), h.Instance())
	}
	if r.p.Count(wire.MGetStat) != stats || r.p.Count(wire.MOpen) != opens+1 {
		t.Fatal("GetStat or the second Open reached the master; both should be cache hits")
	}
	if s := r.a.CacheStats(); s.Entries == 0 || s.Bytes == 0 {
		t.Fatalf("cache stats %+v: no entries", s)
	}
}

// TestWriteInvalidatesBeforeItReturns: as soon as B's write returns, A's
// next read returns the new value (never the old one) and is a miss: the
// master invalidated A's entry before committing; the read after that is a
// hit again. Plain writes and create-or-write both.
func TestWriteInvalidatesBeforeItReturns(t *testing.T) {
	r := newCacheRig(t)
	f := r.c.Path("f")
	r.write(t, f, "v0")
	h := mustOpen(t, r.a, f)
	hb := mustOpen(t, r.b, f)
	read(t, h)
	for i := 1; i <= 20; i++ {
		want := fmt.Sprintf("v%d", i)
		inval := r.a.CacheStats().Invalidations
		if i%2 == 0 {
			r.write(t, f, want)
		} else if _, err := hb.SetContents(ctxT(t), []byte(want)); err != nil {
			t.Fatal(err)
		}
		if got := r.a.CacheStats().Invalidations; got <= inval {
			t.Fatalf("write %d returned before A processed an invalidation (%d→%d)", i, inval, got)
		}
		if v, hit := r.readCounted(t, h); v != want || hit {
			t.Fatalf("read after write %d: %q hit=%v, want %q from the master", i, v, hit, want)
		}
		if v, hit := r.readCounted(t, h); v != want || !hit {
			t.Fatalf("second read after write %d: %q hit=%v, want %q from the cache", i, v, hit, want)
		}
	}
}

// TestAbsenceIsCached: opening a missing path twice costs one call (the
// second is answered by a negative entry); once B creates it, A's Open
// succeeds, and a deletion is seen the same way.
func TestAbsenceIsCached(t *testing.T) {
	r := newCacheRig(t)
	f := r.c.Path("later")
	for i := 0; i < 3; i++ {
		if _, err := r.a.Open(ctxT(t), f); !errors.Is(err, client.ErrNoSuchNode) {
			t.Fatalf("Open %d of a missing path: %v, want ErrNoSuchNode", i, err)
		}
	}
	wantCalls(t, r.p, wire.MOpen, 1) // three Opens of a missing path
	r.write(t, f, "now here")
	h := mustOpen(t, r.a, f)
	if v := read(t, h); v != "now here" {
		t.Fatalf("read %q", v)
	}
	wantCalls(t, r.p, wire.MOpen, 2) // the negative entry was invalidated by the create
	hb := mustOpen(t, r.b, f)
	if err := hb.Delete(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	if _, err := r.a.Open(ctxT(t), f); !errors.Is(err, client.ErrNoSuchNode) {
		t.Fatalf("Open after B deleted the file: %v, want ErrNoSuchNode", err)
	}
	if _, _, err := h.GetContentsAndStat(ctxT(t)); err == nil {
		t.Fatal("read through a handle of a deleted file succeeded")
	}
}

// TestListingInvalidatedByChildChanges: a directory listing is cached, and
// dropped when a child is created or deleted.
func TestListingInvalidatedByChildChanges(t *testing.T) {
	r := newCacheRig(t)
	d := r.c.Path("dir")
	if _, err := r.b.Open(ctxT(t), d, client.CreateDir()); err != nil {
		t.Fatal(err)
	}
	r.write(t, d+"/a", "")
	hd := mustOpen(t, r.a, d)
	list := func(want ...string) {
		t.Helper()
		got, err := hd.ReadDir(ctxT(t))
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, want) {
			t.Fatalf("ReadDir %s = %v, want %v", d, got, want)
		}
	}
	list("a")
	list("a")
	wantCalls(t, r.p, wire.MReadDir, 1) // two listings
	r.write(t, d+"/b", "")              // create
	list("a", "b")
	list("a", "b")
	wantCalls(t, r.p, wire.MReadDir, 2)
	r.write(t, d+"/b", "contents") // a write of a child leaves the names alone, but may drop the listing
	list("a", "b")
	ha := mustOpen(t, r.b, d+"/a")
	if err := ha.Delete(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	list("b")
	// Listings fetched: after the first create, after the write of b (the
	// master invalidates the parent of a written file too), after the delete.
	wantCalls(t, r.p, wire.MReadDir, 4)
	list("b")
	wantCalls(t, r.p, wire.MReadDir, 4) // the listing after the delete is cached
}

// TestStatInvalidatedByLockChange: a cached stat carries the lock
// generation; another session taking the lock invalidates it.
func TestStatInvalidatedByLockChange(t *testing.T) {
	r := newCacheRig(t)
	f := r.c.Path("lockfile")
	r.write(t, f, "")
	h := mustOpen(t, r.a, f)
	st1, err := h.GetStat(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	hb := mustOpen(t, r.b, f)
	if err := hb.TryAcquire(ctxT(t), client.Exclusive); err != nil {
		t.Fatal(err)
	}
	st2, err := h.GetStat(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	if st2.LockGen <= st1.LockGen {
		t.Fatalf("stat after B took the lock has lock generation %d, was %d: served from a stale cache", st2.LockGen, st1.LockGen)
	}
}

// TestDisableCache: with DisableCache every read is a call.
func TestDisableCache(t *testing.T) {
	c := cell.Start(t)
	p := c.NewProxy(t)
	a := c.Dial(t, client.Config{Servers: []string{p.Addr()}, FixedServers: true, DisableCache: true})
	f := c.Path("f")
	if _, err := a.WriteFile(ctxT(t), f, []byte("x")); err != nil {
		t.Fatal(err)
	}
	h := mustOpen(t, a, f)
	for i := 0; i < 3; i++ {
		read(t, h)
	}
	wantCalls(t, p, wire.MGetContents, 3) // 3 reads with the cache off
	if s := a.CacheStats(); s.Hits != 0 || s.Entries != 0 {
		t.Fatalf("cache stats %+v with the cache off", s)
	}
}

// TestClosedClientServesNothing: after Close, calls fail with ErrClosed even
// for what is cached.
func TestClosedClientServesNothing(t *testing.T) {
	r := newCacheRig(t)
	f := r.c.Path("f")
	r.write(t, f, "v")
	h := mustOpen(t, r.a, f)
	read(t, h)
	read(t, h)
	if err := r.a.Close(); err != nil {
		t.Fatal(err)
	}
	if _, _, err := h.GetContentsAndStat(ctxT(t)); !errors.Is(err, client.ErrClosed) {
		t.Fatalf("read after Close: %v, want ErrClosed", err)
	}
	if _, err := h.GetStat(ctxT(t)); !errors.Is(err, client.ErrClosed) {
		t.Fatalf("stat after Close: %v, want ErrClosed", err)
	}
	if _, err := r.a.Open(ctxT(t), f); !errors.Is(err, client.ErrClosed) {
		t.Fatalf("Open after Close: %v, want ErrClosed", err)
	}
}

// TestOwnWriteInFlight: while a client's own write of a file is in flight,
// its cache must not keep a value older than what the master committed. A
// read by the writing client that the master answered before the write
// arrived must not stay cached once the write has committed, even before the
// writer has heard the reply (Chubby caches are write-through: the writer
// gets no invalidation of its own, so its client must not fill the entry).
func TestOwnWriteInFlight(t *testing.T) {
	r := newCacheRig(t)
	f := r.c.Path("f")
	r.write(t, f, "old")
	h := mustOpen(t, r.a, f)
	hb := mustOpen(t, r.b, f)

	// A's write leaves the client (its cached entries are dropped) but the
	// network loses it for now.
	r.p.DropRequests(func(req *wire.Request) bool { return req.Method == wire.MSetContents })
	inval := r.a.CacheStats().Invalidations
	done := make(chan error, 1)
	go func() {
		_, err := h.SetContents(context.Background(), []byte("new"))
		done <- err
	}()
	wait.For(t, 0, "A's write to start", func() bool { return r.a.CacheStats().Invalidations > inval })

	// A reads meanwhile: the master answers with the old value.
	if v := read(t, h); v != "old" {
		t.Fatalf("read during A's lost write: %q, want old", v)
	}
	// The write gets through on the client's retry; its reply is lost.
	r.p.DropRequests(nil)
	lost := r.p.DropReply(func(req *wire.Request) bool { return req.Method == wire.MSetContents }, cell.LoseAndHang)
	r.p.Break()
	r.p.Heal()
	select {
	case <-lost.Done():
	case <-time.After(wait.Timeout):
		t.Fatal("A's write was not retried")
	}
	// The write is committed: B sees it.
	if v := read(t, hb); v != "new" {
		t.Fatalf("B reads %q after A's write committed, want new", v)
	}
	// A's write has not returned, but B has seen the new value: A may not
	// read the old one any more.
	if v := read(t, h); v != "new" {
		t.Fatalf("A reads %q from its cache after B read the new value (A's write committed, its reply not yet received)", v)
	}
	r.p.Break() // A retries once more and hears the remembered result
	r.p.Heal()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("A's write: %v", err)
		}
	case <-time.After(wait.Timeout):
		t.Fatal("A's write did not return")
	}
	if v := read(t, h); v != "new" {
		t.Fatalf("A reads %q after its write returned", v)
	}
}

// TestCacheFlushedOnFailover: when the master restarts (a new epoch), the
// client's cache is flushed before any call reaches the new master, and
// master_failover is delivered; reads then refill it.
func TestCacheFlushedOnFailover(t *testing.T) {
	r := newCacheRig(t)
	f := r.c.Path("f")
	r.write(t, f, "v1")
	h := mustOpen(t, r.a, f)
	read(t, h)
	if s := r.a.CacheStats(); s.Entries == 0 {
		t.Fatal("nothing cached")
	}
	epoch := r.a.Session().Epoch
	r.c.Restart(t)
	nextEvent(t, r.a, client.EventMasterFailover)
	if e := r.a.Session().Epoch; e == epoch {
		t.Fatalf("epoch %d after failover, want a new one", e)
	}
	if s := r.a.CacheStats(); s.Entries != 0 {
		t.Fatalf("%d cache entries after failover, want none", s.Entries)
	}
	if v, hit := r.readCounted(t, h); v != "v1" || hit {
		t.Fatalf("read after failover: %q hit=%v, want v1 from the master", v, hit)
	}
	if v, hit := r.readCounted(t, h); v != "v1" || !hit {
		t.Fatalf("second read after failover: %q hit=%v, want a hit", v, hit)
	}
	// The new master tracks A as a cacher: a write invalidates it.
	r.write(t, f, "v2")
	if v, hit := r.readCounted(t, h); v != "v2" || hit {
		t.Fatalf("read after a write on the new master: %q hit=%v, want v2 from the master", v, hit)
	}
}

// TestWriteAfterFailoverWaitsForCachers: a new master does not know which
// sessions cache what. A client that has not yet heard of the failover may
// still serve its cache (its local lease, granted by the old master, is
// valid), so the new master must not commit a write until every session has
// talked to it (its client flushed its cache on seeing the new epoch) or its
// lease ran out (Chubby §2.9, the failover steps).
func TestWriteAfterFailoverWaitsForCachers(t *testing.T) {
	r := newCacheRig(t)
	f := r.c.Path("f")
	r.write(t, f, "old")
	h := mustOpen(t, r.a, f)
	read(t, h)

	r.p.Break() // A is cut off from the cell: it cannot learn of the failover
	r.c.Restart(t)
	type result struct {
		err error
		at  time.Time
	}
	done := make(chan result, 1)
	go func() {
		_, err := r.b.WriteFile(context.Background(), f, []byte("new"))
		done <- result{err, time.Now()}
	}()
	// For 500 ms A keeps reading (from its cache) and B's write must not
	// return: a wait for the write that must time out.
	if wait.Until(500*time.Millisecond, func() bool {
		start := time.Now()
		v, _, err := h.GetContentsAndStat(ctxT(t))
		if err != nil {
			t.Fatalf("A's read while cut off, lease valid: %v", err)
		}
		select {
		case res := <-done:
			if res.at.Before(start) && string(v) == "old" {
				t.Fatalf("B's write returned (err %v) at %v, then A read the old value from its cache: the new master committed before A flushed", res.err, res.at.Format("15:04:05.000"))
			}
			done <- res
			return true
		default:
			return false
		}
	}) {
		res := <-done
		t.Fatalf("B's write returned (%v) while A, holding the old value in a valid cache, had not heard of the failover", res.err)
	}
	r.p.Heal()
	select {
	case res := <-done:
		if res.err != nil {
			t.Fatal(res.err)
		}
	case <-time.After(wait.Timeout):
		t.Fatal("B's write did not commit after A reconnected")
	}
	if v := read(t, h); v != "new" {
		t.Fatalf("A reads %q after B's write, want new", v)
	}
}

// TestCacheUnusedAfterLocalLeaseEnd: a client that cannot renew (its link to
// the master is cut: for the master it is as good as SIGSTOPped) serves its
// cache until its local lease ends and not a moment after: the read then
// blocks looking for the master instead of answering from the cache. Once
// the session is safe again, the cache refills.
func TestCacheUnusedAfterLocalLeaseEnd(t *testing.T) {
	const ttl = 12 * time.Second
	r := newRig(t, client.Config{SessionTTL: ttl})
	f := r.c.Path("f")
	if _, err := r.cl.WriteFile(ctxT(t), f, []byte("v")); err != nil {
		t.Fatal(err)
	}
	h := mustOpen(t, r.cl, f)
	read(t, h)
	read(t, h)
	if s := r.cl.CacheStats(); s.Hits == 0 {
		t.Fatalf("no cache hit: %+v", s)
	}
	r.p.Break()
	end := r.leaseEnd()
	r.cc.Advance(end.Sub(r.cc.Now()) - time.Millisecond)
	hits := r.cl.CacheStats().Hits
	if v := read(t, h); v != "v" || r.cl.CacheStats().Hits != hits+1 {
		t.Fatalf("read 1 ms before the local lease ends: %q, hits %d→%d; want a hit", v, hits, r.cl.CacheStats().Hits)
	}
	hits++
	r.cc.Advance(time.Millisecond)
	// Read at once, before the KeepAlive loop may have noticed: the cache
	// itself knows the lease end.
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	data, _, err := h.GetContentsAndStat(ctx)
	cancel()
	if err == nil {
		t.Fatalf("read at the local lease end answered %q; want no answer from the cache and no master", data)
	}
	if got := r.cl.CacheStats().Hits; got != hits {
		t.Fatalf("cache hits %d→%d after the local lease ended", hits, got)
	}
	nextEvent(t, r.cl, client.EventJeopardy)
	if s := r.cl.CacheStats(); s.Entries != 0 {
		t.Fatalf("%d cache entries in jeopardy, want a flushed cache", s.Entries)
	}
	r.reconnect(t, func() bool { return r.cl.State() == client.SessionSafe })
	nextEvent(t, r.cl, client.EventSafe)
	read(t, h)
	hits = r.cl.CacheStats().Hits
	if v := read(t, h); v != "v" || r.cl.CacheStats().Hits != hits+1 {
		t.Fatalf("after safe: %q, hits %d→%d; want the cache back in use", v, hits, r.cl.CacheStats().Hits)
	}
}
