package fs

import "github.com/chubby-dev/chubby/internal/enum"

// Op names a state-machine command.
type Op uint8

// The commands, one body type each. Each is proposed by the master (stamped
// with its clock in Command.Now) and applied identically on every replica.
const (
	OpInvalid       Op = iota
	OpNewEpoch         // NewEpoch: a new master starts: epoch++ → Result.Epoch
	OpCreateSession    // CreateSession → Result.Session
	OpEndSession       // EndSession of Command.Session: release its locks, delete its ephemerals
	OpCreate           // Create → Result.Stat
	OpSetContents      // SetContents → Result.Stat
	OpDelete           // Delete
	OpAcquire          // Acquire → Result.Seq or Result.Queued
	OpCancelWait       // CancelWait: leave the queue (or release what the wait was granted)
	OpRelease          // Release
	OpGrantDelayed     // GrantDelayed: lock-delay over, grant the queue
	OpRemoveServer     // RemoveServer: an operator removed a server for good
	OpSetACL           // SetACL: change a node's ACL names → Result.Stat
	OpInitACLs         // InitACLs: a secure cell's first ACLs (the root's names, acl/admin)
	opMax
)

var opNames = [...]string{"invalid", "new-epoch", "create-session", "end-session", "create",
	"set-contents", "delete", "acquire", "cancel-wait", "release", "grant-delayed", "remove-server", "set-acl", "init-acls"}

func (o Op) String() string { return enum.Name(opNames[:], o, "op") }

// Command is one entry of the replicated log: an envelope that every op
// shares and the op's Body. Build one with NewCommand, which sets Op from
// the body; Apply rejects an unknown Op or a Body of another op's type.
type Command struct {
	Op  Op
	Now int64 // master's clock, Unix nanoseconds
	// Session is the session the command is for (0: none). Session-scoped
	// ops (EndSession, Acquire, CancelWait, Release) need one; a namespace
	// write with a session fails once the session has ended.
	Session uint64
	// CallID identifies the session's call for exactly-once retries (0:
	// not deduplicated); the client has had replies to every call below
	// Acked.
	CallID uint64
	Acked  uint64
	// Caller is the principal the command acts for: its ACL permissions
	// are checked when it applies, atomically with the change, unless
	// Admin (one of the cell's admins, or anybody on a cell without TLS).
	// "": the master's own command (expiry, lock-delay, epochs) or one
	// logged before ACLs, not checked.
	Caller string
	Admin  bool
	Body   Body
}

// Body is the part of a Command particular to its op: one of *NewEpoch,
// *CreateSession, *EndSession, *Create, *SetContents, *Delete, *Acquire,
// *CancelWait, *Release, *GrantDelayed, *RemoveServer, *SetACL, *InitACLs.
type Body interface {
	op() Op
}

// NewCommand returns the command that carries b, its envelope zero but
// for the op.
func NewCommand(b Body) *Command { return &Command{Op: b.op(), Body: b} }

// Path is the node the command acts on, "" for the ops that act on no one
// node (epochs, sessions, servers).
func (c *Command) Path() string {
	if n, ok := c.Body.(interface{ node() string }); ok {
		return n.node()
	}
	return ""
}

// check rejects what no handler can apply: an unknown op, or a body that
// is not the op's.
func (c *Command) check() error {
	if c.Op == OpInvalid || c.Op >= opMax {
		return errf(ErrBadRequest, "unknown command op %d", c.Op)
	}
	if c.Body == nil || c.Body.op() != c.Op {
		return errf(ErrBadRequest, "%v command with a %T body", c.Op, c.Body)
	}
	return nil
}

// NewEpoch: a new master starts; the epoch goes up by one.
type NewEpoch struct{}

// CreateSession starts a session.
type CreateSession struct {
	TTL int64 // lease length, nanoseconds; must be positive
	// Nonce makes it idempotent: a retry with the same nonce (the reply
	// was lost in a failover) gets the same session. 0: none.
	Nonce uint64
	// Secret, drawn at random by the master, must come with every call of
	// the session (wire.Request.Secret): knowing a session's number is not
	// enough to act on it.
	Secret []byte
	// Principal is who created the session (its TLS certificate's common
	// name, or "anonymous"): only that principal may make its calls.
	Principal string
	// NoCache: the session will cache nothing (its client has no cache).
	// The master never counts it among a node's cachers, and a new master
	// need not wait for it before the first write (it has no cache to
	// flush).
	NoCache bool
}

// EndSession ends Command.Session: its waits are cancelled, its ephemeral
// nodes deleted and its locks released.
type EndSession struct {
	// Expired: the lease ran out (rather than the client closing), so
	// each lock it held stays ungranted for the holder's lock-delay.
	Expired bool
}

// Create makes a file or directory whose parent is a directory. Creating
// one that exists, of the same kind and not Exclusive, returns its Stat.
type Create struct {
	Path      string
	IsDir     bool
	Ephemeral bool   // deleted when Command.Session ends; files only
	Exclusive bool   // fail if it exists
	Data      []byte // a file's initial contents
	// ACL names the new node's ACLs; each name left empty is copied from
	// the parent's. A node that exists keeps its own.
	ACL ACL
	// Seq, if set, fences the create: it fails with ErrBadSequencer unless
	// this lock is held at this generation when it applies.
	Seq *Sequencer
}

// SetContents replaces a file's contents.
type SetContents struct {
	Path     string
	Instance uint64 // the handle's instance; 0 = any
	Data     []byte
	Create   bool // create the file if it is missing (without CAS)
	// CAS: write only if the file is at ContentGen; ContentGen 0 means
	// "only if it does not exist" (and creates it).
	CAS        bool
	ContentGen uint64
	Seq        *Sequencer // fence: fail unless this lock is held now
}

// Delete removes a file or an empty directory.
type Delete struct {
	Path     string
	Instance uint64     // the handle's instance; 0 = any
	Seq      *Sequencer // fence: fail unless this lock is held now
}

// Acquire takes a node's lock for Command.Session, or queues for it.
type Acquire struct {
	Path     string
	Instance uint64 // the handle's instance; 0 = any
	Mode     Mode
	// Wait queues the request when the lock cannot be granted now; WaitID
	// names the wait (a retry with the same id finds it).
	Wait   bool
	WaitID uint64
	// LockDelay is how long the lock stays ungranted if the holder's
	// session expires while holding it, nanoseconds in [0, 60s].
	LockDelay int64
}

// CancelWait takes Command.Session's wait WaitID off Path's queue, or
// releases the lock if the wait was granted before the cancel arrived.
type CancelWait struct {
	Path   string
	WaitID uint64
}

// Release gives up Command.Session's hold on Path's lock, taken at LockGen.
type Release struct {
	Path    string
	LockGen uint64
}

// GrantDelayed grants Path's queue once its lock-delay is over.
type GrantDelayed struct {
	Path string
}

// RemoveServer records that an operator removed a server for good.
type RemoveServer struct {
	ServerID string
}

// SetACL changes a node's ACL names (Caller needs change-ACL permission);
// a name left empty keeps the node's. The node's ACL generation moves on.
type SetACL struct {
	Path     string
	Instance uint64 // the handle's instance; 0 = any
	ACL      ACL
}

// InitACLs gives a secure cell its first ACLs, once: the root's three
// names become "admin" and the file /ls/<cell>/acl/admin lists Admins
// (the directory and file are made if missing). A cell whose root has ACL
// names already is left as it is, so every master may propose it.
type InitACLs struct {
	Admins []string
}

func (*NewEpoch) op() Op      { return OpNewEpoch }
func (*CreateSession) op() Op { return OpCreateSession }
func (*EndSession) op() Op    { return OpEndSession }
func (*Create) op() Op        { return OpCreate }
func (*SetContents) op() Op   { return OpSetContents }
func (*Delete) op() Op        { return OpDelete }
func (*Acquire) op() Op       { return OpAcquire }
func (*CancelWait) op() Op    { return OpCancelWait }
func (*Release) op() Op       { return OpRelease }
func (*GrantDelayed) op() Op  { return OpGrantDelayed }
func (*RemoveServer) op() Op  { return OpRemoveServer }
func (*SetACL) op() Op        { return OpSetACL }
func (*InitACLs) op() Op      { return OpInitACLs }

func (b *Create) node() string       { return b.Path }
func (b *SetContents) node() string  { return b.Path }
func (b *Delete) node() string       { return b.Path }
func (b *Acquire) node() string      { return b.Path }
func (b *CancelWait) node() string   { return b.Path }
func (b *Release) node() string      { return b.Path }
func (b *GrantDelayed) node() string { return b.Path }
func (b *SetACL) node() string       { return b.Path }
