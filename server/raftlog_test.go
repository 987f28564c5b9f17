package server_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chubby-dev/chubby/client"
	"github.com/chubby-dev/chubby/server"
	"github.com/chubby-dev/chubby/testing/cell"
	"github.com/chubby-dev/chubby/testing/wait"
)

// TestRaftLogMigratesToWAL: a three-server cell written under bolt (files,
// a held lock, open sessions; a small snapshot threshold, so each log is
// compacted and starts past index 1) is moved to raft-wal one server at a
// time: each is stopped, restarted with -raft-log wal (its bolt log
// migrated at start) and caught up while the others keep serving. The
// first one moved is then kept down while the log is compacted past it and
// catches up by snapshot onto its wal (raft-wal refuses a gap: raft must
// clear the log after installing the snapshot). At the end every file, the
// lock and every session are there, and going back to bolt is refused.
func TestRaftLogMigratesToWAL(t *testing.T) {
	t.Parallel()
	// The final checks' failures are logged again after the cell's
	// shutdown (this cleanup runs last), so a truncated log of a failed
	// run still ends with what failed.
	var failures []string
	fail := func(format string, args ...any) {
		t.Helper()
		failures = append(failures, fmt.Sprintf(format, args...))
		t.Errorf(format, args...)
	}
	t.Cleanup(func() {
		if len(failures) > 0 {
			t.Logf("TestRaftLogMigratesToWAL: %d final checks failed, the first: %s", len(failures), failures[0])
		}
	})
	c := cell.StartCluster(t, 3, cell.WithServerConfig(func(i int, cfg *server.Config) {
		cfg.SnapshotThreshold, cfg.TrailingLogs, cfg.SnapshotInterval = 64, 16, 50*time.Millisecond
		cfg.RaftLog = server.RaftLogBolt // as a build before wal was the default made it
	}))
	c.WaitMaster(t, nil)
	// One context for the whole migration, which takes several restarts
	// and a snapshot catch-up (over 10 s under -race with the suite).
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	holder := c.Dial(t, client.Config{SessionTTL: 30 * time.Second})
	lock := open(t, holder, c.Path("lock"), client.Create())
	if err := lock.Acquire(ctx, client.Exclusive); err != nil {
		t.Fatal(err)
	}
	writer := c.Dial(t, client.Config{SessionTTL: 30 * time.Second})
	want := map[string]string{}
	write := func(from, to int) {
		for i := from; i < to; i++ {
			p := c.Path(fmt.Sprintf("f%03d", i))
			if _, err := writer.WriteFile(ctx, p, []byte(fmt.Sprint("v", i))); err != nil {
				t.Fatalf("write %s: %v", p, err)
			}
			want[p] = fmt.Sprint("v", i)
		}
	}
	write(0, 200)
	sessions := c.Server(c.Master(t)).Status().Sessions

	toWAL := func(i int) {
		t.Helper()
		c.Stop(t, i)
		c.Reconfigure(t, i, func(cfg *server.Config) { cfg.RaftLog = server.RaftLogWAL })
		c.Restart(t, i)
		for _, f := range []string{"wal", "raft.db.migrated"} {
			if _, err := os.Stat(filepath.Join(c.DataDir(i), f)); err != nil {
				t.Fatalf("node%d after restart with wal: %v", i, err)
			}
		}
		m := c.WaitMaster(t, nil)
		write(len(want), len(want)+10) // the cell serves writes between the steps
		c.WaitCaughtUp(t, m)
	}

	// A follower moves first; then it is kept down while the (bolt) master
	// compacts its log past it, so it must be sent a snapshot onto its wal.
	// (A wal master would not do: raft-wal still serves entries below its
	// first index while their 64 MiB segment lives, and sends those.)
	m := c.WaitMaster(t, nil)
	lag := (m + 1) % c.N()
	toWAL(lag)
	lagLast := c.Server(lag).Status().LastLogIndex
	c.Stop(t, lag)
	write(len(want), len(want)+1100) // past the master's in-memory cache of 1024 entries too
	wait.For(t, 20*time.Second, "the master's log compacted past the stopped server", func() bool {
		return c.Server(m).Status().FirstLog > lagLast+1
	})
	c.Restart(t, lag)
	c.WaitCaughtUp(t, m)
	write(len(want), len(want)+10) // appends after the snapshot land on its wal

	for i := 0; i < c.N(); i++ {
		if i != lag {
			toWAL(i)
		}
	}
	m = c.WaitMaster(t, nil)
	c.WaitCaughtUp(t, m)
	reader := c.Dial(t, client.Config{})
	for p, v := range want {
		if got := contents(t, reader, p); got != v {
			fail("%s = %q, want %q", p, got, v)
		}
	}
	if got := c.Server(m).Status().Sessions; got < sessions {
		fail("sessions after the move to wal: %d, want at least the %d before", got, sessions)
	}
	if !checkSeq(t, reader, sequencer(t, lock)) {
		fail("the lock taken under bolt is no longer held")
	}
	// Every server, each now on its wal, follows what the master commits
	// after the checks (the reader's session): waited for, not compared at
	// once, since a follower learns of a commit only with the next append.
	c.WaitCaughtUp(t, m)

	// Back to bolt: refused.
	c.Stop(t, lag)
	cfg := server.DefaultConfig()
	cfg.DataDir, cfg.RaftLog = c.DataDir(lag), server.RaftLogBolt
	cfg.RPCAddr, cfg.RaftAddr, cfg.GossipAddr, cfg.HTTPAddr = freeAddr(t), freeAddr(t), freeAddr(t), ""
	s, err := server.New(cfg)
	if err == nil {
		err = s.Start()
		defer s.Close()
	}
	if err == nil || !strings.Contains(err.Error(), "-raft-log wal") {
		fail("bolt on a wal data dir: %v, want a refusal", err)
	}
}
