package session

import "time"

// ManualClock is a Clock that moves only when Advance or Set is called.
// Timers fire in deadline order during Advance; AfterFunc callbacks run
// synchronously on the advancing goroutine (after the clock's lock is
// released), so a test that advances the clock observes their effects as soon
// as Advance returns.
type ManualClock struct {
	timerSet
	now time.Time
	seq uint64
}

// NewManualClock returns a ManualClock set to start.
func NewManualClock(start time.Time) *ManualClock { return &ManualClock{now: start} }

// Now returns the clock's current time.
func (c *ManualClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// AfterFunc schedules f to run when the clock passes now+d.
func (c *ManualClock) AfterFunc(d time.Duration, f func()) Timer {
	t := &testTimer{q: c, f: f}
	c.mu.Lock()
	c.armLocked(t, d)
	c.mu.Unlock()
	return t
}

// NewTimer returns a timer whose channel receives when the clock passes now+d.
func (c *ManualClock) NewTimer(d time.Duration) Timer {
	t := &testTimer{q: c, ch: make(chan time.Time, 1)}
	c.mu.Lock()
	c.armLocked(t, d)
	c.mu.Unlock()
	return t
}

// Advance moves the clock forward by d, firing every timer that falls due on
// the way, in deadline order, with the clock set to each deadline in turn.
func (c *ManualClock) Advance(d time.Duration) {
	c.mu.Lock()
	target := c.now.Add(d)
	c.mu.Unlock()
	c.Set(target)
}

// Set moves the clock to t (which may be in the past: a backwards jump),
// firing the timers due by then.
func (c *ManualClock) Set(t time.Time) {
	for {
		c.mu.Lock()
		next := c.nextLocked()
		if next == nil || next.when.After(t) {
			c.now = t
			c.mu.Unlock()
			return
		}
		c.removeLocked(next)
		if next.when.After(c.now) {
			c.now = next.when
		}
		// A channel value is sent under the lock, so that a concurrent
		// Stop or Reset either sees the timer pending or drains it.
		f := next.deliver(c.now)
		c.mu.Unlock()
		if f != nil {
			f()
		}
	}
}

// armLocked queues t; nothing is due before the clock is moved, so it
// returns no callback.
func (c *ManualClock) armLocked(t *testTimer, d time.Duration) []func() {
	c.seq++
	t.when, t.seq = c.now.Add(d), c.seq
	c.addLocked(t)
	return nil
}

func (c *ManualClock) disarmLocked(t *testTimer) bool { return c.removeLocked(t) }

// nextLocked is the armed timer due first (the first armed among those
// due at once), or nil.
func (c *ManualClock) nextLocked() *testTimer {
	var next *testTimer
	for t := range c.timers {
		if next == nil || t.when.Before(next.when) || t.when.Equal(next.when) && t.seq < next.seq {
			next = t
		}
	}
	return next
}
