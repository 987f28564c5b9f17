package server

// Unit tests of the tracker's half of event fills (fill.go): who is
// admitted as a cacher when a write's contents are offered, on a manual
// clock with fake sessions.

import (
	"testing"

	"github.com/chubby-dev/chubby/testing/wait"
)

// TestFillAdmittedOnlyWhenNoOtherWriteInFlight: the write being published
// holds the path uncachable once; its watchers are admitted (and a later
// write invalidates them, the writer among them). While a second write of
// the path is in flight — its beforeWrite took the cachers already — no
// watcher is admitted: its value would be overwritten behind its back.
func TestFillAdmittedOnlyWhenNoOtherWriteInFlight(t *testing.T) {
	u := newUnitTracker(t)
	for _, id := range []uint64{1, 2, 3} {
		u.fake.deadlines[id] = unitStart.Add(unitTTL)
	}
	admit := func(may ...uint64) map[uint64]bool {
		m := map[uint64]bool{}
		for _, id := range may {
			m[id] = true
		}
		var got map[uint64]bool
		u.admitFills(pathA, m, func(a map[uint64]bool) { got = a })
		return got
	}

	// W1 in flight alone: its publish admits both watchers.
	w1 := proceeds(t, u.write(3, pathA), "W1, nobody caches")
	if got := admit(1, 2); !got[1] || !got[2] {
		t.Fatalf("admitted %v with only the published write in flight; want 1 and 2", got)
	}
	w1()

	// W2 by session 2 (admitted by the fill): it invalidates 1 and 2.
	ch := u.write(2, pathA)
	wantSent(t, u, 1, 1)
	wantSent(t, u, 2, 1)
	u.fake.ack(1)
	u.fake.ack(2)
	w2 := proceeds(t, ch, "W2 after the acknowledgements")

	// W3 begins before W2's publish: W2's fill admits nobody.
	w3 := proceeds(t, u.write(3, pathA), "W3, nobody caches")
	if got := admit(1, 2); len(got) != 0 {
		t.Fatalf("admitted %v while another write of the path was in flight", got)
	}
	w2()
	w3()

	// An ACL file's write in flight (every path uncachable): nobody.
	all := proceeds(t, u.write(3, pathB, everyPath), "an ACL file's write")
	w4 := proceeds(t, u.write(3, pathA), "W4")
	if got := admit(1); len(got) != 0 {
		t.Fatalf("admitted %v while an ACL file's write was in flight", got)
	}
	w4()
	all()
}

// wantSent waits until session id was sent n invalidations (the write's
// beforeWrite runs on its own goroutine).
func wantSent(t *testing.T, u *unitTracker, id uint64, n int) {
	t.Helper()
	wait.For(t, 0, "the invalidation of a fill-admitted session", func() bool { return u.fake.sentTo(id) == n })
}
