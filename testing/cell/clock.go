package cell

import (
	"sync"
	"time"

	"github.com/chubby-dev/chubby/session"
)

// StallClock is a session.ManualClock that can also simulate a stall of the
// process that reads it (a GC pause, SIGSTOP, a slow disk): Stall moves the
// time forward without running any AfterFunc callback on the way, and only
// then runs every callback that fell due, late, with Now already at the end
// of the stall — what a Go program sees when it resumes.
//
// ManualClock.Advance cannot show this: it runs each callback with the clock
// set to that callback's own deadline, so timers are always punctual.
//
// Channel timers (NewTimer) behave as on the ManualClock.
type StallClock struct {
	*session.ManualClock

	mu       sync.Mutex
	stalling bool
	late     []func()
}

var _ session.Clock = (*StallClock)(nil)

// NewStallClock returns a StallClock set to start.
func NewStallClock(start time.Time) *StallClock {
	return &StallClock{ManualClock: session.NewManualClock(start)}
}

// AfterFunc schedules f like ManualClock.AfterFunc; during a Stall its call
// is postponed to the end of the stall.
func (c *StallClock) AfterFunc(d time.Duration, f func()) session.Timer {
	return c.ManualClock.AfterFunc(d, func() {
		c.mu.Lock()
		if c.stalling {
			c.late = append(c.late, f)
			c.mu.Unlock()
			return
		}
		c.mu.Unlock()
		f()
	})
}

// Stall moves the clock forward by d as a stalled process experiences it:
// nothing fires during the stall; at its end every callback that fell due
// runs, in deadline order, with Now at the end of the stall. Like Advance,
// it returns after the callbacks have run.
func (c *StallClock) Stall(d time.Duration) {
	c.mu.Lock()
	c.stalling = true
	c.mu.Unlock()
	c.ManualClock.Advance(d)
	c.mu.Lock()
	c.stalling = false
	late := c.late
	c.late = nil
	c.mu.Unlock()
	for _, f := range late {
		f()
	}
}
