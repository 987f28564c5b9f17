package cell

import (
	"time"

	"github.com/chubby-dev/chubby/session"
)

// SkewClock is session.SkewClock: a real-time clock a test can skew (rate,
// jumps, freezes) while the program using it runs.
type SkewClock = session.SkewClock

// NewSkewClock returns a clock that reads start now and runs at real speed.
func NewSkewClock(start time.Time) *SkewClock { return session.NewSkewClock(start) }
