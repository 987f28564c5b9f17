package client

import (
	"time"

	"github.com/chubby-dev/chubby/session"
)

// lease tracks the client's conservative local lease (the arithmetic is
// package session's). It is not safe for
// concurrent use; the client guards it with its own lock.
type lease struct {
	TTL   time.Duration
	Grace time.Duration
	// expiry is the end of the local lease: the send time of the last
	// successful KeepAlive plus the granted TTL minus the drift margin.
	expiry time.Time
	state  SessionState
}

// newLease starts a local lease from a session creation whose request was
// sent at sentAt and which granted ttl.
func newLease(sentAt time.Time, ttl, grace time.Duration) *lease {
	if grace <= 0 {
		grace = session.DefaultGrace
	}
	l := &lease{TTL: ttl, Grace: grace}
	l.expiry = sentAt.Add(ttl - session.DriftMargin(ttl))
	return l
}

// Renewed records a successful KeepAlive sent at sentAt that granted ttl. It
// returns the state before the renewal (Jeopardy means the session is safe
// again). An expired lease cannot be renewed.
func (l *lease) Renewed(sentAt time.Time, ttl time.Duration) (before SessionState) {
	before = l.state
	if l.state == SessionExpired {
		return before
	}
	l.TTL = ttl
	e := sentAt.Add(ttl - session.DriftMargin(ttl))
	if e.After(l.expiry) {
		l.expiry = e
	}
	l.state = SessionSafe
	return before
}

// Check moves the state forward for the time now and returns the new state.
// Safe becomes Jeopardy once the local lease has ended, and Jeopardy becomes
// Expired once the grace period after it has ended too.
func (l *lease) Check(now time.Time) SessionState {
	if l.state == SessionSafe && !now.Before(l.expiry) {
		l.state = SessionJeopardy
	}
	if l.state == SessionJeopardy && !now.Before(l.expiry.Add(l.Grace)) {
		l.state = SessionExpired
	}
	return l.state
}

// Expire marks the lease expired (the master said the session is gone).
func (l *lease) Expire() { l.state = SessionExpired }

// State returns the last state computed by Check, Renewed or Expire.
func (l *lease) State() SessionState { return l.state }

// Valid reports whether the local lease is valid at now: cached data and held
// locks may be relied on only then.
func (l *lease) Valid(now time.Time) bool {
	return l.state == SessionSafe && now.Before(l.expiry)
}

// Expiry is the end of the local lease.
func (l *lease) Expiry() time.Time { return l.expiry }

// GraceEnd is when the session is given up if no renewal succeeds.
func (l *lease) GraceEnd() time.Time { return l.expiry.Add(l.Grace) }

// Remaining is how much of the local lease is left at now (zero if none).
func (l *lease) Remaining(now time.Time) time.Duration {
	if !l.Valid(now) {
		return 0
	}
	return l.expiry.Sub(now)
}
