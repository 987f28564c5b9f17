package server

import (
	"fmt"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/chubby-dev/chubby/session"
	"github.com/chubby-dev/chubby/wire"
	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus"
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
//
// The tracker talks to sessions only through cacheSessions (the lease table
// in a server, a fake in its unit tests).
type tracker struct {
	sessions  cacheSessions
	clock     session.Clock
	log       hclog.Logger
	invalWait prometheus.Observer
	// done is closed when the server shuts down: waits end, and writes
	// still waiting are refused with not_master (node names the server).
	done <-chan struct{}
	node string

	mu sync.Mutex

	// cachers: per path, the sessions that may cache it; true for one
	// admitted by an event fill (fill.go), which is invalidated even by
	// its own writes.
	cachers    map[string]map[uint64]bool
	cachedBy   map[uint64]map[string]struct{} // session → paths, to forget a session
	uncachable map[string]int
	// allUncachable counts the writes of every path in flight (an ACL
	// file's: it may revoke any read): nothing is cachable meanwhile.
	allUncachable int
	// latest: per path, the invalidation round of the last write of it
	// not yet applied. A later write of the path finds no cachers left to
	// invalidate, but must not commit before they acknowledged: it waits
	// for that one round, which itself waited for the rounds before it,
	// so a write costs the same however many are queued on its path.
	latest map[string]*invalRound
	// waiting are the writes waiting now for acknowledgements (for the
	// status page and chubby_writes_waiting_invalidation).
	waiting map[*invalRound]waitingWrite
	gauge   prometheus.Gauge
}

// waitingWrite is a write waiting for cachers: its paths, since when (the
// lease clock), and how many sessions it waits for.
type waitingWrite struct {
	Paths    []string
	Since    time.Time
	Sessions int
}

// cacheSessions is how the tracker reaches the sessions that cache nodes.
type cacheSessions interface {
	// invalidate queues an invalidation of paths for session. acked is
	// closed when the session acknowledges it (or ends, or this server
	// stops being master); deadline is when the session's cache stops
	// serving the paths without an acknowledgement (its lease as of
	// now). ok is false if the session has no lease here.
	invalidate(session uint64, paths []string) (acked <-chan struct{}, deadline time.Time, ok bool)
	// unflushed returns, for every session but except carried over from
	// an earlier master and not yet heard from, what a write must wait
	// for (it may cache anything).
	unflushed(except uint64) []ackWait
}

func newTracker(sessions cacheSessions, clock session.Clock, log hclog.Logger, invalWait prometheus.Observer, waiting prometheus.Gauge, done <-chan struct{}, node string) *tracker {
	t := &tracker{sessions: sessions, clock: clock, log: log, invalWait: invalWait, gauge: waiting, done: done, node: node,
		waiting: map[*invalRound]waitingWrite{}}
	t.reset()
	return t
}

func (t *tracker) reset() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.cachers = map[string]map[uint64]bool{}
	t.cachedBy = map[uint64]map[string]struct{}{}
	t.uncachable = map[string]int{}
	t.allUncachable = 0
	t.latest = map[string]*invalRound{}
}

// admit records that session may cache path and reports whether it may: not
// while an invalidation of path is in progress.
func (t *tracker) admit(session uint64, path string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.uncachable[path] > 0 || t.allUncachable > 0 {
		return false
	}
	t.addCacherLocked(session, path, false)
	return true
}

// addCacherLocked records that session may cache path; byEvent marks an
// event fill's admission, which sticks until a write takes the cachers.
func (t *tracker) addCacherLocked(session uint64, path string, byEvent bool) {
	set, ok := t.cachers[path]
	if !ok {
		set = map[uint64]bool{}
		t.cachers[path] = set
	}
	set[session] = set[session] || byEvent
	addTo(t.cachedBy, session, path)
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
// Paths holding everyPath make the write one of every cached path: each
// path any session caches now is invalidated, and none is cachable until
// the write is applied (an ACL file edit: no cached read of the old ACLs
// outlives it).
func (t *tracker) beforeWrite(writer uint64, paths []string) (func(), error) {
	if len(paths) == 0 {
		return func() {}, nil
	}
	t.mu.Lock()
	all := slices.Contains(paths, everyPath)
	if all {
		t.allUncachable++
		paths = slices.DeleteFunc(slices.Clone(paths), func(p string) bool { return p == everyPath })
		for p := range t.cachers {
			paths = append(paths, p)
		}
	}
	round := &invalRound{acked: make(chan struct{})}
	defer close(round.acked) // once this write has waited for all it must
	var earlier []*invalRound
	targets := map[uint64][]string{}
	for _, p := range paths {
		t.uncachable[p]++
		if prev := t.latest[p]; prev != nil && prev != round { // paths may repeat
			earlier = append(earlier, prev)
		}
		t.latest[p] = round
		for sess, byEvent := range t.cachers[p] {
			delete(t.cachedBy[sess], p)
			// The writer dropped its own entries before sending, and fills
			// none while its write is in flight; but an event fill of an
			// earlier write may still be on its way to it and land after
			// its write returned: it is invalidated too (fill.go).
			if sess != writer || byEvent {
				targets[sess] = append(targets[sess], p)
			}
		}
		delete(t.cachers, p)
	}
	t.mu.Unlock()
	release := func() {
		t.mu.Lock()
		if all {
			t.allUncachable--
		}
		for _, p := range paths {
			if t.uncachable[p]--; t.uncachable[p] <= 0 {
				delete(t.uncachable, p)
			}
			if t.latest[p] == round {
				delete(t.latest, p)
			}
		}
		t.mu.Unlock()
	}
	// Send every invalidation before waiting for any: the write waits for
	// the slowest cacher, not for the sum of their round trips.
	var waits []ackWait
	for sess, ps := range targets {
		if acked, deadline, ok := t.sessions.invalidate(sess, ps); ok {
			waits = append(waits, ackWait{session: sess, done: acked, deadline: deadline})
		}
	}
	waits = append(waits, t.sessions.unflushed(writer)...)
	if len(waits) == 0 && len(earlier) == 0 {
		return release, nil
	}
	start := t.clock.Now()
	t.mu.Lock()
	t.waiting[round] = waitingWrite{Paths: paths, Since: start, Sessions: len(waits)}
	t.gauge.Set(float64(len(t.waiting)))
	t.mu.Unlock()
	for _, r := range earlier {
		select {
		case <-r.acked: // its writer waited for its cachers and the rounds before it
		case <-t.done:
		}
	}
	for _, w := range waits {
		t.await(w)
	}
	t.invalWait.Observe(t.clock.Now().Sub(start).Seconds())
	t.mu.Lock()
	delete(t.waiting, round)
	t.gauge.Set(float64(len(t.waiting)))
	t.mu.Unlock()
	select {
	case <-t.done:
		return release, fmt.Errorf("%w: %s is shutting down", wire.ErrNotMaster, t.node)
	default:
	}
	return release, nil
}

// everyPath, among a write's paths, stands for every path cached now.
const everyPath = "*"

// invalRound is one write's invalidations: acked is closed once its writer
// has waited for every cacher it invalidated and for the rounds of the
// same paths before it (acknowledged, or their leases over).
type invalRound struct {
	acked chan struct{}
}

// ackWait is what a write waits for from one session: done closed, or the
// session's lease (as the master saw it when the wait began) over.
type ackWait struct {
	session  uint64
	done     <-chan struct{}
	deadline time.Time
}

func (t *tracker) await(w ackWait) {
	wait := w.deadline.Sub(t.clock.Now())
	if wait <= 0 {
		return
	}
	timer := t.clock.NewTimer(wait)
	defer timer.Stop()
	select {
	case <-w.done:
	case <-timer.C():
		t.log.Debug("a caching session did not acknowledge before its lease ran out", "session", w.session)
	case <-t.done:
	}
}

// forget drops a session that ended.
func (t *tracker) forget(session uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	dropSession(t.cachers, t.cachedBy, session)
}

// dropSession removes session from the per-path sets its index lists, and
// the sets it leaves empty, and forgets its index entry.
func dropSession[V any](sets map[string]map[uint64]V, index map[uint64]map[string]struct{}, session uint64) {
	for p := range index[session] {
		delete(sets[p], session)
		if len(sets[p]) == 0 {
			delete(sets, p)
		}
	}
	delete(index, session)
}

// waitingWrites returns how many writes wait for acknowledgements now and
// the longest-waiting of them, at most limit, oldest first.
func (t *tracker) waitingWrites(limit int) (int, []waitingWrite) {
	t.mu.Lock()
	all := make([]waitingWrite, 0, len(t.waiting))
	for _, w := range t.waiting {
		all = append(all, w)
	}
	t.mu.Unlock()
	sort.Slice(all, func(i, j int) bool { return all[i].Since.Before(all[j].Since) })
	return len(all), all[:min(limit, len(all))]
}
