package server

// Event fills (issue 13): a contents_modified event carries the write's
// contents and stat to a watcher that caches the node, and its client
// installs them in its cache before it delivers the event, so a config
// reader gets the new value with the commit instead of a read's round trip
// after it.
//
// # Why a fill keeps DESIGN invariant 5
//
// A fill is a cache fill like a read's: the master must count the session
// among the node's cachers before the value can reach it, no later write of
// the node may commit before the session dropped it, and the client must
// not install a value older than one it already knows was overwritten.
//
//  1. Admission. The write W1 applies on the master while its own
//     invalidation round still holds the path uncachable (tracker.beforeWrite's
//     release runs only after the proposal returned, and the proposal
//     returns only once W1 was applied — or W1 is never applied, the same
//     assumption every read's admission makes). publish, on raft's apply
//     goroutine, offers the contents; tracker.admitFills, under the
//     tracker's lock, admits the watchers only if W1 is the one write of
//     the path in flight (uncachable == 1, no ACL-file write in flight).
//     Any other write W2 of the path either
//     - took the cachers before (its beforeWrite ran, its release has not):
//     uncachable is 2, nobody is admitted, the events go out plain; or
//     - takes them after: it finds the admitted sessions and invalidates
//     them — the writer too, if it was admitted by a fill (its own
//     BeginWrite cannot drop a fill of W1 that arrives after its write
//     returned) — and commits only once they acknowledged or their
//     leases ran out, like any cacher's.
//     A write applied between W1 and this publish (same raft batch) still
//     holds its round, so it is the first case.
//  2. Ordering on the session. admitFills queues the events while it holds
//     the tracker's lock, and the lease table stamps each fill with the
//     session's invalidation number as of then (EventContents.InvalSeq).
//     A later write W2 takes the cachers only after that lock is free, so
//     its invalidation is numbered above the stamp. Replies reach the
//     client in any interleaving (events wait behind invalidations in a
//     reply, are held back by the reply budget, two KeepAlives may be
//     answered out of order): the client (cache.InvalidateAt) remembers,
//     per path, the highest reply number that carried an invalidation of
//     it, and installs a fill only if its stamp is at least that, so an
//     event of W1 never refills after an invalidation of W2 (checked in
//     either order). It acknowledges an invalidation only after recording
//     it, so W2 commits only after its client would refuse W1's fill.
//  3. Generations. The fill does not replace an entry as new as itself
//     (instance, then content generation), nor a negative entry, nor a
//     path the client is writing (cache.Refill).
//  4. Session and master. A fill is one more entry under the local lease:
//     served only before its end, refused while the cache is disabled
//     (jeopardy, expiry, Close). A reply of an earlier master's epoch
//     fills nothing, and a failover's Flush forgets the numbers (the new
//     master's start afresh). A session that ends is forgotten by the
//     tracker like any cacher.
//  5. Access. Contents go only to a session whose principal may read the
//     node as of the state the write produced (its watch checked it once;
//     an ACL may have changed since). An ACL file's write makes every path
//     uncachable while in flight (no fill then) and invalidates every
//     cacher, fill-admitted ones included. A session without a known
//     principal gets no contents.
//
// Contents go only with small files (maxFillBytes) and at most
// maxQueuedFillBytes wait per session; past either the event goes out
// plain and the reader reads through the cache as before.

import (
	"github.com/chubby-dev/chubby/fs"
	"github.com/chubby-dev/chubby/wire"
)

const (
	// maxFillBytes: a write of more contents reaches watchers as a plain
	// event (config files are a few KB; Chubby §4 warns of large ones).
	maxFillBytes = 16 << 10
	// maxQueuedFillBytes bounds the contents waiting in one session's
	// event queue; past it its events go out plain.
	maxQueuedFillBytes = 256 << 10
)

// fillOffer returns the contents a command's contents_modified event may
// carry: a SetContents of a small file that applied, nil otherwise.
func fillOffer(cmd *fs.Command, res *fs.Result) *wire.EventContents {
	b, ok := cmd.Body.(*fs.SetContents)
	if !ok || res.Err != nil || len(b.Data) > maxFillBytes {
		return nil
	}
	for _, ch := range res.Changes {
		if ch.Kind == fs.Modified && ch.Path == b.Path {
			return &wire.EventContents{Data: b.Data, Stat: res.Stat}
		}
	}
	return nil
}

// admitFills decides which watchers of path that asked for contents get
// them: those whose principal may read path now (checked here) and, under
// the tracker's lock, only if no other write of path is in flight
// (tracker.admitFills). queue runs with the decision, inside that lock.
func (s *Server) admitFills(path string, sessions []uint64, queue func(admitted map[uint64]bool)) {
	may := make(map[uint64]bool, len(sessions))
	s.fsm.read(func(st *fs.State) {
		for _, id := range sessions {
			owner, ok := s.leases.owner(id)
			if !ok || owner == "" || s.leases.noCache(id) { // a session from before principals: unsure, no contents
				continue
			}
			if s.accessAs(st, owner, path, fs.PermRead) == nil {
				may[id] = true
			}
		}
	})
	s.tracker.admitFills(path, may, queue)
}

// admitFills records each session of may as a cacher of path admitted by
// an event fill, if the write being published is the only write of path
// in flight, and calls queue with the sessions admitted while it holds the
// lock, so no later write takes the cachers before their events are
// queued (see the comment at the top of fill.go).
func (t *tracker) admitFills(path string, may map[uint64]bool, queue func(admitted map[uint64]bool)) {
	t.mu.Lock()
	defer t.mu.Unlock()
	admitted := map[uint64]bool{}
	if t.uncachable[path] == 1 && t.allUncachable == 0 {
		for id := range may {
			t.addCacherLocked(id, path, true)
			admitted[id] = true
		}
	}
	queue(admitted)
}

// owner returns the principal of a session with a lease here.
func (t *leaseTable) owner(id uint64) (string, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	l, ok := t.m[id]
	if !ok {
		return "", false
	}
	return l.owner, true
}

// eventCost is what an event takes of a KeepAlive reply's budget.
func eventCost(e wire.Event) int {
	n := len(e.Path) + 24
	if e.Contents != nil {
		n += len(e.Contents.Data) + 128 // the stat and the field names
	}
	return n
}
