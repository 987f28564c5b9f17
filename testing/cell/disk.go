package cell

import (
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
)

// slowLogStore delays every write to a server's raft log by the server's
// current disk delay (Cluster.SetDiskDelay): a slow fsync, as a saturated
// or failing disk shows it. Reads are not delayed; nothing stored changes.
type slowLogStore struct {
	raft.LogStore
	delay *atomic.Int64
}

func (s *slowLogStore) wait() {
	if d := time.Duration(s.delay.Load()); d > 0 {
		time.Sleep(d) // the fault itself: this write takes d longer
	}
}

// StoreLog delays, then stores.
func (s *slowLogStore) StoreLog(l *raft.Log) error {
	s.wait()
	return s.LogStore.StoreLog(l)
}

// StoreLogs delays, then stores (one delay per batch, as one fsync).
func (s *slowLogStore) StoreLogs(ls []*raft.Log) error {
	s.wait()
	return s.LogStore.StoreLogs(ls)
}

// DeleteRange delays, then deletes (log compaction writes too).
func (s *slowLogStore) DeleteRange(lo, hi uint64) error {
	s.wait()
	return s.LogStore.DeleteRange(lo, hi)
}

// IsMonotonic passes the wrapped store's answer on (raft.MonotonicLogStore).
func (s *slowLogStore) IsMonotonic() bool {
	m, ok := s.LogStore.(raft.MonotonicLogStore)
	return ok && m.IsMonotonic()
}

// SetDiskDelay makes every write to server i's raft log (StoreLog,
// StoreLogs, DeleteRange) take d longer, from now on, across Kill and
// Restart, until set back to 0: a slow disk (slow fsync). It is applied
// through server.Config.WrapLogStore, outside any wrapper the test gave.
func (c *Cluster) SetDiskDelay(i int, d time.Duration) {
	c.nodes[i].diskDelay.Store(int64(d))
}

// DiskDelay is server i's current disk delay.
func (c *Cluster) DiskDelay(i int) time.Duration {
	return time.Duration(c.nodes[i].diskDelay.Load())
}
