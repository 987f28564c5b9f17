package wire

import "github.com/chubby-dev/chubby/fs"

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

// EvContents, with EvContentsModified, says the session caches the node:
// its contents_modified events may carry the new contents and stat
// (Event.Contents), which the client installs in its cache before it
// delivers the event. It is no event type; a server that predates it drops
// the bit and sends plain events.
const EvContents uint32 = 1 << 31

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
	// Contents, on a contents_modified event to a session that subscribed
	// with EvContents and may read the node, are what the write committed
	// (small files only; nil otherwise). Omitted when nil, so a peer that
	// predates it decodes the event as before.
	Contents *EventContents `msgpack:"c,omitempty"`
}

// EventContents are a committed write's contents and stat, and the
// session's invalidation number (KeepAliveReply.InvalSeq) when the master
// queued them. The master counted the session among the node's cachers
// before it queued them, so every later write of the node invalidates the
// session with a number above InvalSeq: the client installs them only if
// it has seen no invalidation of the node numbered above InvalSeq, only
// under the master that sent them, and only within its local lease.
type EventContents struct {
	Data     []byte  `msgpack:"d"`
	Stat     fs.Stat `msgpack:"st"`
	InvalSeq uint64  `msgpack:"is"`
}
