package client

import "time"

// EventType names an event. The names are those of CONTRACT.md.
type EventType string

// Session and handle events.
const (
	EventJeopardy       EventType = "jeopardy"
	EventSafe           EventType = "safe"
	EventExpired        EventType = "expired"
	EventMasterFailover EventType = "master_failover"

	EventContentsModified EventType = "contents_modified"
	EventChildAdded       EventType = "child_added"
	EventChildRemoved     EventType = "child_removed"
	EventChildModified    EventType = "child_modified"
	EventLockAcquired     EventType = "lock_acquired"
	EventConflictingLock  EventType = "conflicting_lock"
	EventHandleInvalid    EventType = "handle_invalid"
)

// Event is delivered on Client.Events.
type Event struct {
	Type EventType
	Path string // for handle events
	Time time.Time
}
