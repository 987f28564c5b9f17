package session

import (
	"sync"
	"time"
)

// timerQueue is the clock side of a test clock's timers (ManualClock,
// SkewClock): the clock keeps the armed timers under its lock and decides
// when each falls due; testTimer holds what a timer is to its user.
type timerQueue interface {
	lock()
	unlock()
	// armLocked queues t to fall due d from the clock's now and returns
	// the callbacks due at once, to run outside the lock.
	armLocked(t *testTimer, d time.Duration) []func()
	// disarmLocked takes t off the queue, reporting whether it was armed.
	disarmLocked(t *testTimer) bool
}

// timerSet is what a test clock keeps of its timers: its lock and the
// armed ones. Both test clocks embed it.
type timerSet struct {
	mu     sync.Mutex
	timers map[*testTimer]struct{}
}

func (s *timerSet) lock()   { s.mu.Lock() }
func (s *timerSet) unlock() { s.mu.Unlock() }

// Pending reports how many timers are armed (useful in tests).
func (s *timerSet) Pending() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.timers)
}

// addLocked marks t armed and keeps it.
func (s *timerSet) addLocked(t *testTimer) {
	if s.timers == nil {
		s.timers = map[*testTimer]struct{}{}
	}
	t.armed = true
	s.timers[t] = struct{}{}
}

// removeLocked forgets t, reporting whether it was armed.
func (s *timerSet) removeLocked(t *testTimer) bool {
	if !t.armed {
		return false
	}
	t.armed = false
	delete(s.timers, t)
	return true
}

// testTimer is a timer of a test clock: an AfterFunc callback (f) or a
// NewTimer channel (ch). Stop and Reset follow *time.Timer since Go 1.23: a
// value the timer sent but nobody received is drained, so no stale value is
// received after the call, and the timer counts as pending.
type testTimer struct {
	q     timerQueue
	f     func()
	ch    chan time.Time
	when  time.Time // deadline on the clock
	armed bool

	// ManualClock only: the order of arming, which orders timers with
	// the same deadline.
	seq uint64
	// SkewClock only: gen is bumped at every (re)arming and disarming, so
	// a stale real timer does nothing; real is the real timer of the
	// current arming (nil: none).
	gen  uint64
	real *time.Timer
}

func (t *testTimer) C() <-chan time.Time { return t.ch }

func (t *testTimer) Stop() bool {
	t.q.lock()
	defer t.q.unlock()
	was := t.q.disarmLocked(t)
	return t.drain() || was
}

func (t *testTimer) Reset(d time.Duration) bool {
	t.q.lock()
	was := t.q.disarmLocked(t)
	drained := t.drain()
	fire := t.q.armLocked(t, d)
	t.q.unlock()
	goAll(fire)
	return was || drained
}

// deliver fires t at now: a channel timer's value is sent (the clock's
// lock held, so a concurrent Stop or Reset sees it pending or drains it);
// an AfterFunc timer's callback is returned, to run outside the lock.
func (t *testTimer) deliver(now time.Time) func() {
	if t.f != nil {
		return t.f
	}
	select {
	case t.ch <- now:
	default:
	}
	return nil
}

// drain empties the channel of a NewTimer timer; the clock's lock is held.
func (t *testTimer) drain() bool {
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

// goAll runs each callback in its own goroutine, as time.AfterFunc does.
func goAll(fs []func()) {
	for _, f := range fs {
		go f()
	}
}
