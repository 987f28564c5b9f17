package session

import (
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/chubby-dev/chubby/internal/enum"
)

// Defaults and bounds of DESIGN.md.
const (
	DefaultTTL       = 12 * time.Second
	MinTTL           = 1 * time.Second
	MaxTTL           = 60 * time.Second
	DefaultGrace     = 45 * time.Second
	DefaultLockDelay = 15 * time.Second
	MaxLockDelay     = 60 * time.Second
)

// NegotiateTTL returns the TTL the master grants for a requested one: the
// default for zero, otherwise the request clamped to [MinTTL, MaxTTL].
func NegotiateTTL(requested time.Duration) time.Duration {
	switch {
	case requested <= 0:
		return DefaultTTL
	case requested < MinTTL:
		return MinTTL
	case requested > MaxTTL:
		return MaxTTL
	}
	return requested
}

// ValidateLockDelay checks a holder's requested lock-delay; a negative value
// means "use the default".
func ValidateLockDelay(d time.Duration) (time.Duration, error) {
	if d < 0 {
		return DefaultLockDelay, nil
	}
	if d > MaxLockDelay {
		return 0, fmt.Errorf("lock-delay %v exceeds the maximum %v", d, MaxLockDelay)
	}
	return d, nil
}

// DriftMargin is how much the client shortens its local lease to allow for
// its clock running faster than the master's: 2 % of the TTL plus 10 ms.
func DriftMargin(ttl time.Duration) time.Duration {
	return ttl/50 + 10*time.Millisecond
}

// KeepAliveHold is how long the master holds a KeepAlive long poll before it
// answers with a fresh lease: a third of the TTL with ±20 % jitter, so the
// renewals of many clients do not line up.
func KeepAliveHold(ttl time.Duration, r *rand.Rand) time.Duration {
	third := ttl / 3
	jitter := time.Duration((r.Float64()*0.4 - 0.2) * float64(third))
	return third + jitter
}

// Backoff is jittered exponential backoff between failed renewals: attempt n
// waits a uniformly random time in [d/2, d] where d = min(Max, Base·2^n).
type Backoff struct {
	Base, Max time.Duration
	attempt   int
}

// Next returns the wait before the next attempt and advances the attempt count.
func (b *Backoff) Next(r *rand.Rand) time.Duration {
	d := b.Base
	for i := 0; i < b.attempt && d < b.Max; i++ {
		d *= 2
	}
	if d > b.Max {
		d = b.Max
	}
	b.attempt++
	half := d / 2
	return half + time.Duration(r.Int64N(int64(half)+1))
}

// Reset starts the backoff over after a success.
func (b *Backoff) Reset() { b.attempt = 0 }

// State is the client's view of its session.
type State int

// The session states of the client.
const (
	// Safe: the local lease is valid; cached data and held locks may be used.
	Safe State = iota
	// Jeopardy: the local lease ran out; the cache is disabled and locks may
	// be lost; the client keeps trying to renew until the grace period ends.
	Jeopardy
	// Expired: the grace period ended (or the master said so); every handle
	// and lock of the session is invalid.
	Expired
)

var stateNames = [...]string{Safe: "safe", Jeopardy: "jeopardy", Expired: "expired"}

func (s State) String() string { return enum.Name(stateNames[:], s, "State") }

// Lease tracks the client's conservative local lease. It is not safe for
// concurrent use; the client guards it with its own lock.
type Lease struct {
	TTL   time.Duration
	Grace time.Duration
	// expiry is the end of the local lease: the send time of the last
	// successful KeepAlive plus the granted TTL minus the drift margin.
	expiry time.Time
	state  State
}

// NewLease starts a local lease from a session creation whose request was
// sent at sentAt and which granted ttl.
func NewLease(sentAt time.Time, ttl, grace time.Duration) *Lease {
	if grace <= 0 {
		grace = DefaultGrace
	}
	l := &Lease{TTL: ttl, Grace: grace}
	l.expiry = sentAt.Add(ttl - DriftMargin(ttl))
	return l
}

// Renewed records a successful KeepAlive sent at sentAt that granted ttl. It
// returns the state before the renewal (Jeopardy means the session is safe
// again). An expired lease cannot be renewed.
func (l *Lease) Renewed(sentAt time.Time, ttl time.Duration) (before State) {
	before = l.state
	if l.state == Expired {
		return before
	}
	l.TTL = ttl
	e := sentAt.Add(ttl - DriftMargin(ttl))
	if e.After(l.expiry) {
		l.expiry = e
	}
	l.state = Safe
	return before
}

// Check moves the state forward for the time now and returns the new state.
// Safe becomes Jeopardy once the local lease has ended, and Jeopardy becomes
// Expired once the grace period after it has ended too.
func (l *Lease) Check(now time.Time) State {
	if l.state == Safe && !now.Before(l.expiry) {
		l.state = Jeopardy
	}
	if l.state == Jeopardy && !now.Before(l.expiry.Add(l.Grace)) {
		l.state = Expired
	}
	return l.state
}

// Expire marks the lease expired (the master said the session is gone).
func (l *Lease) Expire() { l.state = Expired }

// State returns the last state computed by Check, Renewed or Expire.
func (l *Lease) State() State { return l.state }

// Valid reports whether the local lease is valid at now: cached data and held
// locks may be relied on only then.
func (l *Lease) Valid(now time.Time) bool {
	return l.state == Safe && now.Before(l.expiry)
}

// Expiry is the end of the local lease.
func (l *Lease) Expiry() time.Time { return l.expiry }

// GraceEnd is when the session is given up if no renewal succeeds.
func (l *Lease) GraceEnd() time.Time { return l.expiry.Add(l.Grace) }

// Remaining is how much of the local lease is left at now (zero if none).
func (l *Lease) Remaining(now time.Time) time.Duration {
	if !l.Valid(now) {
		return 0
	}
	return l.expiry.Sub(now)
}
