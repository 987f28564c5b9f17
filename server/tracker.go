package server

import (
	"fmt"
	"sync"
	"time"

	"github.com/chubby-dev/chubby/fs"
	"github.com/chubby-dev/chubby/wire"
)

// tracker is the master's in-memory knowledge of which sessions may cache
// which nodes and which sessions watch which nodes (Chubby §2.5, §2.6). It
// is rebuilt empty by each new master: clients flush their caches and
// re-subscribe on master failover.
//
// Invalidation protocol (DESIGN invariant 5). Before a write on paths P:
//
//	lock: uncachable[p]++ and take cachers[p] for p in P
//	send each cacher an invalidation (answers its parked KeepAlive at once)
//	wait until each acknowledged (its next KeepAlive) or its lease, as of
//	     now, has run out; likewise for every session carried over from an
//	     earlier master that has not yet talked to this one (it may still
//	     cache anything)
//	     also wait for the invalidations of earlier writes of P still in
//	     flight: they took the cachers, which may still serve the old value
//	propose the write; after it is applied: uncachable[p]--
//
// A read admitted while a path is uncachable is answered but marked not
// cacheable and its session is not recorded as a cacher.
type tracker struct {
	s  *Server
	mu sync.Mutex

	cachers    map[string]map[uint64]struct{}
	cachedBy   map[uint64]map[string]struct{} // session → paths, to forget a session
	uncachable map[string]int
	// inflight: per path, the invalidation rounds of writes not yet
	// applied. A later write of the path finds no cachers left to
	// invalidate, but must not commit before they acknowledged.
	inflight map[string]map[*invalRound]struct{}

	watches   map[string]map[uint64]uint32 // path → session → event mask
	watchedBy map[uint64]map[string]struct{}
}

func newTracker(s *Server) *tracker {
	t := &tracker{s: s}
	t.reset()
	return t
}

func (t *tracker) reset() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.cachers = map[string]map[uint64]struct{}{}
	t.cachedBy = map[uint64]map[string]struct{}{}
	t.uncachable = map[string]int{}
	t.inflight = map[string]map[*invalRound]struct{}{}
	t.watches = map[string]map[uint64]uint32{}
	t.watchedBy = map[uint64]map[string]struct{}{}
}

// admit records that session may cache path and reports whether it may: not
// while an invalidation of path is in progress.
func (t *tracker) admit(session uint64, path string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.uncachable[path] > 0 {
		return false
	}
	addTo(t.cachers, path, session)
	addTo(t.cachedBy, session, path)
	return true
}

func addTo[K comparable, V comparable](m map[K]map[V]struct{}, k K, v V) {
	set, ok := m[k]
	if !ok {
		set = map[V]struct{}{}
		m[k] = set
	}
	set[v] = struct{}{}
}

// beforeWrite makes paths uncachable and waits until every other session
// that may cache them has dropped them (or its lease ran out). The returned
// function makes them cachable again; call it once the write is applied. The
// error is not_master when the server began shutting down during the wait:
// the write is not proposed (its client retries on the next master).
func (t *tracker) beforeWrite(writer uint64, paths []string) (func(), error) {
	if len(paths) == 0 {
		return func() {}, nil
	}
	t.mu.Lock()
	round := &invalRound{ready: make(chan struct{})}
	earlier := map[*invalRound]struct{}{}
	targets := map[uint64][]string{}
	for _, p := range paths {
		t.uncachable[p]++
		rounds, ok := t.inflight[p]
		if !ok {
			rounds = map[*invalRound]struct{}{}
			t.inflight[p] = rounds
		}
		for r := range rounds {
			earlier[r] = struct{}{}
		}
		rounds[round] = struct{}{}
		for sess := range t.cachers[p] {
			delete(t.cachedBy[sess], p)
			if sess != writer { // the writer dropped its own entries before sending
				targets[sess] = append(targets[sess], p)
			}
		}
		delete(t.cachers, p)
	}
	t.mu.Unlock()
	release := func() {
		t.mu.Lock()
		for _, p := range paths {
			if t.uncachable[p]--; t.uncachable[p] <= 0 {
				delete(t.uncachable, p)
			}
			if delete(t.inflight[p], round); len(t.inflight[p]) == 0 {
				delete(t.inflight, p)
			}
		}
		t.mu.Unlock()
	}
	// Send every invalidation before waiting for any: the write waits for
	// the slowest cacher, not for the sum of their round trips.
	var waits []ackWait
	for sess, ps := range targets {
		if acked, deadline, ok := t.s.leases.invalidate(sess, ps); ok {
			waits = append(waits, ackWait{session: sess, done: acked, deadline: deadline})
		}
	}
	round.waits = waits
	close(round.ready)
	for r := range earlier {
		<-r.ready // closed by its writer as soon as it has sent its invalidations
		waits = append(waits, r.waits...)
	}
	waits = append(waits, t.s.leases.unflushed(writer)...)
	if len(waits) == 0 {
		return release, nil
	}
	start := time.Now()
	for _, w := range waits {
		t.await(w)
	}
	t.s.metrics.invalWait.Observe(time.Since(start).Seconds())
	select {
	case <-t.s.shutdown:
		return release, fmt.Errorf("%w: %s is shutting down", wire.ErrNotMaster, t.s.cfg.NodeID)
	default:
	}
	return release, nil
}

// invalRound is the invalidations one write sent: waits is set, and ready
// closed, once they are all sent.
type invalRound struct {
	ready chan struct{}
	waits []ackWait
}

// ackWait is what a write waits for from one session: done closed, or the
// session's lease (as the master saw it when the wait began) over.
type ackWait struct {
	session  uint64
	done     <-chan struct{}
	deadline time.Time
}

func (t *tracker) await(w ackWait) {
	wait := w.deadline.Sub(t.s.clock.Now())
	if wait <= 0 {
		return
	}
	timer := t.s.clock.NewTimer(wait)
	defer timer.Stop()
	select {
	case <-w.done:
	case <-timer.C():
		t.s.log.Debug("a caching session did not acknowledge before its lease ran out", "session", w.session)
	case <-t.s.shutdown:
	}
}

// forget drops a session that ended.
func (t *tracker) forget(session uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for p := range t.cachedBy[session] {
		delete(t.cachers[p], session)
		if len(t.cachers[p]) == 0 {
			delete(t.cachers, p)
		}
	}
	delete(t.cachedBy, session)
	for p := range t.watchedBy[session] {
		delete(t.watches[p], session)
		if len(t.watches[p]) == 0 {
			delete(t.watches, p)
		}
	}
	delete(t.watchedBy, session)
}

// watch subscribes session to mask's events on path (or'ed with earlier
// subscriptions); a zero mask unsubscribes.
func (t *tracker) watch(session uint64, path string, mask uint32) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if mask == 0 {
		delete(t.watches[path], session)
		if len(t.watches[path]) == 0 {
			delete(t.watches, path)
		}
		delete(t.watchedBy[session], path)
		return
	}
	m, ok := t.watches[path]
	if !ok {
		m = map[uint64]uint32{}
		t.watches[path] = m
	}
	m[session] |= mask
	addTo(t.watchedBy, session, path)
}

// publish turns an applied command's changes into events for the sessions
// watching the nodes, queued on their KeepAlive replies in commit order.
func (t *tracker) publish(changes []fs.Change) {
	if len(changes) == 0 {
		return
	}
	out := map[uint64][]wire.Event{}
	t.mu.Lock()
	emit := func(watched string, typ wire.EventType, path string) {
		bit := typ.Bit()
		for sess, mask := range t.watches[watched] {
			if mask&bit != 0 {
				out[sess] = append(out[sess], wire.Event{Type: typ, Path: path})
			}
		}
	}
	for _, ch := range changes {
		dir, _ := fs.Split(ch.Path)
		switch ch.Kind {
		case fs.Created:
			emit(dir, wire.EventChildAdded, ch.Path)
		case fs.Modified:
			emit(ch.Path, wire.EventContentsModified, ch.Path)
			emit(dir, wire.EventChildModified, ch.Path)
		case fs.Deleted:
			emit(ch.Path, wire.EventHandleInvalid, ch.Path)
			emit(dir, wire.EventChildRemoved, ch.Path)
			for sess := range t.watches[ch.Path] {
				delete(t.watchedBy[sess], ch.Path)
			}
			delete(t.watches, ch.Path)
		case fs.LockAcquired:
			emit(ch.Path, wire.EventLockAcquired, ch.Path)
		case fs.LockConflict:
			emit(ch.Path, wire.EventConflictingLock, ch.Path)
		}
	}
	t.mu.Unlock()
	for sess, evs := range out {
		t.s.metrics.events.Add(float64(len(evs)))
		t.s.leases.pushEvents(sess, evs)
	}
}

// writePaths are the paths whose cached entries a command may change: the
// node, and its parent directory's listing and stat when nodes come or go;
// for the end of a session, every node it held a lock on or owned.
func (s *Server) writePaths(cmd *fs.Command) []string {
	withParent := func(p string) []string {
		if dir, _ := fs.Split(p); dir != "" {
			return []string{p, dir}
		}
		return []string{p}
	}
	switch cmd.Op {
	case fs.OpCreate, fs.OpSetContents, fs.OpDelete:
		if fs.CheckPath(s.cfg.Cell, cmd.Path()) != nil || cmd.Path() == fs.Root(s.cfg.Cell) {
			return []string{cmd.Path()}
		}
		return withParent(cmd.Path())
	case fs.OpAcquire, fs.OpRelease, fs.OpCancelWait, fs.OpGrantDelayed:
		return []string{cmd.Path()}
	case fs.OpEndSession:
		var paths []string
		s.fsm.read(func(st *fs.State) { paths = st.SessionPaths(cmd.Session) })
		var out []string
		for _, p := range paths {
			out = append(out, withParent(p)...)
		}
		return out
	}
	return nil
}

// proposeWrite runs the invalidation protocol for cmd's paths and proposes
// it on behalf of the session cmd.Session.
func (s *Server) proposeWrite(cmd *fs.Command) (*fs.Result, error) {
	release, err := s.tracker.beforeWrite(cmd.Session, s.writePaths(cmd))
	defer release()
	if err != nil {
		return nil, err
	}
	return s.propose(cmd)
}
