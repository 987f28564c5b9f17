package server

import (
	"time"

	"github.com/hashicorp/raft"
	"github.com/prometheus/client_golang/prometheus"
)

// timedLogStore is a raft.LogStore that times every write of log entries:
// with fsync on, that is the disk's fsync latency plus bbolt's own work
// (chubby_raft_log_store_seconds). Reads pass through.
type timedLogStore struct {
	raft.LogStore
	observe prometheus.Observer
}

func (t timedLogStore) StoreLog(l *raft.Log) error {
	start := time.Now()
	err := t.LogStore.StoreLog(l)
	t.observe.Observe(time.Since(start).Seconds())
	return err
}

func (t timedLogStore) StoreLogs(logs []*raft.Log) error {
	start := time.Now()
	err := t.LogStore.StoreLogs(logs)
	t.observe.Observe(time.Since(start).Seconds())
	return err
}
