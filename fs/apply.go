package fs

import (
	"time"
)

// handlers is the one dispatch table of the state machine.
var handlers = [opMax]func(*State, *Command, *Result){
	OpNewEpoch:      (*State).applyNewEpoch,
	OpCreateSession: (*State).applyCreateSession,
	OpEndSession:    (*State).applyEndSession,
	OpCreate:        (*State).applyCreate,
	OpSetContents:   (*State).applySetContents,
	OpDelete:        (*State).applyDelete,
	OpAcquire:       (*State).applyAcquire,
	OpCancelWait:    (*State).applyCancelWait,
	OpRelease:       (*State).applyRelease,
	OpGrantDelayed:  (*State).applyGrantDelayed,
	OpRemoveServer:  (*State).applyRemoveServer,
}

// Apply applies the command at raft log index to the state and returns its
// result. A command that fails leaves the state unchanged.
func (s *State) Apply(index uint64, c *Command) *Result {
	r := &Result{}
	if index > s.applied {
		s.applied = index
	}
	if c.Op == OpInvalid || c.Op >= opMax || handlers[c.Op] == nil {
		r.Err = errf(ErrBadRequest, "unknown command op %d", c.Op)
		return r
	}
	rec := s.sessions[c.Session]
	if c.CallID != 0 && rec != nil {
		rec.forgetCalls(c.Acked)
		if cc, ok := rec.Calls[c.CallID]; ok {
			// A retry of a call already applied: the same answer, no effects.
			r.Stat, r.Seq, r.Queued = cc.Stat, cc.Seq, cc.Queued
			if cc.Code != "" {
				r.Err = FromCode(cc.Code, cc.Msg)
			}
			return r
		}
	}
	handlers[c.Op](s, c, r)
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
		cc.Code, cc.Msg = Code(r.Err), r.Err.Error()
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

func (s *State) applyNewEpoch(c *Command, r *Result) {
	s.epoch++
	r.Epoch = s.epoch
}

func (s *State) applyCreateSession(c *Command, r *Result) {
	if c.TTL <= 0 {
		r.Err = errf(ErrBadRequest, "session TTL must be positive")
		return
	}
	if id, ok := s.nonces[c.Nonce]; ok && c.Nonce != 0 {
		r.Session = id // a retry whose first reply was lost
		return
	}
	s.nextSession++
	rec := &sessionRec{ID: s.nextSession, TTL: c.TTL, Created: c.Now, Nonce: c.Nonce}
	rec.init()
	s.sessions[rec.ID] = rec
	if c.Nonce != 0 {
		s.nonces[c.Nonce] = rec.ID
	}
	r.Session = rec.ID
}

func (rec *sessionRec) init() {
	rec.locks = map[string]struct{}{}
	rec.waits = map[string]struct{}{}
	rec.ephemerals = map[string]struct{}{}
}

func (s *State) session(id uint64) (*sessionRec, error) {
	rec, ok := s.sessions[id]
	if !ok {
		return nil, errf(ErrSessionExpired, "session %d", id)
	}
	return rec, nil
}

func (s *State) applyEndSession(c *Command, r *Result) {
	rec, err := s.session(c.Session)
	if err != nil {
		r.Err = err
		return
	}
	// Sorted, so that every replica reports the same effects in the same order.
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
	// Ephemerals go before the locks are handed on, so that no waiter is
	// granted a lock on a node this same apply deletes: such waits are
	// cancelled with the node instead.
	for _, p := range sortedKeys(rec.ephemerals) {
		if n, ok := s.nodes[p]; ok && len(n.children) == 0 {
			s.removeNode(p, n, c.Now, r)
		}
	}
	for _, p := range sortedKeys(rec.locks) {
		n := s.nodes[p]
		h := n.Holders[rec.ID]
		delete(n.Holders, rec.ID)
		if c.Expired && h.LockDelay > 0 {
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

func (s *State) applyCreate(c *Command, r *Result) {
	if c.Session != 0 {
		if _, err := s.session(c.Session); err != nil {
			r.Err = err
			return
		}
	}
	if c.IsDir && c.Ephemeral {
		r.Err = errf(ErrBadRequest, "ephemeral nodes are files")
		return
	}
	if c.Ephemeral && c.Session == 0 {
		r.Err = errf(ErrBadRequest, "an ephemeral node needs a session")
		return
	}
	if err := CheckPath(s.cell, c.Path); err != nil {
		r.Err = err
		return
	}
	if n, ok := s.nodes[c.Path]; ok {
		if c.Exclusive {
			r.Err = errf(ErrExists, "%s", c.Path)
			return
		}
		if n.Stat.IsDir != c.IsDir {
			if n.Stat.IsDir {
				r.Err = errf(ErrIsDir, "%s", c.Path)
			} else {
				r.Err = errf(ErrNotDir, "%s", c.Path)
			}
			return
		}
		r.Stat = n.Stat
		return
	}
	if len(c.Data) > MaxContents {
		r.Err = errf(ErrTooLarge, "%d bytes (limit %d)", len(c.Data), MaxContents)
		return
	}
	n, err := s.addNode(c.Path, c.IsDir, c.Ephemeral, c.Session, c.Data, c.Now)
	if err != nil {
		r.Err = err
		return
	}
	r.Stat = n.Stat
	r.change(c.Path, Created)
}

// addNode creates a node whose parent must be an existing directory.
func (s *State) addNode(path string, isDir, ephemeral bool, owner uint64, data []byte, now int64) (*node, error) {
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
	n := &node{Stat: Stat{Instance: gen, ContentGen: gen, LockGen: gen, ACLGen: gen, IsDir: isDir, Ephemeral: ephemeral, Mtime: now}}
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

func (s *State) applySetContents(c *Command, r *Result) {
	if c.Session != 0 {
		if _, err := s.session(c.Session); err != nil {
			r.Err = err
			return
		}
	}
	if err := CheckPath(s.cell, c.Path); err != nil {
		r.Err = err
		return
	}
	if len(c.Data) > MaxContents {
		r.Err = errf(ErrTooLarge, "%d bytes (limit %d)", len(c.Data), MaxContents)
		return
	}
	if err := s.checkFence(c.Seq); err != nil {
		r.Err = err
		return
	}
	if _, ok := s.nodes[c.Path]; !ok && c.Instance == 0 && (c.CAS && c.Gen == 0 || !c.CAS && c.Create) {
		// A missing file is created by a plain write with Create, or by a
		// CAS on generation 0 ("only if absent"); a CAS on any other
		// generation expected the file to exist and fails below.
		nn, err := s.addNode(c.Path, false, false, 0, c.Data, c.Now)
		if err != nil {
			r.Err = err
			return
		}
		r.Stat = nn.Stat
		r.change(c.Path, Created)
		return
	}
	n, err := s.lookup(c.Path, c.Instance)
	if err != nil {
		r.Err = err
		return
	}
	if n.Stat.IsDir {
		r.Err = errf(ErrIsDir, "%s", c.Path)
		return
	}
	if c.CAS && n.Stat.ContentGen != c.Gen {
		r.Err = errf(ErrCASMismatch, "%s is at content generation %d, not %d", c.Path, n.Stat.ContentGen, c.Gen)
		return
	}
	n.Data = c.Data
	r.change(c.Path, Modified)
	n.Stat.ContentGen = s.next()
	n.Stat.Size = len(c.Data)
	n.Stat.Checksum = checksum(c.Data)
	n.Stat.Mtime = c.Now
	r.Stat = n.Stat
}

func (s *State) applyDelete(c *Command, r *Result) {
	if c.Session != 0 {
		if _, err := s.session(c.Session); err != nil {
			r.Err = err
			return
		}
	}
	n, err := s.lookup(c.Path, c.Instance)
	if err != nil {
		r.Err = err
		return
	}
	if c.Path == s.root {
		r.Err = errf(ErrPermission, "the root %s cannot be deleted", c.Path)
		return
	}
	if n.Stat.IsDir && len(n.children) > 0 {
		r.Err = errf(ErrNotEmpty, "%s has %d children", c.Path, len(n.children))
		return
	}
	if err := s.checkFence(c.Seq); err != nil {
		r.Err = err
		return
	}
	s.removeNode(c.Path, n, c.Now, r)
}

func (s *State) applyAcquire(c *Command, r *Result) {
	rec, err := s.session(c.Session)
	if err != nil {
		r.Err = err
		return
	}
	if !c.Mode.valid() {
		r.Err = errf(ErrBadRequest, "lock mode %d", c.Mode)
		return
	}
	if c.LockDelay < 0 || c.LockDelay > int64(60*time.Second) {
		r.Err = errf(ErrBadRequest, "lock-delay %v is outside [0, 60s]", time.Duration(c.LockDelay))
		return
	}
	n, err := s.lookup(c.Path, c.Instance)
	if err != nil {
		r.Err = err
		return
	}
	if h, ok := n.Holders[rec.ID]; ok {
		if h.Mode != c.Mode {
			r.Err = errf(ErrLockHeld, "%s is already held by this session in %s mode", c.Path, h.Mode)
			return
		}
		r.Seq = Sequencer{Path: c.Path, Mode: h.Mode, Gen: n.Stat.LockGen}
		return
	}
	for _, w := range n.Waiters {
		if w.Session == rec.ID {
			if c.Wait && w.WaitID == c.WaitID {
				r.Queued = true
				return
			}
			r.Err = errf(ErrLockHeld, "%s: this session is already waiting for it", c.Path)
			return
		}
	}
	if s.grantable(n, c.Mode, c.Now) {
		r.Seq = s.grant(c.Path, n, rec, waiter{Session: rec.ID, Mode: c.Mode, WaitID: c.WaitID, LockDelay: c.LockDelay})
		r.change(c.Path, LockAcquired)
		return
	}
	r.change(c.Path, LockConflict)
	if !c.Wait {
		if len(n.Holders) == 0 && c.Now < n.DelayUntil {
			r.Err = errf(ErrLockDelay, "%s is free but in lock-delay for another %v", c.Path, time.Duration(n.DelayUntil-c.Now))
		} else if len(n.Holders) == 0 {
			r.Err = errf(ErrLockDelay, "%s: its lock-delay is over but the waiters queued during it are not granted yet", c.Path)
		} else {
			r.Err = errf(ErrLockHeld, "%s is held in %s mode", c.Path, n.LockMode)
		}
		return
	}
	n.Waiters = append(n.Waiters, waiter{Session: rec.ID, Mode: c.Mode, WaitID: c.WaitID, LockDelay: c.LockDelay})
	rec.waits[c.Path] = struct{}{}
	r.Queued = true
	if len(n.Holders) == 0 {
		// Free but not grantable: a lock-delay runs, or has run out and its
		// GrantDelayed is still to come. Either way the master arms a timer.
		r.Delayed = append(r.Delayed, Delayed{Path: c.Path, Until: n.DelayUntil})
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

func (s *State) applyCancelWait(c *Command, r *Result) {
	rec, err := s.session(c.Session)
	if err != nil {
		r.Err = err
		return
	}
	n, ok := s.nodes[c.Path]
	if !ok {
		return
	}
	for i, w := range n.Waiters {
		if w.Session == rec.ID && w.WaitID == c.WaitID {
			n.Waiters = append(n.Waiters[:i], n.Waiters[i+1:]...)
			delete(rec.waits, c.Path)
			r.Cancelled = append(r.Cancelled, Wait{Session: rec.ID, Path: c.Path, WaitID: c.WaitID})
			if len(n.Holders) > 0 && n.LockMode == Shared || len(n.Holders) == 0 {
				// A cancelled head may have been blocking shared waiters.
				s.grantWaiters(c.Path, n, c.Now, r)
			}
			return
		}
	}
	// The wait was granted before the cancel arrived: give the lock back.
	if h, ok := n.Holders[rec.ID]; ok && h.WaitID == c.WaitID && c.WaitID != 0 {
		s.release(c.Path, n, rec, c.Now, r)
	}
}

func (s *State) applyRelease(c *Command, r *Result) {
	rec, err := s.session(c.Session)
	if err != nil {
		r.Err = err
		return
	}
	n, ok := s.nodes[c.Path]
	if !ok {
		r.Err = errf(ErrNotHeld, "%s no longer exists", c.Path)
		return
	}
	if _, held := n.Holders[rec.ID]; !held || n.Stat.LockGen != c.Gen {
		r.Err = errf(ErrNotHeld, "%s is not held by this session at generation %d", c.Path, c.Gen)
		return
	}
	s.release(c.Path, n, rec, c.Now, r)
}

func (s *State) release(path string, n *node, rec *sessionRec, now int64, r *Result) {
	delete(n.Holders, rec.ID)
	delete(rec.locks, path)
	if len(n.Holders) == 0 {
		n.LockMode = 0
		s.grantWaiters(path, n, now, r)
	}
}

func (s *State) applyGrantDelayed(c *Command, r *Result) {
	n, ok := s.nodes[c.Path]
	if !ok || len(n.Holders) > 0 {
		return
	}
	s.grantWaiters(c.Path, n, c.Now, r)
}

func (s *State) applyRemoveServer(c *Command, r *Result) {
	if c.Path == "" {
		r.Err = errf(ErrBadRequest, "remove-server needs a server id")
		return
	}
	if s.removed == nil {
		s.removed = map[string]int64{}
	}
	s.removed[c.Path] = c.Now
}
