package session

import (
	"sort"
	"sync"
	"time"
)

// Clock is the source of time for every lease decision. Production code uses
// RealClock; tests use a ManualClock and advance it explicitly.
type Clock interface {
	// Now returns the current time. For RealClock it carries a monotonic
	// reading, so differences are immune to wall-clock steps.
	Now() time.Time
	// AfterFunc calls f in its own goroutine once d has elapsed.
	AfterFunc(d time.Duration, f func()) Timer
	// NewTimer returns a timer whose channel receives once d has elapsed.
	NewTimer(d time.Duration) Timer
}

// Timer is the subset of *time.Timer the project uses.
type Timer interface {
	// C is the channel of a timer made by NewTimer; nil for AfterFunc timers.
	C() <-chan time.Time
	// Stop prevents the timer from firing; it reports whether it was pending.
	Stop() bool
	// Reset re-arms the timer to fire after d; it reports whether it was pending.
	Reset(d time.Duration) bool
}

// RealClock is the Clock of the running system.
type RealClock struct{}

// Now returns time.Now().
func (RealClock) Now() time.Time { return time.Now() }

// AfterFunc wraps time.AfterFunc.
func (RealClock) AfterFunc(d time.Duration, f func()) Timer {
	return realTimer{t: time.AfterFunc(d, f)}
}

// NewTimer wraps time.NewTimer.
func (RealClock) NewTimer(d time.Duration) Timer { return realTimer{t: time.NewTimer(d)} }

type realTimer struct{ t *time.Timer }

func (r realTimer) C() <-chan time.Time        { return r.t.C }
func (r realTimer) Stop() bool                 { return r.t.Stop() }
func (r realTimer) Reset(d time.Duration) bool { return r.t.Reset(d) }

// ManualClock is a Clock that moves only when Advance or Set is called.
// Timers fire in deadline order during Advance; AfterFunc callbacks run
// synchronously on the advancing goroutine (after the clock's lock is
// released), so a test that advances the clock observes their effects as soon
// as Advance returns.
type ManualClock struct {
	mu     sync.Mutex
	now    time.Time
	timers []*manualTimer
	seq    uint64
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
	t := &manualTimer{c: c, f: f}
	c.mu.Lock()
	c.arm(t, d)
	c.mu.Unlock()
	return t
}

// NewTimer returns a timer whose channel receives when the clock passes now+d.
func (c *ManualClock) NewTimer(d time.Duration) Timer {
	t := &manualTimer{c: c, ch: make(chan time.Time, 1)}
	c.mu.Lock()
	c.arm(t, d)
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
		sort.SliceStable(c.timers, func(i, j int) bool { return c.timers[i].when.Before(c.timers[j].when) })
		if len(c.timers) == 0 || c.timers[0].when.After(t) {
			c.now = t
			c.mu.Unlock()
			return
		}
		next := c.timers[0]
		c.timers = c.timers[1:]
		next.armed = false
		if next.when.After(c.now) {
			c.now = next.when
		}
		if next.f == nil {
			// Send under the lock, so that a concurrent Stop or Reset
			// either sees the timer pending or drains this value.
			select {
			case next.ch <- c.now:
			default:
			}
			c.mu.Unlock()
			continue
		}
		c.mu.Unlock()
		next.f()
	}
}

// Pending reports how many timers are armed (useful in tests).
func (c *ManualClock) Pending() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.timers)
}

func (c *ManualClock) arm(t *manualTimer, d time.Duration) {
	c.seq++
	t.when = c.now.Add(d)
	t.armed = true
	c.timers = append(c.timers, t)
}

func (c *ManualClock) disarm(t *manualTimer) bool {
	if !t.armed {
		return false
	}
	for i, x := range c.timers {
		if x == t {
			c.timers = append(c.timers[:i], c.timers[i+1:]...)
			break
		}
	}
	t.armed = false
	return true
}

type manualTimer struct {
	c     *ManualClock
	f     func()
	ch    chan time.Time
	when  time.Time
	armed bool
}

func (t *manualTimer) C() <-chan time.Time { return t.ch }

// Stop and Reset follow *time.Timer since Go 1.23: a value the timer sent
// but nobody received is drained, so no stale value is received after the
// call, and the timer counts as pending.
func (t *manualTimer) Stop() bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	was := t.c.disarm(t)
	return t.drain() || was
}

func (t *manualTimer) Reset(d time.Duration) bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	was := t.c.disarm(t)
	drained := t.drain()
	t.c.arm(t, d)
	return was || drained
}

// drain empties the channel of a NewTimer timer; the clock's lock is held.
func (t *manualTimer) drain() bool {
	if t.ch == nil {
		return false
	}
	select {
	case <-t.ch:
		return true
	default:
		return false
	}
}
