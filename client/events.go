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
)

// Event is delivered on Client.Events.
type Event struct {
	Type EventType
	Path string // for handle events
	Time time.Time
}
