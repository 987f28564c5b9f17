package wire

import (
	"github.com/vmihailenco/msgpack/v5"

	"github.com/chubby-dev/chubby/fs"
	"github.com/chubby-dev/chubby/internal/enum"
)

// Method names a call.
type Method uint8

// The calls. Every call but Hello carries the master epoch and (except
// CreateSession and CheckSequencer) a session.
const (
	MInvalid        Method = iota
	MHello                 // HelloArgs → HelloReply
	MCreateSession         // CreateSessionArgs → CreateSessionReply
	MKeepAlive             // KeepAliveArgs → KeepAliveReply (long poll)
	MCloseSession          // Empty → Empty
	MOpen                  // OpenArgs → StatReply
	MGetContents           // NodeArgs → ContentsReply
	MGetStat               // NodeArgs → StatReply
	MReadDir               // NodeArgs → ReadDirReply
	MSetContents           // SetContentsArgs → StatReply
	MDelete                // DeleteArgs → Empty
	MAcquire               // AcquireArgs → SeqReply (blocks while Wait)
	MCancelAcquire         // CancelAcquireArgs → Empty
	MRelease               // ReleaseArgs → Empty
	MSequencer             // NodeArgs → SeqReply
	MCheckSequencer        // CheckSequencerArgs → CheckSequencerReply
	MMembers               // Empty → MembersReply (any server answers)
	MRemoveServer          // RemoveServerArgs → Empty (master only)
	MUnwatch               // UnwatchArgs → Empty
	MBackup                // BackupArgs → BackupReply (master only; a page of a backup file)
	MGetACL                // NodeArgs → ACLReply
	MSetACL                // SetACLArgs → StatReply
	MKeepAliveMany         // KeepAliveManyArgs → KeepAliveManyReply (long poll for many sessions)
	MethodCount
)

var methodNames = [...]string{"invalid", "Hello", "CreateSession", "KeepAlive", "CloseSession",
	"Open", "GetContents", "GetStat", "ReadDir", "SetContents", "Delete", "Acquire",
	"CancelAcquire", "Release", "Sequencer", "CheckSequencer", "Members", "RemoveServer", "Unwatch", "Backup", "GetACL", "SetACL", "KeepAliveMany"}

func (m Method) String() string { return enum.Name(methodNames[:], m, "method") }

// Request is the envelope of a call.
type Request struct {
	ID      uint64 `msgpack:"id"`
	Method  Method `msgpack:"m"`
	Epoch   uint64 `msgpack:"e"`
	Session uint64 `msgpack:"s"`
	// Call numbers a session's mutating call (0: none); a retry after a
	// lost reply carries the same number and is answered, not applied
	// again. The client has had replies to every call below Acked.
	Call  uint64 `msgpack:"c,omitempty"`
	Acked uint64 `msgpack:"a,omitempty"`
	// Secret is the session's secret (CreateSessionReply.Secret): a call
	// that names a session without it is refused (permission_denied).
	Secret []byte             `msgpack:"k,omitempty"`
	Body   msgpack.RawMessage `msgpack:"b"`
}

// Response is the envelope of a reply. Code is fs.Code of the error, empty
// on success.
type Response struct {
	ID    uint64             `msgpack:"id"`
	Code  string             `msgpack:"c,omitempty"`
	Error string             `msgpack:"x,omitempty"`
	Body  msgpack.RawMessage `msgpack:"b,omitempty"`
	// More marks a partial answer: the call stays open and more answers
	// follow, the last without More. Only a KeepAlive that asked for it
	// (KeepAliveArgs.Stream) is answered so.
	More bool `msgpack:"mo,omitempty"`
}

// Err rebuilds the error of a response (nil on success).
func (r *Response) Err() error {
	if r.Code == "" {
		return nil
	}
	return FromCode(r.Code, r.Error)
}

// Empty is the body of calls with no arguments or no reply.
type Empty struct{}

// HelloArgs asks any server about the cell.
type HelloArgs struct{}

// HelloReply says where the master is.
type HelloReply struct {
	Cell     string   `msgpack:"cell"`
	Node     string   `msgpack:"node"`
	IsMaster bool     `msgpack:"im"`
	Master   string   `msgpack:"master"` // RPC address, "" if unknown
	Epoch    uint64   `msgpack:"epoch"`  // the master's epoch (when IsMaster)
	Servers  []string `msgpack:"servers"`
}

// CreateSessionArgs asks for a session with a TTL (0: the default).
type CreateSessionArgs struct {
	TTL int64 `msgpack:"ttl"`
	// Nonce, chosen at random by the client once per Dial, makes a retried
	// CreateSession return the session its lost reply created.
	Nonce uint64 `msgpack:"n,omitempty"`
	// NoCache: the client caches nothing (Config.DisableCache). The
	// master never makes the session a cacher, and after a failover
	// writes do not wait for it to reach the new master.
	NoCache bool `msgpack:"nc,omitempty"`
}

// CreateSessionReply carries the new session and its granted TTL.
type CreateSessionReply struct {
	Session uint64 `msgpack:"s"`
	TTL     int64  `msgpack:"ttl"`
	// Secret must come with every call of the session (Request.Secret).
	Secret []byte `msgpack:"k,omitempty"`
	// Principal is who the session belongs to: the client certificate's
	// common name, or "anonymous" on a cell without TLS.
	Principal string `msgpack:"pr,omitempty"`
}

// KeepAliveArgs renews the session lease. Urgent asks the master to answer
// at once instead of holding the poll: the client's local lease has run out
// (jeopardy) or it has just (re)connected, and it wants a fresh lease now.
type KeepAliveArgs struct {
	Urgent bool `msgpack:"u,omitempty"`
	// AckInval acknowledges every invalidation up to this sequence number:
	// the client has dropped those entries from its cache.
	AckInval uint64 `msgpack:"ai,omitempty"`
	// Stream asks the master to send the session's events while the call
	// is parked, each batch as a partial answer (Response.More) carrying a
	// KeepAliveReply with only Events and Dropped (its TTL is 0: a push
	// grants no lease), instead of ending the call with them. The call
	// still ends as a KeepAlive does: at the end of its hold, with an
	// invalidation, or when the client sends another. A server that does
	// not know the field ignores it and answers as before.
	Stream bool `msgpack:"st,omitempty"`
}

// KeepAliveReply grants a lease of TTL measured from when the KeepAlive was
// sent (the client subtracts its drift margin).
type KeepAliveReply struct {
	TTL int64 `msgpack:"ttl"`
	// Invalidations are paths the client must drop from its cache before it
	// relies on this reply's lease; InvalSeq is what to acknowledge.
	Invalidations []string `msgpack:"inv,omitempty"`
	InvalSeq      uint64   `msgpack:"is,omitempty"`
	// Events for the session's watched nodes, in commit order; Dropped
	// counts events lost because the session's queue was full.
	Events  []Event `msgpack:"ev,omitempty"`
	Dropped uint64  `msgpack:"dr,omitempty"`
}

// KeepAliveManyArgs renews the leases of many sessions in one call: the
// form that connections carrying many sessions (a client Pool, a proxy, the
// load tool) use instead of a KeepAlive per session. The request envelope
// names no session; each entry names its own, with its secret, and is
// checked as a KeepAlive of that session would be. The master holds the
// call until any of the sessions has something to deliver, one of them is
// urgent, or the hold (a fifth of the shortest TTL) ends, and then answers
// every session of the call at once. A session named again by a later call
// while this one is parked is answered by both, each at its own time.
type KeepAliveManyArgs struct {
	Sessions []KeepAliveEntry `msgpack:"ss"`
}

// MaxKeepAliveMany is the most sessions one KeepAliveMany may name: a
// proxy with 5,000 clients renews them in two calls per hold. 4,096
// entries of at most ~60 bytes, and their answers, leave most of a frame
// for deliveries.
const MaxKeepAliveMany = 4096

// KeepAliveEntry is one session's KeepAlive inside a KeepAliveMany.
type KeepAliveEntry struct {
	Session  uint64 `msgpack:"s"`
	Secret   []byte `msgpack:"k,omitempty"`
	Urgent   bool   `msgpack:"u,omitempty"`
	AckInval uint64 `msgpack:"ai,omitempty"`
}

// KeepAliveManyReply answers the sessions of a KeepAliveMany, each with its
// own KeepAlive reply or error. A session the reply leaves out (its
// deliveries did not fit the frame beside the others') was renewed but not
// answered: the client sends its KeepAlive again at once.
type KeepAliveManyReply struct {
	Sessions []KeepAliveResult `msgpack:"ss"`
}

// KeepAliveResult is one session's answer in a KeepAliveManyReply: Code
// (an error code, empty on success) and Error as in Response, else Reply.
type KeepAliveResult struct {
	Session uint64         `msgpack:"s"`
	Code    string         `msgpack:"c,omitempty"`
	Error   string         `msgpack:"x,omitempty"`
	Reply   KeepAliveReply `msgpack:"r"`
}

// Err rebuilds the error of a session's answer (nil on success).
func (r *KeepAliveResult) Err() error {
	if r.Code == "" {
		return nil
	}
	return FromCode(r.Code, r.Error)
}

// OpenArgs opens (and optionally creates) a node.
type OpenArgs struct {
	Path      string `msgpack:"p"`
	Create    bool   `msgpack:"c,omitempty"`
	IsDir     bool   `msgpack:"dir,omitempty"`
	Ephemeral bool   `msgpack:"eph,omitempty"`
	Exclusive bool   `msgpack:"x,omitempty"`
	// Cache: the client caches the answer (a missing node is then answered
	// with StatReply.Absent rather than an error).
	Cache bool `msgpack:"ca,omitempty"`
	// Events subscribes the session to these events on the node (mask of
	// Ev* bits, or'ed with earlier subscriptions).
	Events uint32 `msgpack:"ev,omitempty"`
	// Data is the initial contents of a file the Open creates (Chubby's
	// Open took them too): creating and filling it is one write.
	Data []byte `msgpack:"d,omitempty"`
	// Seq fences the create: it commits only if this sequencer is held.
	Seq *fs.Sequencer `msgpack:"seq,omitempty"`
	// ACL names the created node's ACLs (each empty one is copied from the
	// parent's); an Open of a node that exists ignores it.
	ACL fs.ACL `msgpack:"acl,omitempty"`
}

// UnwatchArgs drops the session's event subscription on a node.
type UnwatchArgs struct {
	Path string `msgpack:"p"`
}

// NodeArgs names a node through a handle (Instance 0: any instance).
type NodeArgs struct {
	Path     string `msgpack:"p"`
	Instance uint64 `msgpack:"i,omitempty"`
	// Cache: the client will cache the answer; the master then counts the
	// session among the node's cachers and invalidates it before writes.
	Cache bool `msgpack:"ca,omitempty"`
	// After (ReadDir only) asks for the children named after it: the
	// next page of a listing whose reply said More.
	After string `msgpack:"af,omitempty"`
}

// StatReply carries a node's metadata.
type StatReply struct {
	Stat   fs.Stat `msgpack:"st"`
	Absent bool    `msgpack:"ab,omitempty"` // Open with Cache of a missing node
	// Cacheable is false while an invalidation of the node is in progress:
	// the answer is right now but must not be cached.
	Cacheable bool `msgpack:"cc,omitempty"`
}

// ContentsReply carries a file's contents and metadata.
type ContentsReply struct {
	Data      []byte  `msgpack:"d"`
	Stat      fs.Stat `msgpack:"st"`
	Cacheable bool    `msgpack:"cc,omitempty"`
}

// ReadDirReply carries a directory's child names, in order, at most
// ListPageBytes of them; More says the listing goes on after the last one
// (ask again with NodeArgs.After).
type ReadDirReply struct {
	Children  []string `msgpack:"c"`
	Stat      fs.Stat  `msgpack:"st"`
	Cacheable bool     `msgpack:"cc,omitempty"`
	More      bool     `msgpack:"m,omitempty"`
}

// Reply sizes. A reply must fit a frame; the two that grow with the
// namespace are split: a listing into pages, a KeepAlive's events and
// invalidations over several replies.
const (
	// ReplyBudget is the most a reply body may take (a frame less room
	// for the envelope). A reply over it is answered with ErrTooLarge.
	ReplyBudget = MaxFrame - 4<<10
	// ListPageBytes bounds the names of one ReadDir page.
	ListPageBytes = 256 << 10
	// KeepAliveBytes bounds the events and invalidation paths of one
	// KeepAlive reply; the rest go in the next, answered at once.
	KeepAliveBytes = 256 << 10
)

// SetContentsArgs writes a file, optionally creating it, optionally CAS on
// the content generation, optionally fenced by a sequencer.
type SetContentsArgs struct {
	Path     string        `msgpack:"p"`
	Instance uint64        `msgpack:"i,omitempty"`
	Data     []byte        `msgpack:"d"`
	Create   bool          `msgpack:"c,omitempty"`
	CAS      bool          `msgpack:"cas,omitempty"`
	Gen      uint64        `msgpack:"g,omitempty"`
	Seq      *fs.Sequencer `msgpack:"seq,omitempty"`
}

// DeleteArgs deletes a node, optionally fenced.
type DeleteArgs struct {
	Path     string        `msgpack:"p"`
	Instance uint64        `msgpack:"i,omitempty"`
	Seq      *fs.Sequencer `msgpack:"seq,omitempty"`
}

// AcquireArgs takes a lock. With Wait the call blocks until granted; WaitID
// identifies the attempt so a retry or a cancel names the same one.
// LockDelay < 0 asks for the default.
type AcquireArgs struct {
	Path      string  `msgpack:"p"`
	Instance  uint64  `msgpack:"i,omitempty"`
	Mode      fs.Mode `msgpack:"m"`
	Wait      bool    `msgpack:"w,omitempty"`
	WaitID    uint64  `msgpack:"wid,omitempty"`
	LockDelay int64   `msgpack:"ld"`
}

// CancelAcquireArgs abandons a blocked Acquire.
type CancelAcquireArgs struct {
	Path   string `msgpack:"p"`
	WaitID uint64 `msgpack:"wid"`
}

// ReleaseArgs frees the lock acquisition of generation Gen.
type ReleaseArgs struct {
	Path string `msgpack:"p"`
	Gen  uint64 `msgpack:"g"`
}

// SeqReply carries a sequencer.
type SeqReply struct {
	Seq fs.Sequencer `msgpack:"seq"`
}

// CheckSequencerArgs asks whether a sequencer is valid now.
type CheckSequencerArgs struct {
	Seq fs.Sequencer `msgpack:"seq"`
}

// CheckSequencerReply answers CheckSequencer.
type CheckSequencerReply struct {
	Valid bool `msgpack:"v"`
}

// Member is one server of the cell as Members reports it.
type Member struct {
	Name    string `msgpack:"n" json:"name"`
	RPCAddr string `msgpack:"rpc" json:"rpc_addr"`
	// State is the gossip view: alive, suspect, dead, left, or unknown.
	State  string `msgpack:"st" json:"state"`
	Voter  bool   `msgpack:"v" json:"voter"`
	Master bool   `msgpack:"m" json:"master"`
}

// MembersReply lists the servers of the raft configuration.
type MembersReply struct {
	Members []Member `msgpack:"ms"`
}

// BackupPageBytes is the most a BackupReply carries: a backup (fs
// WriteBackup) of any size is fetched a page at a time, well under MaxFrame.
const BackupPageBytes = 512 << 10

// BackupArgs asks for a page of a backup: ID 0 makes the master write a
// backup of the state as of now (after confirming its leadership) and hold
// it for a minute; later pages name its ID.
type BackupArgs struct {
	ID     uint64 `msgpack:"id,omitempty"`
	Offset int64  `msgpack:"o,omitempty"`
}

// BackupReply is a page of the backup ID of Total bytes, from the asked offset.
type BackupReply struct {
	ID    uint64 `msgpack:"id"`
	Total int64  `msgpack:"t"`
	Data  []byte `msgpack:"d"`
}

// RemoveServerArgs names a server to remove from the cell for good.
type RemoveServerArgs struct {
	Name string `msgpack:"n"`
	// Force removes a voter even if fewer voters than a quorum of the
	// current configuration would remain.
	Force bool `msgpack:"f,omitempty"`
}

// ACLReply carries the ACL names that govern a node (its own, or for a
// node from before ACLs its nearest ancestor's) and its stat, whose ACLGen
// moves with every change of them.
type ACLReply struct {
	ACL  fs.ACL  `msgpack:"acl"`
	Stat fs.Stat `msgpack:"st"`
}

// SetACLArgs changes a node's ACL names (change-ACL permission); an empty
// name keeps the node's.
type SetACLArgs struct {
	Path     string `msgpack:"p"`
	Instance uint64 `msgpack:"i,omitempty"`
	ACL      fs.ACL `msgpack:"acl"`
}
