package client

import (
	"time"

	"github.com/chubby-dev/chubby/internal/enum"
)

// SessionState is the session's state as this client sees it (Chubby §2.8).
type SessionState int

// The session states.
const (
	// SessionSafe: the local lease is valid; cached data and held locks may
	// be used.
	SessionSafe SessionState = iota
	// SessionJeopardy: the local lease ran out; the cache is disabled and
	// locks may be lost; the client keeps trying to renew until the grace
	// period ends.
	SessionJeopardy
	// SessionExpired: the grace period ended (or the master said so);
	// every handle and lock of the session is invalid.
	SessionExpired
)

var stateNames = [...]string{SessionSafe: "safe", SessionJeopardy: "jeopardy", SessionExpired: "expired"}

// String is the state's name in events and in chubbysh: safe, jeopardy,
// expired.
func (s SessionState) String() string { return enum.Name(stateNames[:], s, "SessionState") }

// State is the session's state now. A transition it observes (the local
// lease ending) is acted on as the KeepAlive loop would: locks are marked
// lost and the event is emitted.
func (c *Client) State() SessionState { return c.checkLease() }

// SessionInfo describes the session.
type SessionInfo struct {
	ID        uint64
	TTL       time.Duration
	LeaseLeft time.Duration
	// LeaseEnd is when the local lease ends unless renewed: the send time
	// of the last KeepAlive that renewed it plus TTL minus the drift margin.
	LeaseEnd time.Time
	State    SessionState
	Master   string
	Epoch    uint64
	Cell     string
	// Principal is who the session belongs to: the client certificate's
	// common name, or "anonymous" on a cell without TLS.
	Principal string
}

// Session describes the session now.
func (c *Client) Session() SessionInfo {
	c.checkLease() // act on a transition, as State does
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.clock.Now()
	return SessionInfo{ID: c.id, TTL: c.lease.TTL, LeaseLeft: c.lease.Remaining(now), LeaseEnd: c.lease.Expiry(), State: c.lease.State(),
		Master: c.master, Epoch: c.epoch, Cell: c.cell, Principal: c.principal}
}
