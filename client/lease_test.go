package client

import (
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/chubby-dev/chubby/session"
	"pgregory.net/rapid"
)

var leaseT0 = time.Date(2024, 1, 2, 3, 4, 5, 0, time.UTC)

func TestNewLease(t *testing.T) {
	clk := session.NewManualClock(leaseT0)
	sent := clk.Now()
	l := newLease(sent, session.DefaultTTL, 0)
	if l.Grace != session.DefaultGrace {
		t.Errorf("grace 0 → %v, want the default %v", l.Grace, session.DefaultGrace)
	}
	if want := sent.Add(session.DefaultTTL - session.DriftMargin(session.DefaultTTL)); !l.Expiry().Equal(want) {
		t.Errorf("Expiry = %v, want send time + TTL - drift = %v", l.Expiry(), want)
	}
	if !l.GraceEnd().Equal(l.Expiry().Add(session.DefaultGrace)) {
		t.Errorf("GraceEnd = %v", l.GraceEnd())
	}
	if l.State() != SessionSafe || !l.Valid(sent) {
		t.Errorf("a new lease is %v, valid=%v", l.State(), l.Valid(sent))
	}
	if l2 := newLease(sent, 5*time.Second, 10*time.Second); l2.Grace != 10*time.Second || l2.TTL != 5*time.Second {
		t.Errorf("explicit grace/TTL: %+v", l2)
	}
}

// DESIGN.md invariant 3 (Chubby §2.8): the client's local lease starts when
// it sent the KeepAlive and is shortened by the drift margin, so it ends
// strictly before the master's view of the same lease, which the master
// extended when it received the request (now+TTL) — whatever the network
// delay, and even if the client's clock runs up to 2 % slow.
func TestLocalLeaseEndsBeforeMasters(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		ttl := session.NegotiateTTL(time.Duration(rapid.Int64Range(0, int64(2*session.MaxTTL)).Draw(t, "ttl")))
		sentReal := leaseT0.Add(time.Duration(rapid.Int64Range(0, int64(time.Hour)).Draw(t, "sent")))
		delay := time.Duration(rapid.Int64Range(0, int64(ttl)).Draw(t, "network delay"))
		recvReal := sentReal.Add(delay)
		masterEnd := recvReal.Add(ttl)

		// Same clock rates: the local expiry is an instant on the shared timeline.
		l := newLease(sentReal, ttl, 0)
		if !l.Expiry().Before(masterEnd) {
			t.Fatalf("local lease ends %v, master's at %v", l.Expiry(), masterEnd)
		}
		// A renewal: same again.
		sent2 := recvReal.Add(session.KeepAliveHold(ttl, rand.New(rand.NewPCG(1, 1))))
		l.Renewed(sent2, ttl)
		if master2 := sent2.Add(delay).Add(ttl); !l.Expiry().Before(master2) {
			t.Fatalf("renewed local lease ends %v, master's at %v", l.Expiry(), master2)
		}

		// A client clock running slow by rate r measures the local lease as
		// (TTL - drift) of its own time, which is (TTL - drift)/r of real time.
		rate := 1 - float64(rapid.IntRange(0, 200).Draw(t, "slow ‱"))/10000
		localLen := l.Expiry().Sub(sent2)
		realEnd := sent2.Add(time.Duration(float64(localLen) / rate))
		if !realEnd.Before(sent2.Add(delay).Add(ttl)) {
			t.Fatalf("client %.2f%% slow: local lease ends at %v real, master's at %v",
				(1-rate)*100, realEnd.Sub(sent2), delay+ttl)
		}
	})
}

// DESIGN.md invariant 4 (Chubby §2.8): when the local lease runs out the
// client is in jeopardy; after the grace period it is expired.
func TestLeaseCheckTransitions(t *testing.T) {
	clk := session.NewManualClock(leaseT0)
	l := newLease(clk.Now(), session.DefaultTTL, session.DefaultGrace)
	expiry := l.Expiry()

	clk.Set(expiry.Add(-time.Nanosecond))
	if s := l.Check(clk.Now()); s != SessionSafe {
		t.Fatalf("just before expiry: %v", s)
	}
	if !l.Valid(clk.Now()) || l.Remaining(clk.Now()) != time.Nanosecond {
		t.Fatalf("just before expiry: valid=%v remaining=%v", l.Valid(clk.Now()), l.Remaining(clk.Now()))
	}
	clk.Set(expiry)
	if l.Valid(clk.Now()) || l.Remaining(clk.Now()) != 0 {
		t.Fatal("the lease is valid at its expiry, before Check")
	}
	if s := l.Check(clk.Now()); s != SessionJeopardy {
		t.Fatalf("at expiry: %v, want jeopardy", s)
	}
	clk.Set(l.GraceEnd().Add(-time.Nanosecond))
	if s := l.Check(clk.Now()); s != SessionJeopardy {
		t.Fatalf("just before the grace period ends: %v", s)
	}
	if l.Valid(clk.Now()) || l.Remaining(clk.Now()) != 0 {
		t.Fatal("valid in jeopardy")
	}
	clk.Set(l.GraceEnd())
	if s := l.Check(clk.Now()); s != SessionExpired {
		t.Fatalf("at the end of grace: %v, want expired", s)
	}
	// SessionExpired is terminal: not even a clock step backwards revives it.
	clk.Set(leaseT0)
	if s := l.Check(clk.Now()); s != SessionExpired || l.Valid(clk.Now()) {
		t.Fatalf("after a backwards step: %v valid=%v", s, l.Valid(clk.Now()))
	}

	// A client that does not look for a long time goes straight to expired.
	l2 := newLease(leaseT0, session.DefaultTTL, session.DefaultGrace)
	if s := l2.Check(l2.GraceEnd().Add(time.Hour)); s != SessionExpired {
		t.Fatalf("checked long after grace: %v", s)
	}
	// Check never moves backwards on its own either.
	l3 := newLease(leaseT0, session.DefaultTTL, session.DefaultGrace)
	l3.Check(l3.Expiry())
	if s := l3.Check(leaseT0); s != SessionJeopardy {
		t.Fatalf("jeopardy then an earlier time: %v", s)
	}
}

func TestLeaseRenewed(t *testing.T) {
	clk := session.NewManualClock(leaseT0)
	l := newLease(clk.Now(), session.DefaultTTL, session.DefaultGrace)

	// Renewed while safe: returns SessionSafe, the lease now counts from the new send time.
	clk.Advance(4 * time.Second)
	sent := clk.Now()
	clk.Advance(100 * time.Millisecond) // the reply's network delay
	if before := l.Renewed(sent, session.DefaultTTL); before != SessionSafe {
		t.Fatalf("Renewed while safe returned %v", before)
	}
	if want := sent.Add(session.DefaultTTL - session.DriftMargin(session.DefaultTTL)); !l.Expiry().Equal(want) {
		t.Fatalf("Expiry %v, want %v", l.Expiry(), want)
	}
	// A late reply to an older KeepAlive never shortens the lease.
	old := l.Expiry()
	l.Renewed(leaseT0.Add(time.Second), session.DefaultTTL)
	if !l.Expiry().Equal(old) {
		t.Fatalf("an older renewal moved the expiry to %v", l.Expiry())
	}
	// A renewal with another TTL uses that TTL and its drift margin.
	sent = clk.Now()
	l.Renewed(sent, 30*time.Second)
	if want := sent.Add(30*time.Second - session.DriftMargin(30*time.Second)); l.TTL != 30*time.Second || !l.Expiry().Equal(want) {
		t.Fatalf("TTL %v expiry %v, want 30s and %v", l.TTL, l.Expiry(), want)
	}

	// Into jeopardy, then a KeepAlive gets through during the grace period:
	// Renewed reports SessionJeopardy so that the caller emits `safe`.
	clk.Set(l.Expiry().Add(10 * time.Second))
	if l.Check(clk.Now()) != SessionJeopardy {
		t.Fatal("not in jeopardy")
	}
	sent = clk.Now()
	clk.Advance(50 * time.Millisecond)
	if before := l.Renewed(sent, session.DefaultTTL); before != SessionJeopardy {
		t.Fatalf("Renewed in jeopardy returned %v, want jeopardy", before)
	}
	if l.State() != SessionSafe || l.Check(clk.Now()) != SessionSafe || !l.Valid(clk.Now()) {
		t.Fatalf("after the renewal: %v valid=%v", l.State(), l.Valid(clk.Now()))
	}
	if want := sent.Add(session.DefaultTTL - session.DriftMargin(session.DefaultTTL)); l.Remaining(clk.Now()) != want.Sub(clk.Now()) {
		t.Fatalf("Remaining %v, want %v", l.Remaining(clk.Now()), want.Sub(clk.Now()))
	}
	if !l.GraceEnd().Equal(l.Expiry().Add(session.DefaultGrace)) {
		t.Fatal("the grace period does not follow the renewed lease")
	}

	// A renewal whose lease is already over when it arrives makes the state
	// SessionSafe only until the next Check.
	clk.Set(l.Expiry().Add(time.Second))
	l.Check(clk.Now())
	l.Renewed(clk.Now().Add(-session.DefaultTTL), session.DefaultTTL)
	if l.Valid(clk.Now()) || l.Check(clk.Now()) != SessionJeopardy {
		t.Fatal("a renewal that ended in the past made the lease valid")
	}

	// Past the grace period: expired, and no renewal brings it back.
	clk.Set(l.GraceEnd())
	if l.Check(clk.Now()) != SessionExpired {
		t.Fatal("not expired")
	}
	exp := l.Expiry()
	if before := l.Renewed(clk.Now(), session.DefaultTTL); before != SessionExpired {
		t.Fatalf("Renewed after expiry returned %v", before)
	}
	if l.State() != SessionExpired || !l.Expiry().Equal(exp) || l.Valid(clk.Now()) {
		t.Fatalf("an expired lease was renewed: %v %v", l.State(), l.Expiry())
	}
}

// The master may declare the session gone (Chubby §2.8: the session ended,
// or a new master did not know it): Expire is terminal.
func TestLeaseExpire(t *testing.T) {
	l := newLease(leaseT0, session.DefaultTTL, session.DefaultGrace)
	l.Expire()
	if l.State() != SessionExpired || l.Check(leaseT0) != SessionExpired || l.Valid(leaseT0) || l.Remaining(leaseT0) != 0 {
		t.Fatalf("after Expire: %v valid=%v remaining=%v", l.State(), l.Valid(leaseT0), l.Remaining(leaseT0))
	}
	if before := l.Renewed(leaseT0.Add(time.Second), session.DefaultTTL); before != SessionExpired || l.State() != SessionExpired {
		t.Fatalf("Renewed after Expire: %v → %v", before, l.State())
	}
}

// A client's KeepAlive loop driven by a ManualClock: renewals at about TTL/3
// keep the session safe indefinitely; when the master stops answering the
// client enters jeopardy at the end of its local lease, retries with
// backoff, and is expired at the end of the grace period unless a retry gets
// through first (Chubby §2.8, DESIGN.md invariants 3 and 4).
func TestLeaseKeepAliveLoop(t *testing.T) {
	const delay = 30 * time.Millisecond // one-way network delay
	for _, reachableAgainAfter := range []time.Duration{-1, 20 * time.Second} {
		clk := session.NewManualClock(leaseT0)
		r := rand.New(rand.NewPCG(3, 4))
		ttl := session.NegotiateTTL(0)
		masterEnd := clk.Now().Add(delay).Add(ttl)
		l := newLease(clk.Now(), ttl, 0)
		var events []string

		// 50 healthy rounds: the master holds each KeepAlive ~TTL/3 and
		// answers with a fresh lease that it extended on receipt.
		for i := 0; i < 50; i++ {
			sent := clk.Now()
			clk.Advance(delay)
			masterEnd = clk.Now().Add(ttl)
			clk.Advance(session.KeepAliveHold(ttl, r) + delay)
			if s := l.Check(clk.Now()); s != SessionSafe {
				t.Fatalf("round %d: %v", i, s)
			}
			l.Renewed(sent, ttl)
			if !l.Expiry().Before(masterEnd) {
				t.Fatalf("round %d: local lease %v outlives the master's %v", i, l.Expiry(), masterEnd)
			}
		}

		// The master becomes unreachable.
		down := clk.Now()
		b := &session.Backoff{Base: 100 * time.Millisecond, Max: 2 * time.Second}
		for {
			clk.Advance(b.Next(r))
			s := l.Check(clk.Now())
			if len(events) == 0 || events[len(events)-1] != s.String() {
				events = append(events, s.String())
			}
			if s == SessionJeopardy && !clk.Now().Before(masterEnd) {
				// The master's view has ended too: it may expire the session
				// (and free its locks) only now — the client never thought it
				// held them past this point.
				if l.Valid(clk.Now()) {
					t.Fatal("client lease valid after the master's ended")
				}
			}
			if s == SessionExpired {
				break
			}
			if reachableAgainAfter > 0 && clk.Now().Sub(down) >= reachableAgainAfter {
				if before := l.Renewed(clk.Now(), ttl); before == SessionJeopardy {
					events = append(events, "safe")
				}
				break
			}
		}
		want := "safe jeopardy expired"
		if reachableAgainAfter > 0 {
			want = "safe jeopardy safe"
		}
		if got := strings.Join(events, " "); got != want {
			t.Errorf("reachable again after %v: events %q, want %q", reachableAgainAfter, got, want)
		}
		if reachableAgainAfter < 0 && clk.Now().Before(l.GraceEnd()) {
			t.Errorf("expired at %v, before the grace period ended at %v", clk.Now(), l.GraceEnd())
		}
	}
}
