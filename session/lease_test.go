package session

import (
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

// Chubby §2.8: the client requests a lease interval; DESIGN.md defaults: 12 s,
// and a client may ask for 250 ms–60 s (issue 16 lowered DESIGN.md's 1 s).
func TestNegotiateTTL(t *testing.T) {
	for _, c := range []struct{ in, want time.Duration }{
		{0, DefaultTTL},
		{-time.Second, DefaultTTL},
		{-1 << 63, DefaultTTL},
		{1, MinTTL},
		{249 * time.Millisecond, MinTTL},
		{250 * time.Millisecond, 250 * time.Millisecond},
		{999 * time.Millisecond, 999 * time.Millisecond},
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
	if DefaultTTL != 12*time.Second || MinTTL != 250*time.Millisecond || MaxTTL != time.Minute || DefaultGrace != 45*time.Second {
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
		{250 * time.Millisecond, 15 * time.Millisecond},
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
	for ttl := MinTTL; ttl <= MaxTTL; ttl += 50 * time.Millisecond {
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

// TestRenewInterval: the client sends its next KeepAlive within
// [TTL/3 − 20 %, TTL/3] of the last, so two consecutive sends and the
// answer to the second fit in the local lease with at least TTL/3 − drift
// to spare for the round trip.
func TestRenewInterval(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, ttl := range []time.Duration{MinTTL, time.Second, DefaultTTL, MaxTTL} {
		third := ttl / 3
		lo := third - third/5
		var sum time.Duration
		const n = 5000
		for range n {
			d := RenewInterval(ttl, r)
			if d < lo || d > third {
				t.Fatalf("ttl %v: interval %v outside [%v, %v]", ttl, d, lo, third)
			}
			sum += d
		}
		if mean := sum / n; mean < lo+third/20 || mean > third-third/20 {
			t.Errorf("ttl %v: mean interval %v is not spread over [%v, %v]", ttl, mean, lo, third)
		}
		if spare := ttl - DriftMargin(ttl) - 2*third; spare < ttl/4 {
			t.Errorf("ttl %v: only %v left for a round trip", ttl, spare)
		}
	}
}

// TestKeepAliveManyHold: a KeepAliveMany is answered before the shortest
// interval after which any of its sessions sends its next KeepAlive (which
// would answer it early, for all of them), with a tenth of that interval
// to spare for the gather window and the round trip.
func TestKeepAliveManyHold(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for _, ttl := range []time.Duration{MinTTL, time.Second, DefaultTTL, MaxTTL} {
		shortest := ttl
		for range 5000 {
			shortest = min(shortest, RenewInterval(ttl, r))
		}
		if hold := KeepAliveManyHold(ttl); hold <= 0 || hold+shortest/10 > shortest {
			t.Errorf("ttl %v: hold %v, the shortest renewal interval %v; want the hold under 90 %% of it", ttl, hold, shortest)
		}
	}
}
