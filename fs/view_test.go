package fs

import (
	"testing"
	"time"
)

// TestLocksView: the status page's view of the locks counts holders by mode
// and waiters, lists the most contended locks first with their holders and
// waiters in queue order, and the lock-delays in force at the time given —
// and only up to the limit.
func TestLocksView(t *testing.T) {
	s := New("local")
	idx := uint64(0)
	apply := func(session uint64, b Body) *Result { return mustApply(t, &s, &idx, session, b) }
	var sess []uint64
	for range 5 {
		sess = append(sess, apply(0, &CreateSession{TTL: int64(12 * time.Second)}).Session)
	}
	for _, p := range []string{"a", "b", "c", "d"} {
		apply(sess[0], &Create{Path: "/ls/local/" + p})
	}
	apply(sess[0], &Acquire{Path: "/ls/local/a", Mode: Exclusive})
	apply(sess[1], &Acquire{Path: "/ls/local/a", Mode: Exclusive, Wait: true, WaitID: 1})
	apply(sess[2], &Acquire{Path: "/ls/local/a", Mode: Shared, Wait: true, WaitID: 2})
	apply(sess[0], &Acquire{Path: "/ls/local/b", Mode: Shared})
	apply(sess[1], &Acquire{Path: "/ls/local/b", Mode: Shared})
	apply(sess[3], &Acquire{Path: "/ls/local/b", Mode: Exclusive, Wait: true, WaitID: 3})
	// c: held by a session that expires with a 10 s lock-delay.
	apply(sess[4], &Acquire{Path: "/ls/local/c", Mode: Exclusive, LockDelay: int64(10 * time.Second)})
	end := apply(sess[4], &EndSession{Expired: true})
	if len(end.Delayed) != 0 || !hasDelay(s, "/ls/local/c") {
		t.Fatalf("c should be in lock-delay with nobody queued: %+v", end)
	}
	now := testEpoch + int64(idx)*int64(time.Millisecond)

	sum := s.Locks(now, 10)
	if sum.Held != 2 || sum.Exclusive != 1 || sum.Shared != 1 || sum.Waiters != 3 || sum.DelayedCount != 1 {
		t.Fatalf("counts: %+v; want held 2 (1 exclusive, 1 shared), 3 waiters, 1 lock-delay", sum)
	}
	if len(sum.Contended) != 2 || sum.Contended[0].Path != "/ls/local/a" || sum.Contended[1].Path != "/ls/local/b" {
		t.Fatalf("contended: %+v; want a (2 waiters) then b (1)", sum.Contended)
	}
	a := sum.Contended[0]
	if a.Mode != Exclusive || len(a.Holders) != 1 || a.Holders[0].Session != sess[0] ||
		len(a.Waiters) != 2 || a.Waiters[0].Session != sess[1] || a.Waiters[1].Session != sess[2] || a.Waiters[1].Mode != Shared {
		t.Fatalf("a: %+v", a)
	}
	if b := sum.Contended[1]; len(b.Holders) != 2 || b.Holders[0].Session != sess[0] || b.Holders[1].Session != sess[1] {
		t.Fatalf("b's holders, by session: %+v", b.Holders)
	}
	if len(sum.Delayed) != 1 || sum.Delayed[0].Path != "/ls/local/c" || sum.Delayed[0].DelayUntil <= now {
		t.Fatalf("delayed: %+v", sum.Delayed)
	}
	if top := s.Locks(now, 1); len(top.Contended) != 1 || top.Contended[0].Path != "/ls/local/a" || top.Waiters != 3 {
		t.Fatalf("limit 1: %+v", top)
	}
	if later := s.Locks(now+int64(11*time.Second), 10); later.DelayedCount != 0 || len(later.Delayed) != 0 {
		t.Fatalf("after the lock-delay ended: %+v", later)
	}
	if li, err := s.Lock("/ls/local/d"); err != nil || len(li.Holders)+len(li.Waiters) != 0 || li.DelayUntil != 0 {
		t.Fatalf("d: %+v, %v; want a free lock", li, err)
	}
	if _, err := s.Lock("/ls/local/nope"); err == nil {
		t.Fatal("Lock of a missing node: no error")
	}
}

func hasDelay(s *State, path string) bool { return s.nodes[path].DelayUntil != 0 }
