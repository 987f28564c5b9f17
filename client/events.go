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
