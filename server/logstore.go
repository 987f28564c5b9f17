package server

import (
	"time"

	"github.com/hashicorp/raft"
	"github.com/prometheus/client_golang/prometheus"
)

// timedLogStore is a raft.LogStore that times every write of log entries:
// with fsync on, that is the disk's fsync latency plus the store's own work,
// bbolt's or raft-wal's (chubby_raft_log_store_seconds). Reads pass through,
// and so does raft.MonotonicLogStore: raft-wal refuses a gap in the log, so
// raft must know to clear it after installing a snapshot.
type timedLogStore struct {
	raft.LogStore
	observe   prometheus.Observer
	monotonic bool
	// stored is told how many command entries each write stored (nil:
	// nobody asks); the proposer paces its entries by it.
	stored func(n int)
}

func (t timedLogStore) StoreLog(l *raft.Log) error {
	start := time.Now()
	err := t.LogStore.StoreLog(l)
	t.observe.Observe(time.Since(start).Seconds())
	t.report(err, l)
	return err
}

func (t timedLogStore) StoreLogs(logs []*raft.Log) error {
	start := time.Now()
	err := t.LogStore.StoreLogs(logs)
	t.observe.Observe(time.Since(start).Seconds())
	t.report(err, logs...)
	return err
}

// report tells stored how many command entries a write stored.
func (t timedLogStore) report(err error, logs ...*raft.Log) {
	if t.stored == nil || err != nil {
		return
	}
	n := 0
	for _, l := range logs {
		if l.Type == raft.LogCommand {
			n++
		}
	}
	t.stored(n)
}

// IsMonotonic is the raft.MonotonicLogStore answer of the store under every
// wrapper (raft-wal: true; bolt: false), so a test's WrapLogStore need not
// forward it.
func (t timedLogStore) IsMonotonic() bool { return t.monotonic }

// isMonotonic reports whether s is a raft.MonotonicLogStore that says so.
func isMonotonic(s raft.LogStore) bool {
	m, ok := s.(raft.MonotonicLogStore)
	return ok && m.IsMonotonic()
}
