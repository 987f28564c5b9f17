package fs

import (
	"bytes"
	"fmt"

	"github.com/vmihailenco/msgpack/v5"
)

// Op names a state-machine command.
type Op uint8

// The commands. Each is proposed by the master (stamped with its clock in
// Command.Now) and applied identically on every replica.
const (
	OpInvalid       Op = iota
	OpNewEpoch         // a new master starts: epoch++
	OpCreateSession    // TTL → Result.Session
	OpEndSession       // Session, Expired: release locks (with lock-delay if expired), delete ephemerals
	OpCreate           // Path, IsDir, Ephemeral, Exclusive → Result.Stat
	OpSetContents      // Path, Instance, Data, Create, CAS+Gen, Seq → Result.Stat
	OpDelete           // Path, Instance, Seq
	OpAcquire          // Path, Instance, Mode, Wait, WaitID, LockDelay → Result.Seq or Result.Queued
	OpCancelWait       // Path, WaitID: leave the queue (or release what the wait was granted)
	OpRelease          // Path, Gen
	OpGrantDelayed     // Path: lock-delay over, grant the queue
	OpRemoveServer     // Path = server id: an operator removed it for good
	opMax
)

var opNames = [...]string{"invalid", "new-epoch", "create-session", "end-session", "create",
	"set-contents", "delete", "acquire", "cancel-wait", "release", "grant-delayed", "remove-server"}

func (o Op) String() string {
	if int(o) < len(opNames) {
		return opNames[o]
	}
	return fmt.Sprintf("op(%d)", uint8(o))
}

// Command is one entry of the replicated log. Fields not used by an Op are
// left zero and omitted from the encoding.
type Command struct {
	Op  Op    `msgpack:"o"`
	Now int64 `msgpack:"t"` // master's clock, Unix nanoseconds

	Session   uint64     `msgpack:"s,omitempty"`
	Path      string     `msgpack:"p,omitempty"`
	Instance  uint64     `msgpack:"i,omitempty"` // handle's instance; 0 = any
	Data      []byte     `msgpack:"d,omitempty"`
	IsDir     bool       `msgpack:"dir,omitempty"`
	Ephemeral bool       `msgpack:"eph,omitempty"`
	Create    bool       `msgpack:"c,omitempty"` // SetContents: create the file if missing
	Exclusive bool       `msgpack:"x,omitempty"` // Create: fail if it exists
	CAS       bool       `msgpack:"cas,omitempty"`
	Gen       uint64     `msgpack:"g,omitempty"` // CAS content generation; Release lock generation
	Seq       *Sequencer `msgpack:"seq,omitempty"`
	Mode      Mode       `msgpack:"m,omitempty"`
	Wait      bool       `msgpack:"w,omitempty"`
	WaitID    uint64     `msgpack:"wid,omitempty"`
	LockDelay int64      `msgpack:"ld,omitempty"` // nanoseconds
	TTL       int64      `msgpack:"ttl,omitempty"`
	Expired   bool       `msgpack:"exp,omitempty"`
	// CallID identifies the session's call for exactly-once retries (0:
	// not deduplicated); the client has had replies to every call below
	// Acked.
	CallID uint64 `msgpack:"cid,omitempty"`
	Acked  uint64 `msgpack:"ack,omitempty"`
	// Nonce makes CreateSession idempotent: a retry with the same nonce
	// (the reply was lost in a failover) gets the same session.
	Nonce uint64 `msgpack:"nc,omitempty"`
}

// Encode returns the log entry bytes for c.
func (c *Command) Encode() ([]byte, error) { return msgpack.Marshal(c) }

// DecodeCommand parses a log entry. It rejects trailing garbage and unknown ops.
func DecodeCommand(b []byte) (*Command, error) {
	var c Command
	rd := bytes.NewReader(b)
	if err := msgpack.NewDecoder(rd).Decode(&c); err != nil {
		return nil, errf(ErrBadRequest, "decode command: %v", err)
	}
	if rd.Len() > 0 {
		return nil, errf(ErrBadRequest, "decode command: %d bytes of trailing garbage", rd.Len())
	}
	if c.Op == OpInvalid || c.Op >= opMax {
		return nil, errf(ErrBadRequest, "unknown command op %d", c.Op)
	}
	return &c, nil
}

// Result is what applying a Command produced. Err is nil on success and wraps
// a sentinel otherwise; the effects are what the master must act on.
type Result struct {
	Err     error
	Stat    Stat
	Session uint64
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

// DecodeCommands parses a log entry that holds one or more commands encoded
// back to back (the master batches concurrent commands into one entry).
func DecodeCommands(b []byte) ([]*Command, error) {
	rd := bytes.NewReader(b)
	dec := msgpack.NewDecoder(rd)
	var out []*Command
	for rd.Len() > 0 {
		var c Command
		if err := dec.Decode(&c); err != nil {
			return nil, errf(ErrBadRequest, "decode command %d of batch: %v", len(out), err)
		}
		if c.Op == OpInvalid || c.Op >= opMax {
			return nil, errf(ErrBadRequest, "command %d of batch: unknown op %d", len(out), c.Op)
		}
		out = append(out, &c)
	}
	if len(out) == 0 {
		return nil, errf(ErrBadRequest, "empty command batch")
	}
	return out, nil
}
