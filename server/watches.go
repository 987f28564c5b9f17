package server

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/chubby-dev/chubby/fs"
	"github.com/chubby-dev/chubby/wire"
)

// watchTable is the master's record of which sessions subscribed to which
// events of which nodes (Chubby §2.6). Like the tracker it is rebuilt empty
// by each new master: clients re-subscribe on master failover. Events go
// out through an eventQueue (the lease table: on the next KeepAlive reply).
type watchTable struct {
	queue  eventQueue
	events prometheus.Counter
	// fills decides which watchers asking for contents get a write's
	// (Server.admitFills) and runs queue, which queues every event of
	// the publish, with its decision. nil: no event carries contents.
	fills func(path string, sessions []uint64, queue func(admitted map[uint64]bool))

	mu        sync.Mutex
	watches   map[string]map[uint64]uint32 // path → session → event mask
	watchedBy map[uint64]map[string]struct{}
}

// eventQueue delivers a session's events, in the order given.
type eventQueue interface {
	pushEvents(session uint64, evs []wire.Event)
}

func newWatchTable(queue eventQueue, events prometheus.Counter) *watchTable {
	t := &watchTable{queue: queue, events: events}
	t.reset()
	return t
}

func (t *watchTable) reset() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.watches = map[string]map[uint64]uint32{}
	t.watchedBy = map[uint64]map[string]struct{}{}
}

// forget drops the subscriptions of a session that ended.
func (t *watchTable) forget(session uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	dropSession(t.watches, t.watchedBy, session)
}

// watch subscribes session to mask's events on path (or'ed with earlier
// subscriptions); a zero mask unsubscribes.
// canWatch reports whether session may watch path: it watches it already,
// or fewer than limit nodes.
func (t *watchTable) canWatch(session uint64, path string, limit int) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	paths := t.watchedBy[session]
	if _, ok := paths[path]; ok {
		return true
	}
	return len(paths) < limit
}

func (t *watchTable) watch(session uint64, path string, mask uint32) {
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
// fill, if not nil, is what the command wrote (fillOffer): the
// contents_modified events of the watchers that asked for contents
// (wire.EvContents) carry it if t.fills admits them (fill.go).
func (t *watchTable) publish(changes []fs.Change, fill *wire.EventContents) {
	if len(changes) == 0 {
		return
	}
	var out map[uint64][]wire.Event // made for the first event: most writes have no watchers
	var fillPath string
	var fillers []uint64
	t.mu.Lock()
	emit := func(watched string, typ wire.EventType, path string) {
		bit := typ.Bit()
		for sess, mask := range t.watches[watched] {
			if mask&bit == 0 {
				continue
			}
			ev := wire.Event{Type: typ, Path: path}
			if fill != nil && typ == wire.EventContentsModified && mask&wire.EvContents != 0 && t.fills != nil {
				ev.Contents = fill
				fillPath = path
				fillers = append(fillers, sess)
			}
			if out == nil {
				out = map[uint64][]wire.Event{}
			}
			out[sess] = append(out[sess], ev)
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
	if len(out) == 0 {
		return
	}
	queue := func(admitted map[uint64]bool) {
		for sess, evs := range out {
			if !admitted[sess] {
				for i := range evs {
					evs[i].Contents = nil
				}
			}
			t.events.Add(float64(len(evs)))
			t.queue.pushEvents(sess, evs)
		}
	}
	if len(fillers) == 0 {
		queue(nil)
		return
	}
	t.fills(fillPath, fillers, queue)
}
