package server

// Unit tests of the lease table on a manual clock, without raft or a
// server: expiry hand-out, renewal, the lifecycle, and the stall guard.

import (
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/chubby-dev/chubby/fs"
	"github.com/chubby-dev/chubby/session"
	"github.com/chubby-dev/chubby/wire"
)

const unitTTL = 12 * time.Second

var unitStart = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// fakeStall is a stallDetector that reports the stalls the test adds.
type fakeStall struct {
	mu     sync.Mutex
	stalls []stall
}

// add records a stall of the process from start to end.
func (f *fakeStall) add(start, end time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.stalls = append(f.stalls, stall{start, end})
}

func (f *fakeStall) stallsSince(now, since time.Time) []stall {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []stall
	for _, s := range f.stalls {
		if s.end.After(since) {
			out = append(out, s)
		}
	}
	return out
}

// skewClock is a manual clock whose Now runs ahead of its timers by skew:
// a timer then fires "late", as on a master that stalled.
type skewClock struct {
	*session.ManualClock
	skew atomic.Int64
}

func (c *skewClock) Now() time.Time { return c.ManualClock.Now().Add(time.Duration(c.skew.Load())) }

// replies records what a lease table answered on a connection.
type replies struct {
	mu  sync.Mutex
	got []replyRec
}

type replyRec struct {
	id   uint64
	body any
	err  error
	more bool // a push: the call stays open
}

func (r *replies) reply(id uint64, body any, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.got = append(r.got, replyRec{id: id, body: body, err: err})
}

func (r *replies) push(id uint64, body any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.got = append(r.got, replyRec{id: id, body: body, more: true})
}

func (r *replies) all() []replyRec {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.got)
}

func newUnitLeases(t *testing.T, clock session.Clock, stall stallDetector) *leaseTable {
	t.Helper()
	m := newMetrics()
	return newLeaseTable(clock, hclog.NewNullLogger(), stall,
		m.lease())
}

// expiredNow returns the sessions handed out as expired, checking that the
// Expired channel signals exactly when there are some.
func expiredNow(t *testing.T, lt *leaseTable) []uint64 {
	t.Helper()
	signalled := false
	select {
	case <-lt.Expired():
		signalled = true
	default:
	}
	ids := lt.TakeExpired()
	if signalled != (len(ids) > 0) {
		t.Fatalf("Expired signalled %v but TakeExpired gave %v", signalled, ids)
	}
	return ids
}

func wantExpired(t *testing.T, lt *leaseTable, want ...uint64) {
	t.Helper()
	got := expiredNow(t, lt)
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Fatalf("expired sessions %v, want %v", got, want)
	}
}

// TestLeaseExpiresAfterTTL: the id comes out of the table only once the
// TTL has passed on the clock, and the session then answers "being
// expired" (retry), not "expired", until the master removes it.
func TestLeaseExpiresAfterTTL(t *testing.T) {
	clk := session.NewManualClock(unitStart)
	lt := newUnitLeases(t, clk, &fakeStall{})
	lt.add(clk.Now(), 1, unitTTL, nil, "")
	lt.add(clk.Now(), 2, 2*unitTTL, nil, "")

	clk.Advance(unitTTL - time.Millisecond)
	wantExpired(t, lt)
	if err := lt.check(1); err != nil {
		t.Fatalf("session 1 before its TTL: %v", err)
	}
	clk.Advance(time.Millisecond)
	wantExpired(t, lt, 1)
	if err := lt.check(1); !errors.Is(err, wire.ErrUnavailable) || errors.Is(err, fs.ErrSessionExpired) {
		t.Fatalf("session 1 being expired: %v; want ErrUnavailable", err)
	}
	if err := lt.check(2); err != nil {
		t.Fatalf("session 2 (longer TTL): %v", err)
	}
	// Handed out once: the timer does not hand it out again.
	clk.Advance(unitTTL - time.Millisecond)
	wantExpired(t, lt)
	lt.remove(1)
	if err := lt.check(1); !errors.Is(err, fs.ErrSessionExpired) {
		t.Fatalf("session 1 removed: %v; want ErrSessionExpired", err)
	}
	clk.Advance(time.Millisecond)
	wantExpired(t, lt, 2)
}

// TestKeepAliveExtendsLease: a KeepAlive before the TTL runs out extends
// the lease to a full TTL from then.
func TestKeepAliveExtendsLease(t *testing.T) {
	clk := session.NewManualClock(unitStart)
	lt := newUnitLeases(t, clk, &fakeStall{})
	lt.add(clk.Now(), 1, unitTTL, nil, "")
	var r replies
	clk.Advance(unitTTL - time.Second)
	if err := lt.keepAlive(&r, 7, 1, true, 0, false); err != nil {
		t.Fatalf("KeepAlive: %v", err)
	}
	if got := r.all(); len(got) != 1 || got[0].id != 7 || got[0].err != nil {
		t.Fatalf("urgent KeepAlive replies %+v; want one lease reply to call 7", got)
	} else if rep := got[0].body.(wire.KeepAliveReply); rep.TTL != int64(unitTTL) {
		t.Fatalf("KeepAlive reply grants %v, want %v", time.Duration(rep.TTL), unitTTL)
	}
	clk.Advance(unitTTL - time.Millisecond)
	wantExpired(t, lt)
	clk.Advance(time.Millisecond)
	wantExpired(t, lt, 1)
	if err := lt.keepAlive(&r, 8, 1, true, 0, false); !errors.Is(err, wire.ErrUnavailable) {
		t.Fatalf("KeepAlive of a session being expired: %v; want ErrUnavailable", err)
	}
}

// TestParkedKeepAliveRenews: a KeepAlive that is not urgent parks; its hold
// ends within TTL/3 (+20 % jitter) with a reply that renews the lease, so a
// client that always has one parked never expires.
func TestParkedKeepAliveRenews(t *testing.T) {
	clk := session.NewManualClock(unitStart)
	lt := newUnitLeases(t, clk, &fakeStall{})
	lt.add(clk.Now(), 1, unitTTL, nil, "")
	var r replies
	maxHold := unitTTL/3 + unitTTL/15
	for i := range 10 {
		if err := lt.keepAlive(&r, uint64(i), 1, false, 0, false); err != nil {
			t.Fatalf("KeepAlive %d: %v", i, err)
		}
		if n := len(r.all()); n != i {
			t.Fatalf("KeepAlive %d answered before its hold", i)
		}
		clk.Advance(maxHold)
		if n := len(r.all()); n != i+1 {
			t.Fatalf("KeepAlive %d not answered within %v", i, maxHold)
		}
	}
	wantExpired(t, lt)
	if err := lt.check(1); err != nil {
		t.Fatalf("a session renewing by parked KeepAlives: %v", err)
	}
}

// TestDemoteClearsLeases: Demote drops every lease, answers parked polls
// with not_master, forgets expiries not yet taken, and no timer of a
// dropped lease fires later.
func TestDemoteClearsLeases(t *testing.T) {
	clk := session.NewManualClock(unitStart)
	lt := newUnitLeases(t, clk, &fakeStall{})
	lt.add(clk.Now(), 1, unitTTL, nil, "")
	lt.add(clk.Now(), 2, 2*unitTTL, nil, "")
	clk.Advance(unitTTL) // 1 runs out: its expiry waits to be taken
	var r replies
	if err := lt.keepAlive(&r, 9, 2, false, 0, false); err != nil {
		t.Fatal(err)
	}
	lt.Demote()
	wantExpired(t, lt)
	for _, id := range []uint64{1, 2} {
		if err := lt.check(id); !errors.Is(err, fs.ErrSessionExpired) {
			t.Fatalf("session %d after Demote: %v; want no lease", id, err)
		}
	}
	if got := r.all(); len(got) != 1 || got[0].id != 9 || !errors.Is(got[0].err, wire.ErrNotMaster) {
		t.Fatalf("parked KeepAlive answers after Demote: %+v; want one not_master to call 9", got)
	}
	clk.Advance(10 * unitTTL)
	wantExpired(t, lt)
	if n := len(r.all()); n != 1 {
		t.Fatalf("%d replies after Demote and 10 TTLs; a dropped poll's hold answered again", n)
	}
	if n := clk.Pending(); n != 0 {
		t.Fatalf("%d timers armed after Demote, want none", n)
	}
}

// TestPromoteGivesFreshLeases: a new master gives every session of the
// replicated state a full TTL from now, and holds writes for each until it
// has heard from it (unflushed).
func TestPromoteGivesFreshLeases(t *testing.T) {
	clk := session.NewManualClock(unitStart)
	lt := newUnitLeases(t, clk, &fakeStall{})
	lt.Promote(clk.Now(), []fs.SessionInfo{{ID: 1, TTL: int64(unitTTL)}, {ID: 2, TTL: int64(unitTTL)}})
	ws := lt.unflushed(2)
	if len(ws) != 1 || ws[0].session != 1 || !ws[0].deadline.Equal(unitStart.Add(unitTTL)) {
		t.Fatalf("unflushed except 2: %+v; want session 1 until %v", ws, unitStart.Add(unitTTL))
	}
	var r replies
	clk.Advance(time.Second)
	if err := lt.keepAlive(&r, 1, 1, true, 0, false); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ws[0].done:
	default:
		t.Fatal("session 1's KeepAlive did not end the wait for it")
	}
	if ws := lt.unflushed(0); len(ws) != 1 || ws[0].session != 2 {
		t.Fatalf("unflushed after session 1's KeepAlive: %+v; want only session 2", ws)
	}
	clk.Advance(unitTTL - time.Second - time.Millisecond)
	wantExpired(t, lt)
	clk.Advance(time.Millisecond)
	wantExpired(t, lt, 2)
	clk.Advance(time.Second)
	wantExpired(t, lt, 1)
}

// TestLateExpiryIsNotAStall (issue 17, finding 3): the expiry timer firing
// far later than a lease's end, with no stall seen by the stall monitor, is
// the master's own work running late (a flood of expiries), not a pause of
// the process: the session is expired, not given a fresh lease. (Before,
// a million leases ending together made their timers late, and each round
// of them was renewed for a stall that never happened.)
func TestLateExpiryIsNotAStall(t *testing.T) {
	clk := &skewClock{ManualClock: session.NewManualClock(unitStart)}
	lt := newUnitLeases(t, clk, &fakeStall{})
	lt.add(clk.Now(), 1, unitTTL, nil, "")
	clk.skew.Store(int64(stallThreshold + time.Second)) // the timer fires this late
	clk.Advance(unitTTL)
	wantExpired(t, lt, 1)
}

// TestManyLeasesEndTogether: leases that run out at once are handed out in
// one go by one timer (the table arms a single wake-up, whatever the
// number of leases), the renewed ones are kept and come up at their new
// end, and removed ones never come up.
func TestManyLeasesEndTogether(t *testing.T) {
	clk := session.NewManualClock(unitStart)
	lt := newUnitLeases(t, clk, &fakeStall{})
	const n = 3 * expireChunk // more than one hold of the lock
	var want []uint64
	for id := uint64(1); id <= n; id++ {
		lt.add(clk.Now(), id, unitTTL, nil, "")
	}
	if p := clk.Pending(); p != 1 {
		t.Fatalf("%d timers armed for %d leases; want 1", p, n)
	}
	clk.Advance(unitTTL / 2)
	var r replies
	for id := uint64(1); id <= n; id++ {
		switch id % 3 {
		case 0:
			if err := lt.keepAlive(&r, id, id, true, 0, false); err != nil {
				t.Fatal(err)
			}
		case 1:
			lt.remove(id)
		default:
			want = append(want, id)
		}
	}
	clk.Advance(unitTTL / 2)
	wantExpired(t, lt, want...)
	want = want[:0]
	for id := uint64(3); id <= n; id += 3 {
		want = append(want, id)
	}
	clk.Advance(unitTTL/2 - time.Millisecond)
	wantExpired(t, lt)
	clk.Advance(time.Millisecond)
	wantExpired(t, lt, want...)
}

// TestStallGivesBackLeaseTime: a stall of the process (the monitor saw it)
// gives a lease that ran out the lease time the stall took from it: a
// stall inside the lease's window moves its end back by the stall's
// length; a stall past its end leaves it, after the stall, the time it had
// left when the stall began. A lease renewed after a stall gets nothing for
// it, and an abandoned session still expires. An expiry already handed out
// is abandoned by graceAfterStall when a stall comes in before it is
// proposed.
func TestStallGivesBackLeaseTime(t *testing.T) {
	clk := session.NewManualClock(unitStart)
	stall := &fakeStall{}
	lt := newUnitLeases(t, clk, stall)
	t0 := clk.Now()
	lt.add(t0, 1, unitTTL, nil, "")
	lt.add(t0, 2, unitTTL, nil, "")
	clk.Advance(2 * time.Second)
	lt.add(clk.Now(), 3, unitTTL, nil, "") // renewed after the stall below

	// A 1 s stall inside the window of 1 and 2, before 3 was created.
	stall.add(t0.Add(time.Second), t0.Add(2*time.Second))
	clk.Advance(unitTTL - 2*time.Second) // t0+TTL: 1 and 2 ran out, less the stall
	wantExpired(t, lt)
	clk.Advance(time.Second - time.Millisecond)
	wantExpired(t, lt)
	clk.Advance(time.Millisecond) // t0+TTL+1s
	wantExpired(t, lt, 1, 2)
	clk.Advance(time.Second) // t0+2s+TTL: 3 gets nothing for a stall before it
	wantExpired(t, lt, 3)

	// The master is about to propose the expiries of 1 and 2 (at t0+14s)
	// when the monitor reports a stall from t0+12.5s, half a second before
	// their extended ends, to now: 2's expiry is off, and 2 has, after the
	// stall, the half second it had left when the stall began.
	if lt.graceAfterStall(1) {
		t.Fatal("graceAfterStall without a stall gave session 1 grace")
	}
	stall.add(t0.Add(unitTTL+time.Second/2), clk.Now())
	if !lt.graceAfterStall(2) {
		t.Fatal("graceAfterStall after a stall did not give session 2 grace")
	}
	if err := lt.check(2); err != nil {
		t.Fatalf("session 2 after grace: %v", err)
	}
	if err := lt.check(1); !errors.Is(err, wire.ErrUnavailable) {
		t.Fatalf("session 1 still being expired: %v", err)
	}
	clk.Advance(time.Second/2 - time.Millisecond)
	wantExpired(t, lt)
	clk.Advance(time.Millisecond)
	wantExpired(t, lt, 2)
}

// TestStallOfTheWholeLease: a stall far longer than the TTL (ten minutes)
// leaves a lease renewed just before it one TTL after the process runs
// again, not ten minutes more, and not none.
func TestStallOfTheWholeLease(t *testing.T) {
	clk := session.NewManualClock(unitStart)
	stall := &fakeStall{}
	lt := newUnitLeases(t, clk, stall)
	t0 := clk.Now()
	lt.add(t0, 1, unitTTL, nil, "")
	stall.add(t0, t0.Add(10*time.Minute))
	clk.Advance(10 * time.Minute)
	wantExpired(t, lt)
	clk.Advance(unitTTL - time.Millisecond)
	wantExpired(t, lt)
	clk.Advance(time.Millisecond)
	wantExpired(t, lt, 1)
}

// TestRetryExpiry: an expiry the master could not make (leadership not
// confirmed, the proposal failed) is abandoned: the session answers again,
// and its timer looks again later.
func TestRetryExpiry(t *testing.T) {
	clk := session.NewManualClock(unitStart)
	lt := newUnitLeases(t, clk, &fakeStall{})
	lt.add(clk.Now(), 1, unitTTL, nil, "")
	clk.Advance(unitTTL)
	wantExpired(t, lt, 1)
	lt.retryExpiry(1)
	if err := lt.check(1); err != nil {
		t.Fatalf("session after an abandoned expiry: %v", err)
	}
	// A renewal by a new master (not being expired) is left alone by a
	// late retry or grace of the old expiry.
	lt.Promote(clk.Now(), []fs.SessionInfo{{ID: 1, TTL: int64(unitTTL)}})
	lt.retryExpiry(1)
	if !lt.graceAfterStall(1) {
		t.Fatal("graceAfterStall of a lease not being expired: want the expiry off")
	}
	clk.Advance(unitTTL - time.Millisecond)
	wantExpired(t, lt)
	clk.Advance(time.Millisecond)
	wantExpired(t, lt, 1)
}

// TestDeadClientEndsTTLAfterLastKeepAlive (issue 16): a client that dies
// while its KeepAlive is parked gets no more lease from the reply it never
// reads. Its session ends exactly TTL after that KeepAlive arrived — not a
// hold later, as it did when answering extended the lease again.
func TestDeadClientEndsTTLAfterLastKeepAlive(t *testing.T) {
	clk := session.NewManualClock(unitStart)
	lt := newUnitLeases(t, clk, &fakeStall{})
	lt.add(clk.Now(), 1, unitTTL, nil, "")
	var r replies
	clk.Advance(time.Second)
	arrived := clk.Now()
	if err := lt.keepAlive(&r, 1, 1, false, 0, false); err != nil {
		t.Fatalf("KeepAlive: %v", err)
	}
	maxHold := unitTTL/3 + unitTTL/15
	clk.Advance(maxHold)
	if got := r.all(); len(got) != 1 || got[0].err != nil {
		t.Fatalf("parked KeepAlive: replies %+v, want one lease reply within %v", got, maxHold)
	}
	// The client is dead: nothing more arrives.
	clk.Advance(arrived.Add(unitTTL - time.Millisecond).Sub(clk.Now()))
	wantExpired(t, lt)
	clk.Advance(time.Millisecond)
	wantExpired(t, lt, 1)
}
