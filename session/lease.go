package session

import (
	"fmt"
	"math/rand/v2"
	"time"
)

// Defaults and bounds of DESIGN.md. MinTTL is 250 ms since issue 16 (DESIGN.md
// still says 1 s): a sub-second TTL moves a dead holder's lock sooner, but
// its session renews twelve times a second and is revoked by any pause of
// two thirds of its TTL (README, "Choosing a TTL").
const (
	DefaultTTL       = 12 * time.Second
	MinTTL           = 250 * time.Millisecond
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

// KeepAliveManyHold is how long the master holds a KeepAliveMany (the
// KeepAlives of many sessions sharing a connection) before it answers: a
// fifth of the shortest TTL among them, without jitter. It is well under
// the shortest RenewInterval (a third less 20 %), so the call is
// answered before any of its sessions sends its next KeepAlive: sessions
// answered together renew together, one call per hold. One that sends
// early anyway (a proxy's client, whose own KeepAlive the proxy forwards
// in a later call) renews in that later call and leaves this one parked
// for the others (server lease.poll2); it used to answer the call at once
// for all of them, breaking one call per connection into many small ones.
func KeepAliveManyHold(shortestTTL time.Duration) time.Duration {
	return shortestTTL / 5
}

// RenewInterval is how long after sending a KeepAlive the client sends the
// next one if the first is still parked: a third of the TTL shortened by up
// to 20 % at random. The master answers a parked KeepAlive as soon as the
// next one of the same session arrives, so the client's local lease — which
// runs from the send time of the KeepAlive an answer renews — is confirmed
// at most one interval and a round trip after each send, whatever the
// master's hold. Waiting for each answer before sending the next would
// leave two holds and two round trips between a send and the answer that
// renews the lease past it: a margin of TTL/5 for four network legs at
// worst, against TTL/3 for two legs this way, for the same number of
// KeepAlives (issue 16).
func RenewInterval(ttl time.Duration, r *rand.Rand) time.Duration {
	third := ttl / 3
	return third - time.Duration(r.Float64()*0.2*float64(third))
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
