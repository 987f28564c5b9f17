package session

import (
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"
)

// Chubby §2.8: the client requests a lease interval; DESIGN.md defaults: 12 s,
// and a client may ask for 1 s–60 s.
func TestNegotiateTTL(t *testing.T) {
	for _, c := range []struct{ in, want time.Duration }{
		{0, DefaultTTL},
		{-time.Second, DefaultTTL},
		{-1 << 63, DefaultTTL},
		{1, MinTTL},
		{999 * time.Millisecond, MinTTL},
		{time.Second, time.Second},
		{1500 * time.Millisecond, 1500 * time.Millisecond},
		{12 * time.Second, 12 * time.Second},
		{60 * time.Second, 60 * time.Second},
		{60*time.Second + 1, MaxTTL},
		{time.Hour, MaxTTL},
		{1<<63 - 1, MaxTTL},
	} {
		if got := NegotiateTTL(c.in); got != c.want {
			t.Errorf("NegotiateTTL(%v) = %v, want %v", c.in, got, c.want)
		}
	}
	if DefaultTTL != 12*time.Second || MinTTL != time.Second || MaxTTL != time.Minute || DefaultGrace != 45*time.Second {
		t.Error("defaults differ from DESIGN.md")
	}
}

// Chubby §2.4 lock-delay: the holder chooses it, bounded (DESIGN.md: default
// 15 s, at most 60 s).
func TestValidateLockDelay(t *testing.T) {
	for _, c := range []struct {
		in, want time.Duration
		ok       bool
	}{
		{-1, DefaultLockDelay, true},
		{-time.Hour, DefaultLockDelay, true},
		{0, 0, true},
		{time.Second, time.Second, true},
		{60 * time.Second, 60 * time.Second, true},
		{60*time.Second + 1, 0, false},
		{time.Hour, 0, false},
	} {
		got, err := ValidateLockDelay(c.in)
		if (err == nil) != c.ok || got != c.want {
			t.Errorf("ValidateLockDelay(%v) = %v, %v; want %v, ok=%v", c.in, got, err, c.want, c.ok)
		}
		if err != nil && (!strings.Contains(err.Error(), c.in.String()) || !strings.Contains(err.Error(), MaxLockDelay.String())) {
			t.Errorf("error %q does not name the value and the limit", err)
		}
	}
	if DefaultLockDelay != 15*time.Second || MaxLockDelay != 60*time.Second {
		t.Error("lock-delay defaults differ from DESIGN.md")
	}
}

func TestDriftMargin(t *testing.T) {
	for _, c := range []struct{ ttl, want time.Duration }{
		{time.Second, 30 * time.Millisecond},
		{12 * time.Second, 250 * time.Millisecond},
		{60 * time.Second, 1210 * time.Millisecond},
	} {
		if got := DriftMargin(c.ttl); got != c.want {
			t.Errorf("DriftMargin(%v) = %v, want %v", c.ttl, got, c.want)
		}
	}
	// For every TTL the master can grant the margin is positive, at least
	// 2 % of the TTL and leaves most of the lease.
	for ttl := MinTTL; ttl <= MaxTTL; ttl += 250 * time.Millisecond {
		m := DriftMargin(ttl)
		if m <= 0 || m < ttl/50 || m >= ttl/10 {
			t.Errorf("DriftMargin(%v) = %v", ttl, m)
		}
	}
}

// DESIGN.md: renewal at TTL/3 with ±20 % jitter, so that renewals of many
// clients do not line up (Chubby §2.8: KeepAlives are held by the master and
// answered shortly before the previous lease would run out — we answer
// much earlier, at a third).
func TestKeepAliveHold(t *testing.T) {
	for _, ttl := range []time.Duration{MinTTL, DefaultTTL, 7 * time.Second, MaxTTL} {
		third := ttl / 3
		lo, hi := third-third/5, third+third/5
		var min, max, sum time.Duration
		const n = 20000
		for seed := uint64(0); seed < 20; seed++ {
			r := rand.New(rand.NewPCG(seed, seed*7+1))
			for i := 0; i < n/20; i++ {
				h := KeepAliveHold(ttl, r)
				if h < lo || h > hi {
					t.Fatalf("ttl %v seed %d: hold %v outside [%v, %v]", ttl, seed, h, lo, hi)
				}
				if h >= ttl-DriftMargin(ttl) {
					t.Fatalf("ttl %v: hold %v is not well inside the local lease", ttl, h)
				}
				if min == 0 || h < min {
					min = h
				}
				if h > max {
					max = h
				}
				sum += h
			}
		}
		// The jitter is really there, on both sides, and centred on TTL/3.
		if min > third-third/10 || max < third+third/10 {
			t.Errorf("ttl %v: holds span only [%v, %v] around %v", ttl, min, max, third)
		}
		if mean := sum / n; mean < third-third/50 || mean > third+third/50 {
			t.Errorf("ttl %v: mean hold %v, want about %v", ttl, mean, third)
		}
	}
	// Same seed, same holds: the jitter source is injected.
	a, b := rand.New(rand.NewPCG(1, 2)), rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 100; i++ {
		if KeepAliveHold(DefaultTTL, a) != KeepAliveHold(DefaultTTL, b) {
			t.Fatal("KeepAliveHold is not determined by its rand source")
		}
	}
}

func TestBackoff(t *testing.T) {
	const base, max = 100 * time.Millisecond, 2 * time.Second
	ceil := func(attempt int) time.Duration {
		d := base
		for i := 0; i < attempt; i++ {
			d *= 2
			if d > max {
				return max
			}
		}
		return d
	}
	for seed := uint64(0); seed < 50; seed++ {
		r := rand.New(rand.NewPCG(seed, 99))
		b := &Backoff{Base: base, Max: max}
		for round := 0; round < 2; round++ {
			for attempt := 0; attempt < 12; attempt++ {
				d := b.Next(r)
				c := ceil(attempt)
				if d < c/2 || d > c {
					t.Fatalf("seed %d round %d attempt %d: %v outside [%v, %v]", seed, round, attempt, d, c/2, c)
				}
			}
			b.Reset() // a success: the next failure starts from Base again
		}
	}
	// Growth: the ceilings double up to Max, and the draws follow them.
	r := rand.New(rand.NewPCG(5, 5))
	sums := make([]time.Duration, 8)
	for trial := 0; trial < 400; trial++ {
		b := &Backoff{Base: base, Max: max}
		for attempt := range sums {
			sums[attempt] += b.Next(r)
		}
	}
	for attempt := 1; attempt < len(sums); attempt++ {
		if ceil(attempt) > ceil(attempt-1) && sums[attempt] <= sums[attempt-1] {
			t.Errorf("attempt %d waits no longer on average than attempt %d", attempt, attempt-1)
		}
	}
	// The jitter spans its range.
	var lo, hi bool
	for i := 0; i < 1000; i++ {
		b := &Backoff{Base: time.Second, Max: time.Second}
		d := b.Next(r)
		lo = lo || d < 600*time.Millisecond
		hi = hi || d > 900*time.Millisecond
	}
	if !lo || !hi {
		t.Errorf("backoff jitter does not span [Base/2, Base]: low=%v high=%v", lo, hi)
	}
	// A Base above Max is capped at Max.
	b := &Backoff{Base: 10 * time.Second, Max: time.Second}
	if d := b.Next(r); d > time.Second || d < 500*time.Millisecond {
		t.Errorf("Base above Max: %v", d)
	}
	// Many failures never overflow.
	b = &Backoff{Base: time.Second, Max: time.Hour}
	for i := 0; i < 1000; i++ {
		if d := b.Next(r); d < 0 || d > time.Hour {
			t.Fatalf("attempt %d: %v", i, d)
		}
	}
}

func TestStateString(t *testing.T) {
	if Safe.String() != "safe" || Jeopardy.String() != "jeopardy" || Expired.String() != "expired" || State(9).String() != "State(9)" {
		t.Errorf("%v %v %v %v", Safe, Jeopardy, Expired, State(9))
	}
}

func TestNewLease(t *testing.T) {
	clk := NewManualClock(t0)
	sent := clk.Now()
	l := NewLease(sent, DefaultTTL, 0)
	if l.Grace != DefaultGrace {
		t.Errorf("grace 0 → %v, want the default %v", l.Grace, DefaultGrace)
	}
	if want := sent.Add(DefaultTTL - DriftMargin(DefaultTTL)); !l.Expiry().Equal(want) {
		t.Errorf("Expiry = %v, want send time + TTL - drift = %v", l.Expiry(), want)
	}
	if !l.GraceEnd().Equal(l.Expiry().Add(DefaultGrace)) {
		t.Errorf("GraceEnd = %v", l.GraceEnd())
	}
	if l.State() != Safe || !l.Valid(sent) {
		t.Errorf("a new lease is %v, valid=%v", l.State(), l.Valid(sent))
	}
	if l2 := NewLease(sent, 5*time.Second, 10*time.Second); l2.Grace != 10*time.Second || l2.TTL != 5*time.Second {
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
		ttl := NegotiateTTL(time.Duration(rapid.Int64Range(0, int64(2*MaxTTL)).Draw(t, "ttl")))
		sentReal := t0.Add(time.Duration(rapid.Int64Range(0, int64(time.Hour)).Draw(t, "sent")))
		delay := time.Duration(rapid.Int64Range(0, int64(ttl)).Draw(t, "network delay"))
		recvReal := sentReal.Add(delay)
		masterEnd := recvReal.Add(ttl)

		// Same clock rates: the local expiry is an instant on the shared timeline.
		l := NewLease(sentReal, ttl, 0)
		if !l.Expiry().Before(masterEnd) {
			t.Fatalf("local lease ends %v, master's at %v", l.Expiry(), masterEnd)
		}
		// A renewal: same again.
		sent2 := recvReal.Add(KeepAliveHold(ttl, rand.New(rand.NewPCG(1, 1))))
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
	clk := NewManualClock(t0)
	l := NewLease(clk.Now(), DefaultTTL, DefaultGrace)
	expiry := l.Expiry()

	clk.Set(expiry.Add(-time.Nanosecond))
	if s := l.Check(clk.Now()); s != Safe {
		t.Fatalf("just before expiry: %v", s)
	}
	if !l.Valid(clk.Now()) || l.Remaining(clk.Now()) != time.Nanosecond {
		t.Fatalf("just before expiry: valid=%v remaining=%v", l.Valid(clk.Now()), l.Remaining(clk.Now()))
	}
	clk.Set(expiry)
	if l.Valid(clk.Now()) || l.Remaining(clk.Now()) != 0 {
		t.Fatal("the lease is valid at its expiry, before Check")
	}
	if s := l.Check(clk.Now()); s != Jeopardy {
		t.Fatalf("at expiry: %v, want jeopardy", s)
	}
	clk.Set(l.GraceEnd().Add(-time.Nanosecond))
	if s := l.Check(clk.Now()); s != Jeopardy {
		t.Fatalf("just before the grace period ends: %v", s)
	}
	if l.Valid(clk.Now()) || l.Remaining(clk.Now()) != 0 {
		t.Fatal("valid in jeopardy")
	}
	clk.Set(l.GraceEnd())
	if s := l.Check(clk.Now()); s != Expired {
		t.Fatalf("at the end of grace: %v, want expired", s)
	}
	// Expired is terminal: not even a clock step backwards revives it.
	clk.Set(t0)
	if s := l.Check(clk.Now()); s != Expired || l.Valid(clk.Now()) {
		t.Fatalf("after a backwards step: %v valid=%v", s, l.Valid(clk.Now()))
	}

	// A client that does not look for a long time goes straight to expired.
	l2 := NewLease(t0, DefaultTTL, DefaultGrace)
	if s := l2.Check(l2.GraceEnd().Add(time.Hour)); s != Expired {
		t.Fatalf("checked long after grace: %v", s)
	}
	// Check never moves backwards on its own either.
	l3 := NewLease(t0, DefaultTTL, DefaultGrace)
	l3.Check(l3.Expiry())
	if s := l3.Check(t0); s != Jeopardy {
		t.Fatalf("jeopardy then an earlier time: %v", s)
	}
}

func TestLeaseRenewed(t *testing.T) {
	clk := NewManualClock(t0)
	l := NewLease(clk.Now(), DefaultTTL, DefaultGrace)

	// Renewed while safe: returns Safe, the lease now counts from the new send time.
	clk.Advance(4 * time.Second)
	sent := clk.Now()
	clk.Advance(100 * time.Millisecond) // the reply's network delay
	if before := l.Renewed(sent, DefaultTTL); before != Safe {
		t.Fatalf("Renewed while safe returned %v", before)
	}
	if want := sent.Add(DefaultTTL - DriftMargin(DefaultTTL)); !l.Expiry().Equal(want) {
		t.Fatalf("Expiry %v, want %v", l.Expiry(), want)
	}
	// A late reply to an older KeepAlive never shortens the lease.
	old := l.Expiry()
	l.Renewed(t0.Add(time.Second), DefaultTTL)
	if !l.Expiry().Equal(old) {
		t.Fatalf("an older renewal moved the expiry to %v", l.Expiry())
	}
	// A renewal with another TTL uses that TTL and its drift margin.
	sent = clk.Now()
	l.Renewed(sent, 30*time.Second)
	if want := sent.Add(30*time.Second - DriftMargin(30*time.Second)); l.TTL != 30*time.Second || !l.Expiry().Equal(want) {
		t.Fatalf("TTL %v expiry %v, want 30s and %v", l.TTL, l.Expiry(), want)
	}

	// Into jeopardy, then a KeepAlive gets through during the grace period:
	// Renewed reports Jeopardy so that the caller emits `safe`.
	clk.Set(l.Expiry().Add(10 * time.Second))
	if l.Check(clk.Now()) != Jeopardy {
		t.Fatal("not in jeopardy")
	}
	sent = clk.Now()
	clk.Advance(50 * time.Millisecond)
	if before := l.Renewed(sent, DefaultTTL); before != Jeopardy {
		t.Fatalf("Renewed in jeopardy returned %v, want jeopardy", before)
	}
	if l.State() != Safe || l.Check(clk.Now()) != Safe || !l.Valid(clk.Now()) {
		t.Fatalf("after the renewal: %v valid=%v", l.State(), l.Valid(clk.Now()))
	}
	if want := sent.Add(DefaultTTL - DriftMargin(DefaultTTL)); l.Remaining(clk.Now()) != want.Sub(clk.Now()) {
		t.Fatalf("Remaining %v, want %v", l.Remaining(clk.Now()), want.Sub(clk.Now()))
	}
	if !l.GraceEnd().Equal(l.Expiry().Add(DefaultGrace)) {
		t.Fatal("the grace period does not follow the renewed lease")
	}

	// A renewal whose lease is already over when it arrives makes the state
	// Safe only until the next Check.
	clk.Set(l.Expiry().Add(time.Second))
	l.Check(clk.Now())
	l.Renewed(clk.Now().Add(-DefaultTTL), DefaultTTL)
	if l.Valid(clk.Now()) || l.Check(clk.Now()) != Jeopardy {
		t.Fatal("a renewal that ended in the past made the lease valid")
	}

	// Past the grace period: expired, and no renewal brings it back.
	clk.Set(l.GraceEnd())
	if l.Check(clk.Now()) != Expired {
		t.Fatal("not expired")
	}
	exp := l.Expiry()
	if before := l.Renewed(clk.Now(), DefaultTTL); before != Expired {
		t.Fatalf("Renewed after expiry returned %v", before)
	}
	if l.State() != Expired || !l.Expiry().Equal(exp) || l.Valid(clk.Now()) {
		t.Fatalf("an expired lease was renewed: %v %v", l.State(), l.Expiry())
	}
}

// The master may declare the session gone (Chubby §2.8: the session ended,
// or a new master did not know it): Expire is terminal.
func TestLeaseExpire(t *testing.T) {
	l := NewLease(t0, DefaultTTL, DefaultGrace)
	l.Expire()
	if l.State() != Expired || l.Check(t0) != Expired || l.Valid(t0) || l.Remaining(t0) != 0 {
		t.Fatalf("after Expire: %v valid=%v remaining=%v", l.State(), l.Valid(t0), l.Remaining(t0))
	}
	if before := l.Renewed(t0.Add(time.Second), DefaultTTL); before != Expired || l.State() != Expired {
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
		clk := NewManualClock(t0)
		r := rand.New(rand.NewPCG(3, 4))
		ttl := NegotiateTTL(0)
		masterEnd := clk.Now().Add(delay).Add(ttl)
		l := NewLease(clk.Now(), ttl, 0)
		var events []string

		// 50 healthy rounds: the master holds each KeepAlive ~TTL/3 and
		// answers with a fresh lease that it extended on receipt.
		for i := 0; i < 50; i++ {
			sent := clk.Now()
			clk.Advance(delay)
			masterEnd = clk.Now().Add(ttl)
			clk.Advance(KeepAliveHold(ttl, r) + delay)
			if s := l.Check(clk.Now()); s != Safe {
				t.Fatalf("round %d: %v", i, s)
			}
			l.Renewed(sent, ttl)
			if !l.Expiry().Before(masterEnd) {
				t.Fatalf("round %d: local lease %v outlives the master's %v", i, l.Expiry(), masterEnd)
			}
		}

		// The master becomes unreachable.
		down := clk.Now()
		b := &Backoff{Base: 100 * time.Millisecond, Max: 2 * time.Second}
		for {
			clk.Advance(b.Next(r))
			s := l.Check(clk.Now())
			if len(events) == 0 || events[len(events)-1] != s.String() {
				events = append(events, s.String())
			}
			if s == Jeopardy && !clk.Now().Before(masterEnd) {
				// The master's view has ended too: it may expire the session
				// (and free its locks) only now — the client never thought it
				// held them past this point.
				if l.Valid(clk.Now()) {
					t.Fatal("client lease valid after the master's ended")
				}
			}
			if s == Expired {
				break
			}
			if reachableAgainAfter > 0 && clk.Now().Sub(down) >= reachableAgainAfter {
				if before := l.Renewed(clk.Now(), ttl); before == Jeopardy {
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
