package wire

// EventType names an event; the names are CONTRACT.md's. This is the one
// list of them: the server emits the node events, the client adds the
// session events and hands both to applications.
type EventType string

// Node events, delivered on KeepAlive replies to sessions that subscribed
// (OpenArgs.Events) to the node or, for child_*, to its directory.
const (
	EventContentsModified EventType = "contents_modified"
	EventChildAdded       EventType = "child_added"
	EventChildRemoved     EventType = "child_removed"
	EventChildModified    EventType = "child_modified"
	EventLockAcquired     EventType = "lock_acquired"
	EventConflictingLock  EventType = "conflicting_lock"
	EventHandleInvalid    EventType = "handle_invalid"
)

// Session events, raised by the client itself.
const (
	EventJeopardy       EventType = "jeopardy"
	EventSafe           EventType = "safe"
	EventExpired        EventType = "expired"
	EventMasterFailover EventType = "master_failover"
)

// Event mask bits for OpenArgs.Events, one per node event type.
const (
	EvContentsModified uint32 = 1 << iota
	EvChildAdded
	EvChildRemoved
	EvChildModified
	EvLockAcquired
	EvConflictingLock
	EvHandleInvalid
	EvAll = EvContentsModified | EvChildAdded | EvChildRemoved | EvChildModified | EvLockAcquired | EvConflictingLock | EvHandleInvalid
)

var eventBits = map[EventType]uint32{
	EventContentsModified: EvContentsModified,
	EventChildAdded:       EvChildAdded,
	EventChildRemoved:     EvChildRemoved,
	EventChildModified:    EvChildModified,
	EventLockAcquired:     EvLockAcquired,
	EventConflictingLock:  EvConflictingLock,
	EventHandleInvalid:    EvHandleInvalid,
}

// Bit is the subscription bit of a node event type; 0 for session events
// and unknown names.
func (t EventType) Bit() uint32 { return eventBits[t] }

// Event is a change to a watched node, delivered on KeepAlive replies.
type Event struct {
	Type EventType `msgpack:"t"`
	Path string    `msgpack:"p"` // the node the event is about (the child, for child_*)
}
