package session

import "time"

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
