package fs

// Result is what applying a Command produced. Err is nil on success and wraps
// a sentinel otherwise; the effects are what the master must act on.
type Result struct {
	Err     error
	Stat    Stat
	Session uint64
	Secret  []byte // CreateSession's
	Epoch   uint64
	Seq     Sequencer
	Queued  bool

	// Grants are waiters granted by this command (a release, an expiry, the
	// end of a lock-delay), in grant order.
	Grants []Grant
	// Cancelled are waits removed without a grant (their session ended or
	// the node was deleted).
	Cancelled []Wait
	// Delayed are locks that became free but may not be granted before Until
	// because their holder's session expired (lock-delay).
	Delayed []Delayed
	// Ended are sessions this command ended.
	Ended []uint64
	// Changes are what this command changed, in order: the master turns
	// them into events for the sessions watching those nodes.
	Changes []Change
}

// ChangeKind says what happened to a node.
type ChangeKind uint8

// Changes reported in Result.Changes.
const (
	Created      ChangeKind = iota + 1 // the node was created
	Modified                           // its contents were set
	Deleted                            // it was deleted
	LockAcquired                       // its lock was granted to someone
	LockConflict                       // someone asked for its lock while it was held (or delayed)
)

// Change is one entry of Result.Changes.
type Change struct {
	Path string
	Kind ChangeKind
}

func (r *Result) change(path string, k ChangeKind) {
	r.Changes = append(r.Changes, Change{Path: path, Kind: k})
}

// Grant is a waiter that now holds the lock.
type Grant struct {
	Session uint64
	WaitID  uint64
	Seq     Sequencer
}

// Wait identifies a queued Acquire.
type Wait struct {
	Session uint64
	Path    string
	WaitID  uint64
}

// Delayed is a lock inside its lock-delay.
type Delayed struct {
	Path  string
	Until int64 // Unix nanoseconds
}
