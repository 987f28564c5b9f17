package fs

import (
	"hash/fnv"
	"sort"
)

// Stat is the metadata of a node. Instance, ContentGen, LockGen and ACLGen
// come from one cell-wide counter, so each is monotonic across deletion and
// re-creation of the same name.
type Stat struct {
	Instance   uint64 `msgpack:"i"`
	ContentGen uint64 `msgpack:"cg"`
	LockGen    uint64 `msgpack:"lg"`
	ACLGen     uint64 `msgpack:"ag"`
	Checksum   uint64 `msgpack:"ck"`
	Size       int    `msgpack:"sz"`
	IsDir      bool   `msgpack:"dir"`
	Ephemeral  bool   `msgpack:"eph"`
	Owner      uint64 `msgpack:"own,omitempty"` // session owning an ephemeral node
	Mtime      int64  `msgpack:"mt"`            // Unix nanoseconds of the last change
}

// node is one file or directory with its lock.
type node struct {
	Stat Stat   `msgpack:"st"`
	Data []byte `msgpack:"d"`
	// ACL is the node's ACL names (empty in nodes from before ACLs).
	ACL      ACL               `msgpack:"acl,omitempty"`
	Holders  map[uint64]holder `msgpack:"h"` // session → hold
	LockMode Mode              `msgpack:"lm"`
	Waiters  []waiter          `msgpack:"w"`
	// DelayUntil: no grant before this time (Unix ns), set when a holder's
	// session expired.
	DelayUntil int64 `msgpack:"du"`

	children map[string]struct{}
}

type holder struct {
	Mode      Mode   `msgpack:"m"`
	WaitID    uint64 `msgpack:"w"`
	LockDelay int64  `msgpack:"ld"`
}

type waiter struct {
	Session   uint64 `msgpack:"s"`
	Mode      Mode   `msgpack:"m"`
	WaitID    uint64 `msgpack:"w"`
	LockDelay int64  `msgpack:"ld"`
}

// sessionRec is a session as the state machine knows it: it exists until
// ended. Its lease lives on the master, not here.
type sessionRec struct {
	ID      uint64 `msgpack:"id"`
	TTL     int64  `msgpack:"ttl"`
	Created int64  `msgpack:"c"`
	Nonce   uint64 `msgpack:"n,omitempty"`
	// Secret: see CreateSession.Secret. Empty for a session created by a
	// build before secrets, which then accepts calls without one.
	Secret    []byte `msgpack:"k,omitempty"`
	Principal string `msgpack:"pr,omitempty"`  // see CreateSession.Principal
	NoCache   bool   `msgpack:"nca,omitempty"` // see CreateSession.NoCache
	// Calls remembers the results of the session's recent calls by call
	// id, so a call retried after a lost reply is answered, not applied
	// again. Entries below the client's acknowledged mark are dropped.
	Calls map[uint64]*cachedCall `msgpack:"calls,omitempty"`

	locks      map[string]struct{}
	waits      map[string]struct{}
	ephemerals map[string]struct{}
}

// cachedCall is a call's result as remembered for deduplication. The error
// is kept as its wire code and text, so every replica answers identically.
type cachedCall struct {
	Code   string    `msgpack:"c,omitempty"`
	Msg    string    `msgpack:"m,omitempty"`
	Stat   Stat      `msgpack:"st"`
	Seq    Sequencer `msgpack:"sq"`
	Queued bool      `msgpack:"q,omitempty"`
}

// maxCachedCalls bounds a session's remembered calls even if its client
// never advances its acknowledged mark: the oldest are forgotten first.
const maxCachedCalls = 1024

// SessionInfo describes a live session.
type SessionInfo struct {
	ID        uint64
	TTL       int64  // nanoseconds
	Secret    []byte // see CreateSession.Secret
	Principal string // see CreateSession.Principal
	NoCache   bool   // see CreateSession.NoCache
}

// State is the namespace state machine. It is deterministic: the same
// commands in the same order produce the same state on every replica. It is
// not safe for concurrent use; the server serialises Apply and reads.
type State struct {
	cell        string
	root        string
	counter     uint64 // source of instance and generation numbers
	nextSession uint64
	epoch       uint64
	applied     uint64
	nodes       map[string]*node
	sessions    map[uint64]*sessionRec
	removed     map[string]int64  // server id → when an operator removed it
	nonces      map[uint64]uint64 // CreateSession nonce → session id
	// acls are the parsed ACL files by name, derived from the files under
	// /ls/<cell>/acl/ (kept up to date by every change of one, rebuilt by
	// Restore): a permission check is a map lookup.
	acls map[string]*ACLFile
}

// New returns an empty namespace for cell, holding only the root directory.
func New(cell string) *State {
	s := &State{cell: cell, root: Root(cell)}
	s.reset()
	return s
}

func (s *State) reset() {
	s.counter, s.nextSession, s.epoch, s.applied = 0, 0, 0, 0
	s.nodes = map[string]*node{}
	s.sessions = map[uint64]*sessionRec{}
	s.nonces = map[uint64]uint64{}
	s.removed = nil
	s.acls = map[string]*ACLFile{}
	s.counter++
	s.nodes[s.root] = &node{Stat: Stat{Instance: s.counter, IsDir: true}, children: map[string]struct{}{}}
}

// Cell returns the cell name.
func (s *State) Cell() string { return s.cell }

// Epoch returns the current master epoch.
func (s *State) Epoch() uint64 { return s.epoch }

// AppliedIndex returns the raft index of the last applied command.
func (s *State) AppliedIndex() uint64 { return s.applied }

func (s *State) next() uint64 {
	s.counter++
	return s.counter
}

func checksum(b []byte) uint64 {
	h := fnv.New64a()
	h.Write(b)
	return h.Sum64()
}

// Stat returns the metadata of path.
func (s *State) Stat(path string) (Stat, error) {
	n, err := s.lookup(path, 0)
	if err != nil {
		return Stat{}, err
	}
	return n.Stat, nil
}

// Get returns the contents and metadata of a file. The returned slice is
// shared with the state and must not be modified (contents are replaced,
// never mutated in place).
func (s *State) Get(path string, instance uint64) ([]byte, Stat, error) {
	n, err := s.lookup(path, instance)
	if err != nil {
		return nil, Stat{}, err
	}
	if n.Stat.IsDir {
		return nil, Stat{}, errf(ErrIsDir, "%s", path)
	}
	return n.Data, n.Stat, nil
}

// StatInstance is Stat through a handle bound to instance (0: any).
func (s *State) StatInstance(path string, instance uint64) (Stat, error) {
	n, err := s.lookup(path, instance)
	if err != nil {
		return Stat{}, err
	}
	return n.Stat, nil
}

// Children returns the sorted child names of a directory.
func (s *State) Children(path string, instance uint64) ([]string, error) {
	n, err := s.lookup(path, instance)
	if err != nil {
		return nil, err
	}
	if !n.Stat.IsDir {
		return nil, errf(ErrNotDir, "%s", path)
	}
	out := make([]string, 0, len(n.children))
	for c := range n.children {
		out = append(out, c)
	}
	sort.Strings(out)
	return out, nil
}

// CheckSequencer reports whether seq is valid now: its lock is held in its
// mode at its generation.
func (s *State) CheckSequencer(seq Sequencer) bool {
	n, ok := s.nodes[seq.Path]
	return ok && len(n.Holders) > 0 && n.LockMode == seq.Mode && n.Stat.LockGen == seq.Gen
}

// HeldSequencer returns the sequencer of the lock on path held by session.
func (s *State) HeldSequencer(session uint64, path string) (Sequencer, error) {
	n, ok := s.nodes[path]
	if !ok {
		return Sequencer{}, errf(ErrNoSuchNode, "%s", path)
	}
	h, ok := n.Holders[session]
	if !ok {
		return Sequencer{}, errf(ErrNotHeld, "%s is not held by this session", path)
	}
	return Sequencer{Path: path, Mode: h.Mode, Gen: n.Stat.LockGen}, nil
}

// SessionExists reports whether session is live in the replicated state.
func (s *State) SessionExists(id uint64) bool {
	_, ok := s.sessions[id]
	return ok
}

// Sessions lists the live sessions, by id.
func (s *State) Sessions() []SessionInfo {
	out := make([]SessionInfo, 0, len(s.sessions))
	for _, r := range s.sessions {
		out = append(out, SessionInfo{ID: r.ID, TTL: r.TTL, Secret: r.Secret, Principal: r.Principal, NoCache: r.NoCache})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// DelayedLocks lists free locks with waiters whose lock-delay has not been
// resolved yet, so a new master can re-arm their timers.
func (s *State) DelayedLocks() []Delayed {
	var out []Delayed
	for p, n := range s.nodes {
		if len(n.Holders) == 0 && len(n.Waiters) > 0 && n.DelayUntil != 0 {
			out = append(out, Delayed{Path: p, Until: n.DelayUntil})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out
}

// SessionPaths lists the nodes whose state ending the session may change:
// those it holds locks on, waits for, or owns as ephemeral files.
func (s *State) SessionPaths(id uint64) []string {
	rec, ok := s.sessions[id]
	if !ok {
		return nil
	}
	seen := map[string]struct{}{}
	for _, m := range []map[string]struct{}{rec.locks, rec.waits, rec.ephemerals} {
		for p := range m {
			seen[p] = struct{}{}
		}
	}
	return sortedKeys(seen)
}

// RemovedServers returns the ids of servers an operator removed for good.
func (s *State) RemovedServers() map[string]bool {
	out := make(map[string]bool, len(s.removed))
	for id := range s.removed {
		out[id] = true
	}
	return out
}

// SessionCount returns the number of live sessions (without listing them).
func (s *State) SessionCount() int { return len(s.sessions) }

// NodeCount returns the number of nodes including the root.
func (s *State) NodeCount() int { return len(s.nodes) }

// lookup finds a node by path, checking a handle's instance when non-zero.
func (s *State) lookup(path string, instance uint64) (*node, error) {
	if err := CheckPath(s.cell, path); err != nil {
		return nil, err
	}
	n, ok := s.nodes[path]
	if instance != 0 {
		if !ok || n.Stat.Instance != instance {
			return nil, errf(ErrStaleHandle, "%s: the node this handle opened was deleted", path)
		}
		return n, nil
	}
	if !ok {
		return nil, errf(ErrNoSuchNode, "%s", path)
	}
	return n, nil
}
