package fs

import (
	"time"
)

// handlers is the one dispatch table of the state machine: for each op,
// what it needs of the envelope's session, and its handler, which gets the
// envelope (clock, session), the session's record and the op's typed body.
var handlers = [opMax]opHandler{
	OpNewEpoch:      handler(anySession, (*State).applyNewEpoch),
	OpCreateSession: handler(anySession, (*State).applyCreateSession),
	OpEndSession:    handler(liveSession, (*State).applyEndSession),
	OpCreate:        handler(liveIfNamed, (*State).applyCreate),
	OpSetContents:   handler(liveIfNamed, (*State).applySetContents),
	OpDelete:        handler(liveIfNamed, (*State).applyDelete),
	OpAcquire:       handler(liveSession, (*State).applyAcquire),
	OpCancelWait:    handler(liveSession, (*State).applyCancelWait),
	OpRelease:       handler(liveSession, (*State).applyRelease),
	OpGrantDelayed:  handler(anySession, (*State).applyGrantDelayed),
	OpRemoveServer:  handler(anySession, (*State).applyRemoveServer),
	OpSetACL:        handler(liveIfNamed, (*State).applySetACL),
	OpInitACLs:      handler(anySession, (*State).applyInitACLs),
}

// sessionRule is what an op needs of Command.Session, checked before its
// handler runs (after a retried call is answered from memory).
type sessionRule uint8

const (
	anySession  sessionRule = iota // the op does not look at it
	liveIfNamed                    // a namespace write: a session it names must not have ended
	liveSession                    // the op acts for the session, which must not have ended
)

type opHandler struct {
	session sessionRule
	apply   func(s *State, c *Command, rec *sessionRec, r *Result)
}

// handler adapts the handler of one body type to the table. Apply has
// checked that the body is the op's (Command.check), and each body type
// belongs to one op, so the assertion holds.
func handler[B Body](rule sessionRule, h func(*State, *Command, *sessionRec, B, *Result)) opHandler {
	return opHandler{rule, func(s *State, c *Command, rec *sessionRec, r *Result) { h(s, c, rec, c.Body.(B), r) }}
}

// Apply applies the command at raft log index to the state and returns its
// result. A command that fails leaves the state unchanged.
func (s *State) Apply(index uint64, c *Command) *Result {
	r := &Result{}
	if index > s.applied {
		s.applied = index
	}
	if err := c.check(); err != nil {
		r.Err = err
		return r
	}
	rec := s.sessions[c.Session]
	if c.CallID != 0 && rec != nil {
		rec.forgetCalls(c.Acked)
		if cc, ok := rec.Calls[c.CallID]; ok {
			// A retry of a call already applied: the same answer, no effects.
			r.Stat, r.Seq, r.Queued = cc.Stat, cc.Seq, cc.Queued
			if cc.Code != "" {
				r.Err = Codes.FromCode(cc.Code, cc.Msg)
			}
			return r
		}
	}
	h := handlers[c.Op]
	if rec == nil && (h.session == liveSession || h.session == liveIfNamed && c.Session != 0) {
		r.Err = errf(ErrSessionExpired, "session %d", c.Session)
		return r
	}
	h.apply(s, c, rec, r)
	if c.CallID != 0 && rec != nil && s.sessions[c.Session] == rec {
		rec.rememberCall(c.CallID, r)
	}
	return r
}

// forgetCalls drops remembered calls the client has had replies to.
func (rec *sessionRec) forgetCalls(acked uint64) {
	for id := range rec.Calls {
		if id < acked {
			delete(rec.Calls, id)
		}
	}
}

func (rec *sessionRec) rememberCall(id uint64, r *Result) {
	if rec.Calls == nil {
		rec.Calls = map[uint64]*cachedCall{}
	}
	cc := &cachedCall{Stat: r.Stat, Seq: r.Seq, Queued: r.Queued}
	if r.Err != nil {
		cc.Code, cc.Msg = Codes.Code(r.Err), r.Err.Error()
	}
	rec.Calls[id] = cc
	for len(rec.Calls) > maxCachedCalls {
		oldest := id
		for k := range rec.Calls {
			if k < oldest {
				oldest = k
			}
		}
		delete(rec.Calls, oldest)
	}
}

func (s *State) applyNewEpoch(_ *Command, _ *sessionRec, _ *NewEpoch, r *Result) {
	s.epoch++
	r.Epoch = s.epoch
}

func (s *State) applyCreateSession(c *Command, _ *sessionRec, b *CreateSession, r *Result) {
	if b.TTL <= 0 {
		r.Err = errf(ErrBadRequest, "session TTL must be positive")
		return
	}
	if id, ok := s.nonces[b.Nonce]; ok && b.Nonce != 0 {
		r.Session = id // a retry whose first reply was lost
		r.Secret = s.sessions[id].Secret
		return
	}
	s.nextSession++
	rec := &sessionRec{ID: s.nextSession, TTL: b.TTL, Created: c.Now, Nonce: b.Nonce, Secret: b.Secret, Principal: b.Principal, NoCache: b.NoCache}
	rec.init()
	s.sessions[rec.ID] = rec
	if b.Nonce != 0 {
		s.nonces[b.Nonce] = rec.ID
	}
	r.Session, r.Secret = rec.ID, rec.Secret
}

func (rec *sessionRec) init() {
	rec.locks = map[string]struct{}{}
	rec.waits = map[string]struct{}{}
	rec.ephemerals = map[string]struct{}{}
}

func (s *State) applyEndSession(c *Command, rec *sessionRec, b *EndSession, r *Result) {
	// Ephemerals go first, before any lock is handed on — also before the
	// session's own waits are removed, which can grant shared waiters — so
	// that no waiter is granted a lock on a node this same apply deletes:
	// such waits are cancelled with the node instead (removeNode also drops
	// the node from this session's waits and locks).
	// Sorted, so that every replica reports the same effects in the same order.
	for _, p := range sortedKeys(rec.ephemerals) {
		if n, ok := s.nodes[p]; ok && len(n.children) == 0 {
			s.removeNode(p, n, c.Now, r)
		}
	}
	for _, p := range sortedKeys(rec.waits) {
		n := s.nodes[p]
		kept := n.Waiters[:0]
		for _, w := range n.Waiters {
			if w.Session == rec.ID {
				r.Cancelled = append(r.Cancelled, Wait{Session: rec.ID, Path: p, WaitID: w.WaitID})
				continue
			}
			kept = append(kept, w)
		}
		n.Waiters = kept
		if len(n.Holders) > 0 && n.LockMode == Shared {
			// The removed wait may have been an exclusive head blocking
			// shared waiters behind shared holders (as in CancelWait).
			s.grantWaiters(p, n, c.Now, r)
		}
	}
	for _, p := range sortedKeys(rec.locks) {
		n := s.nodes[p]
		h := n.Holders[rec.ID]
		delete(n.Holders, rec.ID)
		if b.Expired && h.LockDelay > 0 {
			if until := c.Now + h.LockDelay; until > n.DelayUntil {
				n.DelayUntil = until
			}
		}
		if len(n.Holders) == 0 {
			n.LockMode = 0
			s.grantWaiters(p, n, c.Now, r)
		}
	}
	delete(s.sessions, rec.ID)
	delete(s.nonces, rec.Nonce)
	r.Ended = append(r.Ended, rec.ID)
}

func (s *State) applyCreate(c *Command, rec *sessionRec, b *Create, r *Result) {
	if b.IsDir && b.Ephemeral {
		r.Err = errf(ErrBadRequest, "ephemeral nodes are files")
		return
	}
	if b.Ephemeral && c.Session == 0 {
		r.Err = errf(ErrBadRequest, "an ephemeral node needs a session")
		return
	}
	if err := CheckPath(s.cell, b.Path); err != nil {
		r.Err = err
		return
	}
	if err := s.checkFence(b.Seq); err != nil {
		r.Err = err
		return
	}
	if err := b.ACL.check(s.cell); err != nil {
		r.Err = err
		return
	}
	if _, ok := s.nodes[b.Path]; ok && !b.Exclusive {
		// Opening what exists: a read of it.
		if err := s.authorize(c, b.Path, PermRead); err != nil {
			r.Err = err
			return
		}
	} else if err := s.authorizeCreate(c, b.Path); err != nil {
		r.Err = err
		return
	}
	if n, ok := s.nodes[b.Path]; ok {
		if b.Exclusive {
			r.Err = errf(ErrExists, "%s", b.Path)
			return
		}
		if n.Stat.IsDir != b.IsDir {
			if n.Stat.IsDir {
				r.Err = errf(ErrIsDir, "%s", b.Path)
			} else {
				r.Err = errf(ErrNotDir, "%s", b.Path)
			}
			return
		}
		r.Stat = n.Stat
		return
	}
	if len(b.Data) > MaxContents {
		r.Err = errf(ErrTooLarge, "%d bytes (limit %d)", len(b.Data), MaxContents)
		return
	}
	n, err := s.addNode(b.Path, b.IsDir, b.Ephemeral, c.Session, b.Data, c.Now, b.ACL)
	if err != nil {
		r.Err = err
		return
	}
	r.Stat = n.Stat
	r.change(b.Path, Created)
}

// addNode creates a node whose parent must be an existing directory. Its
// ACL names are acl's, each one left empty taken from what governs the
// parent (Chubby: a new node copies its parent's names).
func (s *State) addNode(path string, isDir, ephemeral bool, owner uint64, data []byte, now int64, acl ACL) (*node, error) {
	if path == s.root {
		return nil, errf(ErrExists, "%s", path)
	}
	dir, name := Split(path)
	parent, ok := s.nodes[dir]
	if !ok {
		return nil, errf(ErrNoSuchNode, "parent %s of %s", dir, path)
	}
	if !parent.Stat.IsDir {
		return nil, errf(ErrNotDir, "parent %s of %s", dir, path)
	}
	gen := s.next()
	n := &node{Stat: Stat{Instance: gen, ContentGen: gen, LockGen: gen, ACLGen: gen, IsDir: isDir, Ephemeral: ephemeral, Mtime: now},
		ACL: acl.over(s.effectiveACL(dir))}
	if isDir {
		n.children = map[string]struct{}{}
	} else {
		n.Data = data
		n.Stat.Size = len(data)
		n.Stat.Checksum = checksum(data)
	}
	if ephemeral {
		n.Stat.Owner = owner
		s.sessions[owner].ephemerals[path] = struct{}{}
	}
	parent.children[name] = struct{}{}
	parent.Stat.Mtime = now
	s.nodes[path] = n
	s.aclFileChanged(path)
	return n, nil
}

// removeNode deletes a node: its holders lose the lock, its waiters are
// cancelled, its ephemeral owner forgets it.
func (s *State) removeNode(path string, n *node, now int64, r *Result) {
	r.change(path, Deleted)
	for id := range n.Holders {
		if rec, ok := s.sessions[id]; ok {
			delete(rec.locks, path)
		}
	}
	for _, w := range n.Waiters {
		if rec, ok := s.sessions[w.Session]; ok {
			delete(rec.waits, path)
		}
		r.Cancelled = append(r.Cancelled, Wait{Session: w.Session, Path: path, WaitID: w.WaitID})
	}
	if n.Stat.Ephemeral {
		if rec, ok := s.sessions[n.Stat.Owner]; ok {
			delete(rec.ephemerals, path)
		}
	}
	dir, name := Split(path)
	if parent, ok := s.nodes[dir]; ok {
		delete(parent.children, name)
		parent.Stat.Mtime = now
	}
	delete(s.nodes, path)
	s.aclFileChanged(path)
}

// checkFence verifies an optional sequencer carried by a write.
func (s *State) checkFence(seq *Sequencer) error {
	if seq == nil {
		return nil
	}
	if !s.CheckSequencer(*seq) {
		return errf(ErrBadSequencer, "%s is not held now", seq)
	}
	return nil
}

func (s *State) applySetContents(c *Command, rec *sessionRec, b *SetContents, r *Result) {
	if err := CheckPath(s.cell, b.Path); err != nil {
		r.Err = err
		return
	}
	if len(b.Data) > MaxContents {
		r.Err = errf(ErrTooLarge, "%d bytes (limit %d)", len(b.Data), MaxContents)
		return
	}
	if err := s.checkFence(b.Seq); err != nil {
		r.Err = err
		return
	}
	if _, ok := s.nodes[b.Path]; !ok && b.Instance == 0 && (b.CAS && b.ContentGen == 0 || !b.CAS && b.Create) {
		// A missing file is created by a plain write with Create, or by a
		// CAS on generation 0 ("only if absent"); a CAS on any other
		// generation expected the file to exist and fails below.
		if err := s.authorizeCreate(c, b.Path); err != nil {
			r.Err = err
			return
		}
		nn, err := s.addNode(b.Path, false, false, 0, b.Data, c.Now, ACL{})
		if err != nil {
			r.Err = err
			return
		}
		r.Stat = nn.Stat
		r.change(b.Path, Created)
		return
	}
	n, err := s.lookup(b.Path, b.Instance)
	if err != nil {
		r.Err = err
		return
	}
	if err := s.authorize(c, b.Path, PermWrite); err != nil {
		r.Err = err
		return
	}
	if n.Stat.IsDir {
		r.Err = errf(ErrIsDir, "%s", b.Path)
		return
	}
	if b.CAS && n.Stat.ContentGen != b.ContentGen {
		r.Err = errf(ErrCASMismatch, "%s is at content generation %d, not %d", b.Path, n.Stat.ContentGen, b.ContentGen)
		return
	}
	s.setData(n, b.Data, c.Now)
	s.aclFileChanged(b.Path)
	r.change(b.Path, Modified)
	r.Stat = n.Stat
}

// setData replaces a file's contents.
func (s *State) setData(n *node, data []byte, now int64) {
	n.Data = data
	n.Stat.ContentGen = s.next()
	n.Stat.Size = len(data)
	n.Stat.Checksum = checksum(data)
	n.Stat.Mtime = now
}

func (s *State) applyDelete(c *Command, rec *sessionRec, b *Delete, r *Result) {
	n, err := s.lookup(b.Path, b.Instance)
	if err != nil {
		r.Err = err
		return
	}
	if err := s.authorize(c, b.Path, PermWrite); err != nil {
		r.Err = err
		return
	}
	if b.Path == s.root {
		r.Err = errf(ErrPermission, "the root %s cannot be deleted", b.Path)
		return
	}
	if n.Stat.IsDir && len(n.children) > 0 {
		r.Err = errf(ErrNotEmpty, "%s has %d children", b.Path, len(n.children))
		return
	}
	if err := s.checkFence(b.Seq); err != nil {
		r.Err = err
		return
	}
	s.removeNode(b.Path, n, c.Now, r)
}

func (s *State) applyAcquire(c *Command, rec *sessionRec, b *Acquire, r *Result) {
	if !b.Mode.valid() {
		r.Err = errf(ErrBadRequest, "lock mode %d", b.Mode)
		return
	}
	if b.LockDelay < 0 || b.LockDelay > int64(60*time.Second) {
		r.Err = errf(ErrBadRequest, "lock-delay %v is outside [0, 60s]", time.Duration(b.LockDelay))
		return
	}
	n, err := s.lookup(b.Path, b.Instance)
	if err != nil {
		r.Err = err
		return
	}
	// Either mode needs write permission, so a reader cannot hold a writer off.
	if err := s.authorize(c, b.Path, PermWrite); err != nil {
		r.Err = err
		return
	}
	if h, ok := n.Holders[rec.ID]; ok {
		if h.Mode != b.Mode {
			r.Err = errf(ErrLockHeld, "%s is already held by this session in %s mode", b.Path, h.Mode)
			return
		}
		r.Seq = Sequencer{Path: b.Path, Mode: h.Mode, Gen: n.Stat.LockGen}
		return
	}
	// The session's own waits say whether it is in this queue, so a queue
	// of 50,000 is not scanned for each Acquire that joins it (issue 17:
	// that scan, in the single apply loop, held every other call up for
	// up to a second); only a session that is queued looks for its wait.
	if _, queued := rec.waits[b.Path]; queued {
		for _, w := range n.Waiters {
			if w.Session == rec.ID {
				if b.Wait && w.WaitID == b.WaitID {
					r.Queued = true
					return
				}
				r.Err = errf(ErrLockHeld, "%s: this session is already waiting for it", b.Path)
				return
			}
		}
	}
	if s.grantable(n, b.Mode, c.Now) {
		r.Seq = s.grant(b.Path, n, rec, waiter{Session: rec.ID, Mode: b.Mode, WaitID: b.WaitID, LockDelay: b.LockDelay})
		r.change(b.Path, LockAcquired)
		return
	}
	r.change(b.Path, LockConflict)
	if !b.Wait {
		if len(n.Holders) == 0 && c.Now < n.DelayUntil {
			r.Err = errf(ErrLockDelay, "%s is free but in lock-delay for another %v", b.Path, time.Duration(n.DelayUntil-c.Now))
		} else if len(n.Holders) == 0 {
			r.Err = errf(ErrLockDelay, "%s: its lock-delay is over but the waiters queued during it are not granted yet", b.Path)
		} else {
			r.Err = errf(ErrLockHeld, "%s is held in %s mode", b.Path, n.LockMode)
		}
		return
	}
	n.Waiters = append(n.Waiters, waiter{Session: rec.ID, Mode: b.Mode, WaitID: b.WaitID, LockDelay: b.LockDelay})
	rec.waits[b.Path] = struct{}{}
	r.Queued = true
	if len(n.Holders) == 0 {
		// Free but not grantable: a lock-delay runs, or has run out and its
		// GrantDelayed is still to come. Either way the master arms a timer.
		r.Delayed = append(r.Delayed, Delayed{Path: b.Path, Until: n.DelayUntil})
	}
}

// grantable: the lock is free, outside any lock-delay and with nobody queued
// (waiters on a free lock are those queued during a lock-delay: they go
// first, granted by the GrantDelayed that ends it); or it is shared, the
// request is shared and nobody is queued ahead (so writers are not starved).
// A lock-delay keeps out only the claims on a free lock: while other shared
// holders remain, the lock was never freed, and a shared request may join.
func (s *State) grantable(n *node, m Mode, now int64) bool {
	if len(n.Holders) == 0 {
		return now >= n.DelayUntil && len(n.Waiters) == 0
	}
	return m == Shared && n.LockMode == Shared && len(n.Waiters) == 0
}

func (s *State) grant(path string, n *node, rec *sessionRec, w waiter) Sequencer {
	if len(n.Holders) == 0 {
		n.Stat.LockGen = s.next()
		n.LockMode = w.Mode
		n.DelayUntil = 0
		if n.Holders == nil {
			n.Holders = map[uint64]holder{}
		}
	}
	n.Holders[rec.ID] = holder{Mode: w.Mode, WaitID: w.WaitID, LockDelay: w.LockDelay}
	rec.locks[path] = struct{}{}
	return Sequencer{Path: path, Mode: w.Mode, Gen: n.Stat.LockGen}
}

// grantWaiters hands a free lock to the head of its queue (and every shared
// waiter directly behind a shared head), unless a lock-delay is running; on a
// lock held shared it admits the shared waiters at the head of the queue.
func (s *State) grantWaiters(path string, n *node, now int64, r *Result) {
	if len(n.Waiters) == 0 {
		return
	}
	if len(n.Holders) == 0 && now < n.DelayUntil {
		r.Delayed = append(r.Delayed, Delayed{Path: path, Until: n.DelayUntil})
		return
	}
	for len(n.Waiters) > 0 {
		w := n.Waiters[0]
		if len(n.Holders) > 0 && !(w.Mode == Shared && n.LockMode == Shared) {
			break
		}
		n.Waiters = n.Waiters[1:]
		rec, ok := s.sessions[w.Session]
		if !ok {
			continue // cannot happen: ending a session removes its waits
		}
		delete(rec.waits, path)
		seq := s.grant(path, n, rec, w)
		r.Grants = append(r.Grants, Grant{Session: w.Session, WaitID: w.WaitID, Seq: seq})
		r.change(path, LockAcquired)
		if w.Mode == Exclusive {
			break
		}
	}
	if len(n.Waiters) == 0 {
		n.Waiters = nil
	}
}

func (s *State) applyCancelWait(c *Command, rec *sessionRec, b *CancelWait, r *Result) {
	n, ok := s.nodes[b.Path]
	if !ok {
		return
	}
	for i, w := range n.Waiters {
		if w.Session == rec.ID && w.WaitID == b.WaitID {
			n.Waiters = append(n.Waiters[:i], n.Waiters[i+1:]...)
			delete(rec.waits, b.Path)
			r.Cancelled = append(r.Cancelled, Wait{Session: rec.ID, Path: b.Path, WaitID: b.WaitID})
			if len(n.Holders) > 0 && n.LockMode == Shared || len(n.Holders) == 0 {
				// A cancelled head may have been blocking shared waiters.
				s.grantWaiters(b.Path, n, c.Now, r)
			}
			return
		}
	}
	// The wait was granted before the cancel arrived: give the lock back.
	if h, ok := n.Holders[rec.ID]; ok && h.WaitID == b.WaitID && b.WaitID != 0 {
		s.release(b.Path, n, rec, c.Now, r)
	}
}

func (s *State) applyRelease(c *Command, rec *sessionRec, b *Release, r *Result) {
	n, ok := s.nodes[b.Path]
	if !ok {
		r.Err = errf(ErrNotHeld, "%s no longer exists", b.Path)
		return
	}
	if _, held := n.Holders[rec.ID]; !held || n.Stat.LockGen != b.LockGen {
		r.Err = errf(ErrNotHeld, "%s is not held by this session at generation %d", b.Path, b.LockGen)
		return
	}
	s.release(b.Path, n, rec, c.Now, r)
}

func (s *State) release(path string, n *node, rec *sessionRec, now int64, r *Result) {
	delete(n.Holders, rec.ID)
	delete(rec.locks, path)
	if len(n.Holders) == 0 {
		n.LockMode = 0
		s.grantWaiters(path, n, now, r)
	}
}

func (s *State) applyGrantDelayed(c *Command, _ *sessionRec, b *GrantDelayed, r *Result) {
	n, ok := s.nodes[b.Path]
	if !ok || len(n.Holders) > 0 {
		return
	}
	s.grantWaiters(b.Path, n, c.Now, r)
}

func (s *State) applyRemoveServer(c *Command, _ *sessionRec, b *RemoveServer, r *Result) {
	if b.ServerID == "" {
		r.Err = errf(ErrBadRequest, "remove-server needs a server id")
		return
	}
	if s.removed == nil {
		s.removed = map[string]int64{}
	}
	s.removed[b.ServerID] = c.Now
}
