package server

import (
	"fmt"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/chubby-dev/chubby/fs"
	"github.com/chubby-dev/chubby/session"
)

// lockWaits is the master's registry of blocked Acquires: each waits on a
// channel for the apply that grants or cancels its wait. It remembers when
// each wait was registered on this master, for the lock wait histogram and
// the status page (a wait re-issued to a new master after a failover counts
// from its re-issue).
//
// It also orders a CancelAcquire after the Acquire it cancels. A
// connection's calls run concurrently, so a client's CancelAcquire (sent
// when its Acquire's context ended) may be applied before that Acquire is:
// the cancel finds no wait, and the Acquire then queues — and is granted
// later to a session that no longer wants it, unknown to its handle. So a
// cancel of a wait that is registered (its Acquire under way) flags it,
// and the Acquire, once applied, cancels itself (cancelRequested); a
// cancel of a wait not registered yet leaves a tombstone, and the Acquire
// that comes after it is refused (register).
type lockWaits struct {
	clock     session.Clock
	observe   prometheus.Observer // queued → granted
	mu        sync.Mutex
	m         map[waitKey]*blockedAcquire
	perSess   map[uint64]int        // registered waits by session
	flagged   map[waitKey]bool      // cancelled while registered
	cancelled map[waitKey]time.Time // cancelled before registered (tombstones)
}

// blockedAcquire is one registered wait.
type blockedAcquire struct {
	ch    chan waitResult
	since time.Time
}

// tombstoneTTL is how long a cancel of a wait not yet seen is remembered:
// far longer than a request can sit between the client and the proposer.
const tombstoneTTL = time.Minute

// waitKey names a blocked Acquire: a session's wait id.
type waitKey struct {
	session uint64
	waitID  uint64
}

// waitResult ends a blocked Acquire: the lock's sequencer, or why not.
type waitResult struct {
	seq fs.Sequencer
	err error
}

func newLockWaits(clock session.Clock, observe prometheus.Observer) *lockWaits {
	return &lockWaits{clock: clock, observe: observe, m: map[waitKey]*blockedAcquire{}, perSess: map[uint64]int{}, flagged: map[waitKey]bool{},
		cancelled: map[waitKey]time.Time{}}
}

// register records a blocked Acquire before it is proposed (the grant may
// come in the very apply that queues it). unregister forgets it, unless a
// later register of the same key replaced it. ok is false, and nothing is
// registered, if the wait was cancelled before it got here: the Acquire
// must not be proposed. A re-issue of a wait still registered (its client
// reconnected) keeps the wait's start.
func (w *lockWaits) register(k waitKey) (result <-chan waitResult, unregister func(), ok bool) {
	b := &blockedAcquire{ch: make(chan waitResult, 1), since: w.clock.Now()}
	w.mu.Lock()
	if _, gone := w.cancelled[k]; gone {
		delete(w.cancelled, k)
		w.mu.Unlock()
		return nil, func() {}, false
	}
	if old, ok := w.m[k]; ok {
		b.since = old.since
	} else {
		w.perSess[k.session]++
	}
	w.m[k] = b
	delete(w.flagged, k)
	w.mu.Unlock()
	return b.ch, func() {
		w.mu.Lock()
		if w.m[k] == b {
			w.forgetLocked(k)
			delete(w.flagged, k)
		}
		w.mu.Unlock()
	}, true
}

// forgetLocked removes the registered wait k (w.mu held).
func (w *lockWaits) forgetLocked(k waitKey) {
	if _, ok := w.m[k]; !ok {
		return
	}
	delete(w.m, k)
	if w.perSess[k.session]--; w.perSess[k.session] <= 0 {
		delete(w.perSess, k.session)
	}
}

// count is how many waits k's session has registered, not counting k
// itself (a re-issue of a registered wait adds none).
func (w *lockWaits) count(k waitKey) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := w.perSess[k.session]
	if _, ok := w.m[k]; ok {
		n--
	}
	return n
}

// cancel notes a CancelAcquire of k, before it is proposed: a wait under
// way is flagged, a wait not seen yet gets a tombstone.
func (w *lockWaits) cancel(k waitKey, now time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, ok := w.m[k]; ok {
		w.flagged[k] = true
		return
	}
	for old, at := range w.cancelled {
		if now.Sub(at) > tombstoneTTL {
			delete(w.cancelled, old)
		}
	}
	w.cancelled[k] = now
}

// cancelRequested reports whether a cancel of k arrived while its Acquire
// was under way (and forgets it); called after the Acquire was applied, so
// a cancel proposed from then on is applied after it and needs no help.
func (w *lockWaits) cancelRequested(k waitKey) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	f := w.flagged[k]
	delete(w.flagged, k)
	return f
}

// wake ends the blocked Acquire k, if it is registered here; a grant is
// observed in the lock wait histogram.
func (w *lockWaits) wake(k waitKey, r waitResult) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if b, ok := w.m[k]; ok {
		select {
		case b.ch <- r:
		default:
		}
		w.forgetLocked(k)
		if r.err == nil {
			w.observe.Observe(w.clock.Now().Sub(b.since).Seconds())
		}
	}
}

// since returns when each of the waits ks was registered here (those that
// are).
func (w *lockWaits) since(ks []waitKey) map[waitKey]time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make(map[waitKey]time.Time, len(ks))
	for _, k := range ks {
		if b, ok := w.m[k]; ok {
			out[k] = b.since
		}
	}
	return out
}

// failAll ends every blocked Acquire with err.
func (w *lockWaits) failAll(err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for k, b := range w.m {
		select {
		case b.ch <- waitResult{err: err}:
		default:
		}
		w.forgetLocked(k)
	}
}

// lockDelays are the master's timers for locks whose lock-delay has not
// ended: grant proposes the grant when one does (Chubby §2.4).
type lockDelays struct {
	clock session.Clock
	grant func(path string)

	mu sync.Mutex
	m  map[string]session.Timer
}

func newLockDelays(clock session.Clock, grant func(path string)) *lockDelays {
	return &lockDelays{clock: clock, grant: grant, m: map[string]session.Timer{}}
}

// arm schedules the grant of a lock whose lock-delay ends at d.Until (once
// per path).
func (l *lockDelays) arm(d fs.Delayed) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, ok := l.m[d.Path]; ok {
		return
	}
	wait := time.Duration(d.Until - l.clock.Now().UnixNano())
	if wait < 0 {
		wait = 0
	}
	path := d.Path
	l.m[path] = l.clock.AfterFunc(wait, func() {
		l.mu.Lock()
		delete(l.m, path)
		l.mu.Unlock()
		l.grant(path)
	})
}

// stopAll cancels every timer (this server is no longer master).
func (l *lockDelays) stopAll() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for p, t := range l.m {
		t.Stop()
		delete(l.m, p)
	}
}

// grantDelayed proposes the grant of a lock whose lock-delay ended.
func (s *Server) grantDelayed(path string) {
	if !s.IsMaster() {
		return
	}
	if _, err := s.proposeWrite(fs.NewCommand(&fs.GrantDelayed{Path: path})); err != nil {
		s.log.Warn("grant after lock-delay failed", "path", path, "err", err)
	}
}

// onApply acts on a command's effects. It runs on raft's FSM goroutine on
// every replica; the maps it touches are empty except on the master.
func (s *Server) onApply(cmd *fs.Command, res *fs.Result) {
	for _, id := range res.Ended {
		s.leases.remove(id)
		s.tracker.forget(id)
		s.watches.forget(id)
	}
	if s.IsMaster() {
		s.watches.publish(res.Changes, fillOffer(cmd, res))
	}
	if len(res.Grants) > 0 || len(res.Cancelled) > 0 {
		ended := map[uint64]bool{}
		for _, id := range res.Ended {
			ended[id] = true
		}
		for _, g := range res.Grants {
			s.waits.wake(waitKey{g.Session, g.WaitID}, waitResult{seq: g.Seq})
		}
		for _, c := range res.Cancelled {
			var err error
			switch {
			case ended[c.Session]:
				err = fmt.Errorf("%w: session %d ended while waiting for %s", fs.ErrSessionExpired, c.Session, c.Path)
			case cmd.Op == fs.OpCancelWait:
				err = fmt.Errorf("%w: wait for %s cancelled", fs.ErrNotHeld, c.Path)
			default:
				err = fmt.Errorf("%w: %s was deleted while waiting for its lock", fs.ErrStaleHandle, c.Path)
			}
			s.waits.wake(waitKey{c.Session, c.WaitID}, waitResult{err: err})
		}
	}
	if s.IsMaster() {
		for _, d := range res.Delayed {
			s.delays.arm(d)
		}
	}
}
