package session

import (
	"fmt"
	"math"
	"time"
)

// SkewClock is a Clock over the real clock that a test can skew
// while the program using it runs: its rate can differ from real time
// (SetRate: drift), it can jump forward (Jump), and it can stand still
// (Freeze) and then catch up at once (Unfreeze) — what a stopped process
// sees of its monotonic clock when it resumes.
//
// Readings never go backward: the lease clocks of the design are monotonic,
// so Jump refuses a negative step and a rate must be positive.
//
// Timers honour every change. A timer fires once the clock (not real time)
// reaches its deadline, never before: a rate change re-arms every pending
// timer for the new rate; a Jump fires at once every timer the jump carried
// past its deadline; while the clock is frozen nothing fires, and Unfreeze
// fires at once what fell due meanwhile. Channel timers (NewTimer) have
// their value in the channel when Jump or Unfreeze returns; AfterFunc
// callbacks run in their own goroutines, as time.AfterFunc's do. Stop and
// Reset follow *time.Timer since Go 1.23 (no stale value after them).
//
// A SkewClock is safe for concurrent use.
type SkewClock struct {
	// While running, the reading is base + rate × (real time since
	// realBase).
	base     time.Time
	realBase time.Time
	rate     float64
	frozen   int       // Freeze depth
	frozenAt time.Time // the reading while frozen
	timerSet
}

var _ Clock = (*SkewClock)(nil)

// NewSkewClock returns a clock that reads start now and runs at real speed.
func NewSkewClock(start time.Time) *SkewClock {
	return &SkewClock{base: start.Round(0), realBase: time.Now(), rate: 1}
}

// running is the reading of the unfrozen clock; c.mu is held.
func (c *SkewClock) running() time.Time {
	return c.base.Add(time.Duration(float64(time.Since(c.realBase)) * c.rate))
}

func (c *SkewClock) nowLocked() time.Time {
	if c.frozen > 0 {
		return c.frozenAt
	}
	return c.running()
}

// Now returns the clock's reading.
func (c *SkewClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.nowLocked()
}

// Rate is the clock's current rate (1: real speed).
func (c *SkewClock) Rate() float64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.rate
}

// Frozen reports whether the clock stands still.
func (c *SkewClock) Frozen() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.frozen > 0
}

// SetRate makes the clock advance rate seconds per real second from now on
// (rate > 0; 1 is real speed). Pending timers are re-armed for the new
// rate. While the clock is frozen the rate takes effect when it thaws (the
// frozen time counts at the new rate too).
func (c *SkewClock) SetRate(rate float64) {
	if !(rate > 0) || math.IsInf(rate, 0) {
		panic(fmt.Sprintf("session: SkewClock rate %v: must be positive and finite", rate))
	}
	c.mu.Lock()
	c.base, c.realBase = c.running(), time.Now()
	c.rate = rate
	fire := c.rescheduleLocked()
	c.mu.Unlock()
	goAll(fire)
}

// Jump moves the clock forward by d (d ≥ 0) at once. Every timer whose
// deadline the jump reaches fires now. On a frozen clock the reading moves
// too, but nothing fires before Unfreeze.
func (c *SkewClock) Jump(d time.Duration) {
	if d < 0 {
		panic(fmt.Sprintf("session: SkewClock.Jump(%v): a monotonic clock never goes back", d))
	}
	c.mu.Lock()
	c.base = c.base.Add(d)
	if c.frozen > 0 {
		c.frozenAt = c.frozenAt.Add(d)
	}
	fire := c.rescheduleLocked()
	c.mu.Unlock()
	goAll(fire)
}

// Freeze stops the clock: it reads the same until Unfreeze, and no timer
// fires. Freezes nest: the clock runs again after as many Unfreeze calls.
func (c *SkewClock) Freeze() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.frozen == 0 {
		c.frozenAt = c.running()
	}
	c.frozen++
	c.rescheduleLocked() // stops every real timer; nothing is due while frozen
}

// Unfreeze undoes one Freeze. When the last is undone the clock reads what
// it would have read had it never stopped — it jumps forward by the time it
// stood still, at its rate — and every timer that fell due meanwhile fires
// at once.
func (c *SkewClock) Unfreeze() {
	c.mu.Lock()
	if c.frozen == 0 {
		c.mu.Unlock()
		panic("session: SkewClock.Unfreeze without Freeze")
	}
	c.frozen--
	var fire []func()
	if c.frozen == 0 {
		fire = c.rescheduleLocked()
	}
	c.mu.Unlock()
	goAll(fire)
}

// AfterFunc calls f in its own goroutine once the clock has advanced d.
func (c *SkewClock) AfterFunc(d time.Duration, f func()) Timer {
	t := &testTimer{q: c, f: f}
	c.mu.Lock()
	fire := c.armLocked(t, d)
	c.mu.Unlock()
	goAll(fire)
	return t
}

// NewTimer returns a timer whose channel receives the clock's reading once
// the clock has advanced d.
func (c *SkewClock) NewTimer(d time.Duration) Timer {
	t := &testTimer{q: c, ch: make(chan time.Time, 1)}
	c.mu.Lock()
	c.armLocked(t, d) // a channel timer due now is served under the lock
	c.mu.Unlock()
	return t
}

// armLocked arms t to fire d from now and returns the callbacks due at once.
func (c *SkewClock) armLocked(t *testTimer, d time.Duration) []func() {
	t.when = c.nowLocked().Add(d)
	c.addLocked(t)
	return c.scheduleLocked(t)
}

func (c *SkewClock) disarmLocked(t *testTimer) bool {
	if !c.removeLocked(t) {
		return false
	}
	t.gen++
	if t.real != nil {
		t.real.Stop()
		t.real = nil
	}
	return true
}

// scheduleLocked starts the real timer of an armed t, or fires t now if it
// is due; it returns the AfterFunc callback to run (outside the lock).
func (c *SkewClock) scheduleLocked(t *testTimer) []func() {
	t.gen++
	if t.real != nil {
		t.real.Stop()
		t.real = nil
	}
	if c.frozen > 0 {
		return nil
	}
	now := c.running()
	if !now.Before(t.when) {
		return c.fireLocked(t, now)
	}
	// Real time to wait, rounded up so the timer is never early.
	wait := time.Duration(math.Ceil(float64(t.when.Sub(now)) / c.rate))
	gen := t.gen
	t.real = time.AfterFunc(wait, func() { c.expire(t, gen) })
	return nil
}

// fireLocked disarms t and delivers it: a channel value under the lock, a
// callback returned to be run outside it.
func (c *SkewClock) fireLocked(t *testTimer, now time.Time) []func() {
	c.removeLocked(t)
	t.gen++
	t.real = nil
	if f := t.deliver(now); f != nil {
		return []func(){f}
	}
	return nil
}

// rescheduleLocked re-arms every pending timer after a change of the
// mapping to real time and returns the callbacks now due.
func (c *SkewClock) rescheduleLocked() []func() {
	var fire []func()
	for t := range c.timers {
		fire = append(fire, c.scheduleLocked(t)...)
	}
	return fire
}

// expire runs when the real timer of arming gen ends.
func (c *SkewClock) expire(t *testTimer, gen uint64) {
	c.mu.Lock()
	if !t.armed || t.gen != gen || c.frozen > 0 {
		c.mu.Unlock()
		return
	}
	// Usually due now; if not (rounding), scheduleLocked re-arms it.
	fire := c.scheduleLocked(t)
	c.mu.Unlock()
	for _, f := range fire {
		f() // already on the real timer's own goroutine
	}
}
