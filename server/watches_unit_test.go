package server

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/chubby-dev/chubby/fs"
	"github.com/chubby-dev/chubby/wire"
)

type recordedEvents map[uint64][]wire.Event

func (r recordedEvents) pushEvents(session uint64, evs []wire.Event) {
	r[session] = append(r[session], evs...)
}

// TestPublishWithoutWatchers: a write nobody watches (a lock's acquire or
// release, most writes) queues nothing and allocates nothing; a watched
// one reaches its watcher.
func TestPublishWithoutWatchers(t *testing.T) {
	got := recordedEvents{}
	w := newWatchTable(got, prometheus.NewCounter(prometheus.CounterOpts{Name: "events"}))
	changes := []fs.Change{{Kind: fs.LockAcquired, Path: "/ls/local/lock"}, {Kind: fs.Modified, Path: "/ls/local/lock"}}
	if n := testing.AllocsPerRun(100, func() { w.publish(changes, nil) }); n != 0 {
		t.Errorf("publish with no watchers allocates %v times", n)
	}
	if len(got) != 0 {
		t.Fatalf("events queued with no watchers: %v", got)
	}
	w.watch(7, "/ls/local/lock", wire.EventLockAcquired.Bit())
	w.publish(changes, nil)
	if evs := got[7]; len(evs) != 1 || evs[0].Type != wire.EventLockAcquired || evs[0].Path != "/ls/local/lock" {
		t.Fatalf("the watcher got %+v, want one lock_acquired event", evs)
	}
}
