package client

import (
	"time"

	"github.com/chubby-dev/chubby/wire"
)

// EventType names an event. The names are CONTRACT.md's.
type EventType string

// Session events: the session's state as the client sees it.
const (
	EventJeopardy       = EventType(wire.EventJeopardy)
	EventSafe           = EventType(wire.EventSafe)
	EventExpired        = EventType(wire.EventExpired)
	EventMasterFailover = EventType(wire.EventMasterFailover)
)

// Handle events: changes to nodes opened WithEvents, after they committed.
const (
	EventContentsModified = EventType(wire.EventContentsModified)
	EventChildAdded       = EventType(wire.EventChildAdded)
	EventChildRemoved     = EventType(wire.EventChildRemoved)
	EventChildModified    = EventType(wire.EventChildModified)
	EventLockAcquired     = EventType(wire.EventLockAcquired)
	EventConflictingLock  = EventType(wire.EventConflictingLock)
	EventHandleInvalid    = EventType(wire.EventHandleInvalid)
)

// Event is delivered on Client.Events.
type Event struct {
	Type EventType
	Path string // for handle events
	Time time.Time
}

// Subscribe calls fn with every event the client delivers — session events
// and the events of handles opened WithEvents — in the order they happen,
// besides delivering them on Events, which it does not affect. fn runs on
// the goroutine that delivers events (the KeepAlive loop, or a caller that
// observes jeopardy) and must return at once: it should only note the event
// or wake a goroutine without blocking, such as by a non-blocking send on a
// channel of capacity 1. No event is dropped for a subscriber. The returned
// func ends the subscription; fn is not called once it has returned.
//
// Recipes (client/election, client/assign) use it to re-read what an event
// says changed, so they never poll and never take events away from the
// program's own Events consumer.
func (c *Client) Subscribe(fn func(Event)) (cancel func()) {
	c.subMu.Lock()
	c.subSeq++
	id := c.subSeq
	c.subs[id] = fn
	c.subMu.Unlock()
	return func() {
		c.subMu.Lock()
		delete(c.subs, id)
		c.subMu.Unlock()
	}
}
