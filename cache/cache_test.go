package cache

// Unit tests of the client cache (Chubby §2.9 "Caching"): an entry is served
// only while the session's local lease is valid, a fill racing an
// invalidation is void, invalidation drops every kind of entry of a path,
// jeopardy disables the cache, and memory is bounded. Time is a plain
// time.Time handed in by the test: no clock, no sleeping.

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chubby-dev/chubby/fs"
)

var t0 = time.Unix(1_700_000_000, 0)

func contents(p string) Key { return Key{Path: p, Kind: Contents} }

func val(data string) Value {
	return Value{Data: []byte(data), Stat: fs.Stat{Instance: 1, ContentGen: 7, Size: len(data)}}
}

// leased returns a cache whose lease ends at t0+10s.
func leased(cfg Config) *Cache {
	c := New(cfg)
	c.SetLeaseEnd(t0.Add(10 * time.Second))
	return c
}

// put fills k with v through a Begin/Put pair with nothing in between.
func put(c *Cache, k Key, v Value) { c.Put(k, v, c.Begin()) }

func mustHit(t *testing.T, c *Cache, k Key, now time.Time, want string) {
	t.Helper()
	v, ok := c.Get(k, now)
	if !ok {
		t.Fatalf("Get(%v) at %v: miss, want a hit with %q", k, now.Sub(t0), want)
	}
	if string(v.Data) != want {
		t.Fatalf("Get(%v): %q, want %q", k, v.Data, want)
	}
}

func mustMiss(t *testing.T, c *Cache, k Key, now time.Time) {
	t.Helper()
	if v, ok := c.Get(k, now); ok {
		t.Fatalf("Get(%v) at %v: hit %+v, want a miss", k, now.Sub(t0), v)
	}
}

// TestServedOnlyBeforeLeaseEnd: an entry is served strictly before the local
// lease ends, never at or after it; a renewal (a later lease end) makes the
// entries servable again; a new cache has no lease and serves nothing.
func TestServedOnlyBeforeLeaseEnd(t *testing.T) {
	c := New(Config{})
	put(c, contents("/ls/local/f"), val("v1"))
	mustMiss(t, c, contents("/ls/local/f"), t0) // no lease yet

	end := t0.Add(10 * time.Second)
	c.SetLeaseEnd(end)
	mustHit(t, c, contents("/ls/local/f"), t0, "v1")
	mustHit(t, c, contents("/ls/local/f"), end.Add(-time.Nanosecond), "v1")
	mustMiss(t, c, contents("/ls/local/f"), end)
	mustMiss(t, c, contents("/ls/local/f"), end.Add(time.Hour))

	// A KeepAlive reply renewed the lease: the entry (not invalidated) is
	// valid again until the new end.
	c.SetLeaseEnd(end.Add(4 * time.Second))
	mustHit(t, c, contents("/ls/local/f"), end, "v1")
	mustMiss(t, c, contents("/ls/local/f"), end.Add(4*time.Second))
}

// TestFillRacingInvalidationIsVoid: a Put whose token was taken before an
// Invalidate (of any path) or a Flush is dropped — its answer may predate the
// invalidation — while a Put with a token taken after them is stored.
func TestFillRacingInvalidationIsVoid(t *testing.T) {
	for _, tc := range []struct {
		name  string
		event func(c *Cache)
	}{
		{"invalidate same path", func(c *Cache) { c.Invalidate("/ls/local/f") }},
		{"invalidate other path", func(c *Cache) { c.Invalidate("/ls/local/other") }},
		{"invalidate nothing", func(c *Cache) { c.Invalidate() }},
		{"flush", func(c *Cache) { c.Flush() }},
		{"disable+enable", func(c *Cache) { c.Disable(); c.Enable() }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := leased(Config{})
			tok := c.Begin()
			tc.event(c)
			c.Put(contents("/ls/local/f"), val("old"), tok)
			mustMiss(t, c, contents("/ls/local/f"), t0)
			if s := c.Stats(); s.Entries != 0 || s.Bytes != 0 {
				t.Fatalf("a void fill left %d entries, %d bytes", s.Entries, s.Bytes)
			}
			// A fill begun after the event is good.
			put(c, contents("/ls/local/f"), val("new"))
			mustHit(t, c, contents("/ls/local/f"), t0, "new")
		})
	}
	t.Run("two fills in flight", func(t *testing.T) {
		c := leased(Config{})
		tokA := c.Begin()
		tokB := c.Begin()
		c.Put(contents("/ls/local/a"), val("a"), tokA)
		c.Put(contents("/ls/local/b"), val("b"), tokB) // no invalidation in between: both stored
		mustHit(t, c, contents("/ls/local/a"), t0, "a")
		mustHit(t, c, contents("/ls/local/b"), t0, "b")
	})
}

// TestInvalidateDropsEveryKind: Invalidate drops the contents, stat and
// listing entries of each path named, leaves other paths alone, and counts
// one invalidation per path.
func TestInvalidateDropsEveryKind(t *testing.T) {
	c := leased(Config{})
	for _, p := range []string{"/ls/local/d", "/ls/local/d/f", "/ls/local/g"} {
		for _, k := range []Kind{Contents, StatOnly, Listing} {
			put(c, Key{p, k}, Value{Data: []byte(p), Children: []string{"x"}})
		}
	}
	if got := c.Stats().Entries; got != 9 {
		t.Fatalf("%d entries, want 9", got)
	}
	c.Invalidate("/ls/local/d/f", "/ls/local/d", "/ls/local/never-cached")
	for _, p := range []string{"/ls/local/d", "/ls/local/d/f"} {
		for _, k := range []Kind{Contents, StatOnly, Listing} {
			mustMiss(t, c, Key{p, k}, t0)
		}
	}
	for _, k := range []Kind{Contents, StatOnly, Listing} {
		if _, ok := c.Get(Key{"/ls/local/g", k}, t0); !ok {
			t.Fatalf("entry %v of an untouched path was dropped", k)
		}
	}
	s := c.Stats()
	if s.Invalidations != 3 || s.Entries != 3 {
		t.Fatalf("stats %+v, want 3 invalidations (one per path named) and 3 entries left", s)
	}
}

// TestAbsentEntry: a negative entry is served like any other and dropped by
// an invalidation of its path (the node was created).
func TestAbsentEntry(t *testing.T) {
	c := leased(Config{})
	k := Key{Path: "/ls/local/missing", Kind: StatOnly}
	put(c, k, Value{Absent: true})
	v, ok := c.Get(k, t0)
	if !ok || !v.Absent {
		t.Fatalf("Get: %+v %v, want the absent entry", v, ok)
	}
	c.Invalidate("/ls/local/missing")
	mustMiss(t, c, k, t0)
}

// TestDisableEnable: Disable (jeopardy) flushes and serves nothing, not even
// entries Put after it; Enable (safe again) starts from an empty cache that
// fills normally.
func TestDisableEnable(t *testing.T) {
	c := leased(Config{})
	put(c, contents("/ls/local/f"), val("v1"))
	c.Disable()
	mustMiss(t, c, contents("/ls/local/f"), t0)
	put(c, contents("/ls/local/f"), val("v2")) // a fill completing in jeopardy
	mustMiss(t, c, contents("/ls/local/f"), t0)
	if s := c.Stats(); s.Entries != 0 {
		t.Fatalf("disabled cache holds %d entries", s.Entries)
	}
	c.Enable()
	mustMiss(t, c, contents("/ls/local/f"), t0) // nothing survived the disable
	put(c, contents("/ls/local/f"), val("v3"))
	mustHit(t, c, contents("/ls/local/f"), t0, "v3")
}

// TestFlush drops everything but leaves the cache enabled.
func TestFlush(t *testing.T) {
	c := leased(Config{})
	for i := 0; i < 5; i++ {
		put(c, contents(fmt.Sprintf("/ls/local/f%d", i)), val("x"))
	}
	c.Flush()
	if s := c.Stats(); s.Entries != 0 || s.Bytes != 0 {
		t.Fatalf("after Flush: %+v", s)
	}
	put(c, contents("/ls/local/f0"), val("y"))
	mustHit(t, c, contents("/ls/local/f0"), t0, "y")
}

// TestLRUBoundByEntries: past MaxEntries the least recently used entry goes;
// a Get counts as a use.
func TestLRUBoundByEntries(t *testing.T) {
	c := leased(Config{MaxEntries: 3})
	for _, p := range []string{"a", "b", "c"} {
		put(c, contents(p), val(p))
	}
	mustHit(t, c, contents("a"), t0, "a") // a is now the most recent; b the least
	put(c, contents("d"), val("d"))
	mustMiss(t, c, contents("b"), t0)
	for _, p := range []string{"a", "c", "d"} {
		mustHit(t, c, contents(p), t0, p)
	}
	// Replacing an entry does not grow the cache.
	put(c, contents("a"), val("a2"))
	if n := c.Stats().Entries; n != 3 {
		t.Fatalf("%d entries after a replace, want 3", n)
	}
	mustHit(t, c, contents("a"), t0, "a2")
}

// TestLRUBoundByBytes: the byte bound evicts least recently used entries
// until the cache fits; an entry larger than the whole bound is not stored
// (and evicts nothing); Bytes returns to 0 when everything is dropped.
func TestLRUBoundByBytes(t *testing.T) {
	big := strings.Repeat("x", 1000)
	one := (&Value{Data: []byte(big)}).size(contents("p0"))
	c := leased(Config{MaxBytes: 3 * one})
	for i := 0; i < 3; i++ {
		put(c, contents(fmt.Sprintf("p%d", i)), Value{Data: []byte(big)})
	}
	if s := c.Stats(); s.Entries != 3 || s.Bytes != 3*one {
		t.Fatalf("stats %+v, want 3 entries of %d bytes", s, one)
	}
	mustHit(t, c, contents("p0"), t0, big)
	put(c, contents("p3"), Value{Data: []byte(big)})
	mustMiss(t, c, contents("p1"), t0) // the least recently used
	if s := c.Stats(); s.Entries != 3 || s.Bytes > 3*one {
		t.Fatalf("stats %+v: over the byte bound %d", s, 3*one)
	}
	// Too big to ever fit: not stored, nothing evicted for it.
	put(c, contents("huge"), Value{Data: make([]byte, 4*one)})
	mustMiss(t, c, contents("huge"), t0)
	if n := c.Stats().Entries; n != 3 {
		t.Fatalf("%d entries after an oversize Put, want 3", n)
	}
	// One entry as big as two evicts two.
	put(c, contents("double"), Value{Data: make([]byte, 2*one-len("double")-96)})
	if s := c.Stats(); s.Bytes > 3*one || s.Entries != 2 {
		t.Fatalf("stats %+v after a double-size Put, want 2 entries within %d bytes", s, 3*one)
	}
	c.Invalidate("p0", "p2", "p3", "double")
	if s := c.Stats(); s.Entries != 0 || s.Bytes != 0 {
		t.Fatalf("stats %+v after dropping everything, want empty", s)
	}
}

// TestListingSizeCountsChildren: a listing's size grows with its children, so
// big directories count against MaxBytes.
func TestListingSizeCountsChildren(t *testing.T) {
	c := leased(Config{})
	k := Key{Path: "/ls/local/d", Kind: Listing}
	put(c, k, Value{Children: []string{"a", "b"}})
	small := c.Stats().Bytes
	put(c, k, Value{Children: []string{"a", "b", strings.Repeat("c", 500)}})
	if big := c.Stats().Bytes; big < small+500 {
		t.Fatalf("listing of a 500-byte child name: %d bytes, want at least %d", big, small+500)
	}
}

// TestStats: hits and misses are counted by Get (a miss for an absent key,
// an expired lease and a disabled cache alike), invalidations by path.
func TestStats(t *testing.T) {
	c := leased(Config{})
	put(c, contents("f"), val("v"))
	c.Get(contents("f"), t0)                  // hit
	c.Get(contents("f"), t0)                  // hit
	c.Get(contents("g"), t0)                  // miss: no entry
	c.Get(contents("f"), t0.Add(time.Hour))   // miss: lease over
	c.Get(Key{Path: "f", Kind: StatOnly}, t0) // miss: other kind
	c.Invalidate("f")                         // 1
	c.Get(contents("f"), t0)                  // miss: invalidated
	c.Disable()                               //
	c.Get(contents("f"), t0)                  // miss: disabled
	s := c.Stats()
	want := Stats{Hits: 2, Misses: 5, Invalidations: 1}
	if s != want {
		t.Fatalf("stats %+v, want %+v", s, want)
	}
}

// TestConcurrentUse exercises the cache from many goroutines (run with
// -race): fills, reads, invalidations and flushes interleave without a data
// race, and the accounting stays consistent.
func TestConcurrentUse(t *testing.T) {
	c := leased(Config{MaxEntries: 50, MaxBytes: 20_000})
	done := make(chan struct{})
	for g := 0; g < 8; g++ {
		go func(g int) {
			defer func() { done <- struct{}{} }()
			for i := 0; i < 2000; i++ {
				p := fmt.Sprintf("/ls/local/f%d", (g*7+i)%80)
				switch i % 10 {
				case 0:
					c.Invalidate(p)
				case 1:
					if g == 0 && i%500 == 1 {
						c.Flush()
					}
				case 2, 3, 4:
					put(c, contents(p), val(p))
				default:
					if v, ok := c.Get(contents(p), t0); ok && string(v.Data) != p {
						t.Errorf("Get(%s) = %q", p, v.Data)
					}
				}
			}
		}(g)
	}
	for g := 0; g < 8; g++ {
		<-done
	}
	s := c.Stats()
	if s.Entries > 50 || s.Bytes > 20_000 || s.Entries < 0 || s.Bytes < 0 {
		t.Fatalf("stats %+v outside the bounds", s)
	}
	c.Flush()
	if s := c.Stats(); s.Entries != 0 || s.Bytes != 0 {
		t.Fatalf("after Flush: %+v", s)
	}
}

// TestWriteInFlightNotFilled: between BeginWrite and EndWrite (this client is
// writing the path) no answer is cached for the path, whatever its token —
// the master gives the writer no invalidation of its own, so an answer that
// predates the write could otherwise outlive it; other paths fill normally.
// Writes of one path by two goroutines nest.
func TestWriteInFlightNotFilled(t *testing.T) {
	c := leased(Config{})
	put(c, contents("/ls/local/d/f"), val("old"))
	c.BeginWrite("/ls/local/d/f", "/ls/local/d")
	mustMiss(t, c, contents("/ls/local/d/f"), t0)
	put(c, contents("/ls/local/d/f"), val("old")) // a read answered before the write arrived
	put(c, Key{Path: "/ls/local/d", Kind: Listing}, Value{Children: []string{"f"}})
	mustMiss(t, c, contents("/ls/local/d/f"), t0)
	mustMiss(t, c, Key{Path: "/ls/local/d", Kind: Listing}, t0)
	put(c, contents("/ls/local/other"), val("x"))
	mustHit(t, c, contents("/ls/local/other"), t0, "x")

	c.BeginWrite("/ls/local/d/f", "/ls/local/d") // a second writer
	c.EndWrite("/ls/local/d/f", "/ls/local/d")
	put(c, contents("/ls/local/d/f"), val("old"))
	mustMiss(t, c, contents("/ls/local/d/f"), t0)

	tok := c.Begin()
	c.EndWrite("/ls/local/d/f", "/ls/local/d")
	c.Put(contents("/ls/local/d/f"), val("old"), tok) // begun before the write ended
	mustMiss(t, c, contents("/ls/local/d/f"), t0)
	put(c, contents("/ls/local/d/f"), val("new"))
	mustHit(t, c, contents("/ls/local/d/f"), t0, "new")
}
