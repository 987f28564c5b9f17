package cache

// Unit tests of Refill, the cache's half of event fills (issue 13;
// server/fill.go): contents an event carries, numbered by the master's
// invalidations, are installed only if nothing the cache knows is newer —
// no invalidation of the path numbered above them, in whichever order the
// two arrive, no entry of a later write, no write of the path by this
// client in flight — and are served only within the local lease.

import (
	"testing"
	"time"

	"github.com/chubby-dev/chubby/fs"
)

func gen(data string, instance, g uint64) Value {
	return Value{Data: []byte(data), Stat: fs.Stat{Instance: instance, ContentGen: g, Size: len(data)}}
}

// TestRefillServedWithinLease: a refill is a hit until the lease ends, and
// not after; a renewal makes it servable again.
func TestRefillServedWithinLease(t *testing.T) {
	c := leased(Config{})
	k := contents("/ls/local/f")
	if !c.Refill(k, gen("v2", 1, 2), 5) {
		t.Fatal("refill of an empty cache refused")
	}
	mustHit(t, c, k, t0.Add(9*time.Second), "v2")
	mustMiss(t, c, k, t0.Add(10*time.Second))
	c.SetLeaseEnd(t0.Add(20 * time.Second))
	mustHit(t, c, k, t0.Add(10*time.Second), "v2")
}

// TestRefillOlderThanInvalidationRefused: the event of write 1 (numbered
// 5) and the invalidation of write 2 (numbered 6), in both orders: the
// cache never ends up holding write 1's contents after the invalidation.
func TestRefillOlderThanInvalidationRefused(t *testing.T) {
	k := contents("/ls/local/f")
	now := t0.Add(time.Second)

	// Event first, then the invalidation: the invalidation drops it.
	c := leased(Config{})
	if !c.Refill(k, gen("w1", 1, 2), 5) {
		t.Fatal("refill refused")
	}
	c.InvalidateAt(6, k.Path)
	mustMiss(t, c, k, now)

	// Invalidation first (a reply built later, handled first): refused.
	c = leased(Config{})
	c.InvalidateAt(6, k.Path)
	if c.Refill(k, gen("w1", 1, 2), 5) {
		t.Fatal("a refill numbered below an invalidation that arrived before it was installed")
	}
	mustMiss(t, c, k, now)
	// Write 2's own event (numbered at or above 6) fills.
	if !c.Refill(k, gen("w2", 1, 3), 6) {
		t.Fatal("the refill of the write after the invalidation refused")
	}
	mustHit(t, c, k, now, "w2")

	// Invalidations of other paths do not hold this one back.
	c = leased(Config{})
	c.InvalidateAt(9, "/ls/local/other")
	if !c.Refill(k, gen("w1", 1, 2), 5) {
		t.Fatal("a refill held back by another path's invalidation")
	}
}

// TestRefillNeverReplacesNewer: an out-of-order event (of an earlier
// write) does not replace the entry of a later one, of the same instance
// or of a later instance; nor does it replace a negative entry.
func TestRefillNeverReplacesNewer(t *testing.T) {
	k := contents("/ls/local/f")
	now := t0.Add(time.Second)
	c := leased(Config{})
	if !c.Refill(k, gen("g3", 1, 3), 7) {
		t.Fatal("refill refused")
	}
	if c.Refill(k, gen("g2", 1, 2), 7) {
		t.Fatal("an earlier generation replaced a later one")
	}
	if c.Refill(k, gen("g3again", 1, 3), 7) {
		t.Fatal("the same generation replaced the entry")
	}
	mustHit(t, c, k, now, "g3")
	if !c.Refill(k, gen("g4", 1, 4), 7) {
		t.Fatal("a later generation refused")
	}
	mustHit(t, c, k, now, "g4")
	if !c.Refill(k, gen("new", 2, 1), 7) {
		t.Fatal("a later instance refused")
	}
	if c.Refill(k, gen("old", 1, 9), 7) {
		t.Fatal("an earlier instance replaced a later one")
	}
	mustHit(t, c, k, now, "new")

	put(c, k, Value{Absent: true})
	if c.Refill(k, gen("x", 3, 1), 7) {
		t.Fatal("a refill replaced a negative entry")
	}
}

// TestRefillRefusedWhileWritingDisabledOrAfterFailover: not while this
// client writes the path (its own write may be newer), not while the cache
// is disabled (jeopardy, Close); a failover's Flush forgets the numbers (a
// new master's start afresh), jeopardy keeps them (the same master may
// come back with more of its events).
func TestRefillRefusedWhileWritingDisabledOrAfterFailover(t *testing.T) {
	k := contents("/ls/local/f")
	now := t0.Add(time.Second)
	c := leased(Config{})
	c.BeginWrite(k.Path)
	if c.Refill(k, gen("v", 1, 2), 5) {
		t.Fatal("a refill during this client's write of the path")
	}
	c.EndWrite(k.Path)
	if !c.Refill(k, gen("v", 1, 2), 5) {
		t.Fatal("refill after the write refused")
	}

	c.InvalidateAt(8, k.Path)
	c.Disable()
	if c.Refill(k, gen("v3", 1, 3), 9) {
		t.Fatal("a refill while disabled")
	}
	c.Enable()
	if c.Refill(k, gen("v2", 1, 2), 7) {
		t.Fatal("jeopardy forgot the invalidation numbers")
	}
	c.Flush()
	if !c.Refill(k, gen("v9", 1, 9), 1) {
		t.Fatal("after a failover's flush, the new master's low numbers are refused")
	}
	mustHit(t, c, k, now, "v9")
}

// TestRefillNumbersBounded: past maxInvalAt paths the per-path numbers fold
// into one floor: no older refill gets through, memory stays bounded.
func TestRefillNumbersBounded(t *testing.T) {
	c := leased(Config{})
	for i := range maxInvalAt + 1 {
		c.InvalidateAt(uint64(i+1), "/ls/local/p"+string(rune('a'+i%26))+string(rune(i)))
	}
	if n := len(c.invalAt); n > maxInvalAt {
		t.Fatalf("%d numbers kept, bound %d", n, maxInvalAt)
	}
	if c.Refill(contents("/ls/local/p-first"), gen("v", 1, 1), maxInvalAt) {
		t.Fatal("a refill numbered below a folded invalidation got through")
	}
	if !c.Refill(contents("/ls/local/p-first"), gen("v", 1, 1), maxInvalAt+1) {
		t.Fatal("a refill numbered at the floor refused")
	}
}
