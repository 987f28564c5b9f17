package server

// Unit tests of KeepAliveMany on the lease table (manual clock, no raft):
// one parked call renews many sessions, is answered for all of them when
// any has something to deliver, refuses entries one by one, and never
// builds a reply larger than a frame.

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chubby-dev/chubby/fs"
	"github.com/chubby-dev/chubby/session"
	"github.com/chubby-dev/chubby/wire"
)

// manyReply is the single reply r holds, as a KeepAliveManyReply to call id.
func manyReply(t *testing.T, r *replies, id uint64) wire.KeepAliveManyReply {
	t.Helper()
	got := r.all()
	if len(got) != 1 {
		t.Fatalf("%d replies, want 1: %+v", len(got), got)
	}
	if got[0].id != id || got[0].err != nil {
		t.Fatalf("reply %+v, want a KeepAliveManyReply to call %d", got[0], id)
	}
	rep, ok := got[0].body.(wire.KeepAliveManyReply)
	if !ok {
		t.Fatalf("reply body %T, want wire.KeepAliveManyReply", got[0].body)
	}
	return rep
}

// sessionsOf lists the sessions a reply answers, in order.
func sessionsOf(rep wire.KeepAliveManyReply) []uint64 {
	var ids []uint64
	for _, r := range rep.Sessions {
		ids = append(ids, r.Session)
	}
	return ids
}

func entries(ids ...uint64) []wire.KeepAliveEntry {
	var es []wire.KeepAliveEntry
	for _, id := range ids {
		es = append(es, wire.KeepAliveEntry{Session: id, Secret: []byte{byte(id)}})
	}
	return es
}

// addSessions gives sessions 1..n of principal "p" secret {id} and lease ttl.
func addSessions(lt *leaseTable, now time.Time, n int, ttl time.Duration) {
	for id := uint64(1); id <= uint64(n); id++ {
		lt.add(now, id, ttl, []byte{byte(id)}, "p")
	}
}

// TestKeepAliveManyParksAndRenewsAll: one KeepAliveMany parks for all its
// sessions, is answered within a hold with a lease for each, and keeps them
// all alive: sessions renewed only that way never expire, while one left
// out does.
func TestKeepAliveManyParksAndRenewsAll(t *testing.T) {
	clk := session.NewManualClock(unitStart)
	lt := newUnitLeases(t, clk, &fakeStall{})
	addSessions(lt, clk.Now(), 4, unitTTL)
	hold := session.KeepAliveManyHold(unitTTL)
	for round := range 6 {
		var r replies
		lt.keepAliveMany(&r, uint64(round+1), "p", entries(1, 2, 3))
		clk.Advance(hold - time.Millisecond)
		if n := len(r.all()); n != 0 {
			t.Fatalf("round %d: answered before the hold: %+v", round, r.all())
		}
		clk.Advance(time.Millisecond)
		rep := manyReply(t, &r, uint64(round+1))
		if got := sessionsOf(rep); !slices.Equal(got, []uint64{1, 2, 3}) {
			t.Fatalf("round %d: reply answers sessions %v, want [1 2 3]", round, got)
		}
		for _, s := range rep.Sessions {
			if s.Code != "" || s.Reply.TTL != int64(unitTTL) {
				t.Fatalf("round %d: session %d answered %+v, want a lease of %v", round, s.Session, s, unitTTL)
			}
		}
	}
	// 6 holds of 2.4 s: session 4, never renewed, ran out.
	wantExpired(t, lt, 4)
	for id := uint64(1); id <= 3; id++ {
		if err := lt.check(id); err != nil {
			t.Fatalf("session %d renewed by KeepAliveMany: %v", id, err)
		}
	}
}

// TestKeepAliveManyRefusesEntriesOneByOne: an entry without its session's
// secret, of another principal's session, or of no session is refused in
// its own result, and the call is answered at once so those clients learn
// it; the others are renewed and answered in the same reply.
func TestKeepAliveManyRefusesEntriesOneByOne(t *testing.T) {
	clk := session.NewManualClock(unitStart)
	lt := newUnitLeases(t, clk, &fakeStall{})
	addSessions(lt, clk.Now(), 2, unitTTL)
	lt.add(clk.Now(), 3, unitTTL, []byte{3}, "someone-else")
	clk.Advance(unitTTL / 2)
	var r replies
	es := entries(1, 2, 3, 99)
	es[1].Secret = []byte("wrong")
	lt.keepAliveMany(&r, 5, "p", es)
	rep := manyReply(t, &r, 5)
	want := map[uint64]error{1: nil, 2: fs.ErrPermission, 3: fs.ErrPermission, 99: fs.ErrSessionExpired}
	if len(rep.Sessions) != len(want) {
		t.Fatalf("reply answers %v, want sessions 1, 2, 3 and 99", sessionsOf(rep))
	}
	for _, s := range rep.Sessions {
		err := s.Err()
		if w := want[s.Session]; (w == nil) != (err == nil) || (w != nil && !errors.Is(err, w)) {
			t.Fatalf("session %d answered %v, want %v", s.Session, err, w)
		}
	}
	// The refused KeepAlives renewed nothing: 2 and 3 run out at their
	// first TTL, 1 a TTL after its KeepAlive.
	clk.Advance(unitTTL / 2)
	wantExpired(t, lt, 2, 3)
	clk.Advance(unitTTL / 2)
	wantExpired(t, lt, 1)
}

// TestKeepAliveManyAnsweredByADelivery: an invalidation for one session of
// a parked KeepAliveMany answers the call at once for every session; only
// that session's result carries it.
func TestKeepAliveManyAnsweredByADelivery(t *testing.T) {
	clk := session.NewManualClock(unitStart)
	lt := newUnitLeases(t, clk, &fakeStall{})
	addSessions(lt, clk.Now(), 3, unitTTL)
	var r replies
	lt.keepAliveMany(&r, 1, "p", entries(1, 2, 3))
	if _, _, ok := lt.invalidate(2, []string{"/ls/c/f"}); !ok {
		t.Fatal("invalidate: session 2 has no lease")
	}
	rep := manyReply(t, &r, 1)
	if got := sessionsOf(rep); !slices.Equal(got, []uint64{1, 2, 3}) {
		t.Fatalf("reply answers %v, want [1 2 3]", got)
	}
	for _, s := range rep.Sessions {
		inv := s.Reply.Invalidations
		if (s.Session == 2) != (len(inv) == 1 && inv[0] == "/ls/c/f") || (s.Session != 2 && len(inv) != 0) {
			t.Fatalf("session %d's result carries invalidations %v", s.Session, inv)
		}
	}
	// A single KeepAlive of a session parked in a KeepAliveMany answers
	// that call too (one poll per session at a time).
	var r2 replies
	lt.keepAliveMany(&r2, 2, "p", entries(1, 3))
	if err := lt.keepAlive(&r, 3, 3, false, 0, false); err != nil {
		t.Fatalf("KeepAlive: %v", err)
	}
	if got := sessionsOf(manyReply(t, &r2, 2)); !slices.Equal(got, []uint64{1, 3}) {
		t.Fatalf("the second call answers %v, want [1 3]", got)
	}
}

// TestKeepAliveManyReplyFitsAFrame: when the sessions of one call have more
// to deliver than a frame holds, the reply carries those that fit (at least
// one) and leaves out the others, whose deliveries wait for their next
// KeepAlive, answered at once.
func TestKeepAliveManyReplyFitsAFrame(t *testing.T) {
	clk := session.NewManualClock(unitStart)
	lt := newUnitLeases(t, clk, &fakeStall{})
	const n = 8
	addSessions(lt, clk.Now(), n, unitTTL)
	// Each session gets events worth about KeepAliveBytes: 8 of them are
	// twice a frame.
	path := "/ls/c/" + strings.Repeat("x", 1000)
	var evs []wire.Event
	for range wire.KeepAliveBytes / (len(path) + 24) {
		evs = append(evs, wire.Event{Type: wire.EventContentsModified, Path: path})
	}
	for id := uint64(1); id <= n; id++ {
		lt.pushEvents(id, evs)
	}
	var r replies
	ids := make([]uint64, n)
	for i := range ids {
		ids[i] = uint64(i + 1)
	}
	lt.keepAliveMany(&r, 1, "p", entries(ids...))
	rep := manyReply(t, &r, 1)
	b, err := wire.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) > wire.ReplyBudget {
		t.Fatalf("reply of %d bytes, over the %d-byte budget", len(b), wire.ReplyBudget)
	}
	answered := sessionsOf(rep)
	if len(answered) == 0 || len(answered) == n {
		t.Fatalf("reply answers %d of %d sessions; want some but not all", len(answered), n)
	}
	left := ids[len(answered)]
	var r2 replies
	lt.keepAliveMany(&r2, 2, "p", entries(left))
	rep2 := manyReply(t, &r2, 2)
	if len(rep2.Sessions) != 1 || len(rep2.Sessions[0].Reply.Events) == 0 {
		t.Fatalf("session %d, left out, then answered %+v; want its events at once", left, rep2)
	}
}

// TestKeepAliveManyEnds: a KeepAliveMany parked when one of its sessions
// ends is answered for the others (the ended one left out: its next
// KeepAlive is told it expired); demotion answers the call once, with
// not_master.
func TestKeepAliveManyEnds(t *testing.T) {
	clk := session.NewManualClock(unitStart)
	lt := newUnitLeases(t, clk, &fakeStall{})
	addSessions(lt, clk.Now(), 3, unitTTL)
	var r replies
	lt.keepAliveMany(&r, 1, "p", entries(1, 2, 3))
	lt.remove(2)
	if got := sessionsOf(manyReply(t, &r, 1)); !slices.Equal(got, []uint64{1, 3}) {
		t.Fatalf("after session 2 ended the call answers %v, want [1 3]", got)
	}
	var r2 replies
	lt.keepAliveMany(&r2, 2, "p", entries(1, 3))
	lt.Demote()
	got := r2.all()
	if len(got) != 1 || !errors.Is(got[0].err, wire.ErrNotMaster) {
		t.Fatalf("demotion answered %+v; want one not_master reply", got)
	}
	clk.Advance(unitTTL) // the hold's timer fires after the demotion: no second reply
	if n := len(r2.all()); n != 1 {
		t.Fatalf("%d replies after the hold, want 1", n)
	}
}

// TestKeepAliveManyCallsOfAConnectionEndTogether: a KeepAliveMany parked on
// a connection that has one parked already is answered when that one is
// (not a full hold later), so the sessions of both renew together from
// then on; a call on another connection keeps its own hold.
func TestKeepAliveManyCallsOfAConnectionEndTogether(t *testing.T) {
	clk := session.NewManualClock(unitStart)
	lt := newUnitLeases(t, clk, &fakeStall{})
	addSessions(lt, clk.Now(), 3, unitTTL)
	hold := session.KeepAliveManyHold(unitTTL)
	var conn, other replies
	lt.keepAliveMany(&conn, 1, "p", entries(1))
	clk.Advance(hold / 2)
	lt.keepAliveMany(&conn, 2, "p", entries(2))
	lt.keepAliveMany(&other, 3, "p", entries(3))
	clk.Advance(hold / 2)
	got := conn.all()
	if len(got) != 2 {
		t.Fatalf("%d replies on the connection at the first call's hold, want both calls answered: %+v", len(got), got)
	}
	if n := len(other.all()); n != 0 {
		t.Fatalf("the other connection's call answered after half its hold")
	}
	clk.Advance(hold / 2)
	if n := len(other.all()); n != 1 {
		t.Fatalf("the other connection's call: %d replies after its hold, want 1", n)
	}
}

// TestKeepAliveManyEarlySessionLeavesOthersParked: a session named by a
// second KeepAliveMany while the first is parked (its client sent again
// before the first's hold ended) does not answer the first call for all its
// other sessions: each call is answered at the end of its own hold, each
// with the session. (Behind a proxy, a call of thousands of sessions was
// answered at once whenever one of them renewed early, and all of them
// sent again.) A third call of the session answers the first at once;
// invalidations still answer the session's first call at once.
func TestKeepAliveManyEarlySessionLeavesOthersParked(t *testing.T) {
	clk := session.NewManualClock(unitStart)
	lt := newUnitLeases(t, clk, &fakeStall{})
	addSessions(lt, clk.Now(), 4, unitTTL)
	hold := session.KeepAliveManyHold(unitTTL)
	var a, b, c replies
	lt.keepAliveMany(&a, 1, "p", entries(1, 2, 3))
	clk.Advance(hold / 2)
	lt.keepAliveMany(&b, 2, "p", entries(1, 4))
	if n := len(a.all()); n != 0 {
		t.Fatalf("the first call was answered when one of its sessions renewed again: %+v", a.all())
	}
	clk.Advance(hold / 2)
	if got := sessionsOf(manyReply(t, &a, 1)); !slices.Equal(got, []uint64{1, 2, 3}) {
		t.Fatalf("the first call answers %v at its hold, want [1 2 3]", got)
	}
	if n := len(b.all()); n != 0 {
		t.Fatalf("the second call was answered with the first: %+v", b.all())
	}
	// Session 1 is now parked on the second call only: an invalidation
	// answers that call at once, with the invalidation for session 1.
	if _, _, ok := lt.invalidate(1, []string{"/ls/c/f"}); !ok {
		t.Fatal("invalidate: session 1 has no lease")
	}
	rep := manyReply(t, &b, 2)
	if got := sessionsOf(rep); !slices.Equal(got, []uint64{1, 4}) {
		t.Fatalf("the second call answers %v on an invalidation, want [1 4]", got)
	}
	if inv := rep.Sessions[0].Reply.Invalidations; len(inv) != 1 {
		t.Fatalf("session 1's result carries invalidations %v, want /ls/c/f", inv)
	}
	// Three calls of a session at once: the earliest is answered.
	var d, e replies
	lt.keepAliveMany(&c, 3, "p", entries(2, 3))
	lt.keepAliveMany(&d, 4, "p", entries(2))
	lt.keepAliveMany(&e, 5, "p", entries(2))
	if got := sessionsOf(manyReply(t, &c, 3)); !slices.Equal(got, []uint64{2, 3}) {
		t.Fatalf("a third call of session 2: the first answers %v, want [2 3]", got)
	}
	if len(d.all())+len(e.all()) != 0 {
		t.Fatalf("the later calls were answered early: %+v %+v", d.all(), e.all())
	}
	// Both keep the session alive, each answered at its hold.
	clk.Advance(hold)
	if got := sessionsOf(manyReply(t, &d, 4)); !slices.Equal(got, []uint64{2}) {
		t.Fatalf("the second of three answers %v, want [2]", got)
	}
	if got := sessionsOf(manyReply(t, &e, 5)); !slices.Equal(got, []uint64{2}) {
		t.Fatalf("the third of three answers %v, want [2]", got)
	}
}
