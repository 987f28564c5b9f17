package server_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"path/filepath"
	"testing"
	"time"

	"github.com/chubby-dev/chubby/client"
	"github.com/chubby-dev/chubby/server"
	"github.com/chubby-dev/chubby/testing/wait"
	"github.com/hashicorp/go-hclog"
)

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

func startWithConfig(t *testing.T, cfg server.Config) *server.Server {
	t.Helper()
	s, err := server.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := s.WaitMaster(ctx); err != nil {
		s.Close()
		t.Fatal(err)
	}
	return s
}

// TestSnapshotsCompactTheLogAndRestore: with a small snapshot threshold the
// server snapshots the state machine and compacts the raft log; a restart
// restores from the snapshot plus the remaining log, with every node, lock
// and session intact.
func TestSnapshotsCompactTheLogAndRestore(t *testing.T) {
	cfg := server.DefaultConfig()
	cfg.NodeID = "snap"
	cfg.DataDir = t.TempDir()
	cfg.RPCAddr, cfg.RaftAddr, cfg.GossipAddr, cfg.HTTPAddr = freeAddr(t), freeAddr(t), freeAddr(t), ""
	cfg.SnapshotThreshold, cfg.TrailingLogs, cfg.SnapshotInterval = 64, 16, 100*time.Millisecond
	cfg.Logger = hclog.New(&hclog.LoggerOptions{Output: io.Discard})
	s := startWithConfig(t, cfg)

	ctx := ctxT(t)
	cl, err := client.Dial(ctx, client.Config{Servers: []string{s.RPCAddr()}, SessionTTL: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	// Writes one at a time: each is its own raft entry, so the log grows
	// past the threshold several times.
	const files = 300
	for i := 0; i < files; i++ {
		if _, err := cl.WriteFile(ctx, fmt.Sprintf("/ls/local/f%03d", i), []byte(fmt.Sprint("v", i))); err != nil {
			t.Fatal(err)
		}
	}
	h := open(t, cl, "/ls/local/lock", client.Create())
	if err := h.Acquire(ctx, client.Exclusive); err != nil {
		t.Fatal(err)
	}
	seq := sequencer(t, h)

	// raft snapshots on its own schedule (it checks every few seconds);
	// wait until a snapshot exists on disk.
	wait.For(t, 30*time.Second, "a snapshot on disk (threshold 64 entries)", func() bool {
		snaps, _ := filepath.Glob(filepath.Join(cfg.DataDir, "snapshots", "*", "state.bin"))
		return len(snaps) > 0
	})
	if !wait.Until(30*time.Second, func() bool { return s.Status().FirstLog > 1 }) {
		t.Fatalf("the raft log was not compacted after a snapshot: %+v", s.Status())
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s2 := startWithConfig(t, cfg)
	defer s2.Close()
	cl2, err := client.Dial(ctx, client.Config{Servers: []string{s2.RPCAddr()}})
	if err != nil {
		t.Fatal(err)
	}
	defer cl2.Close()
	for i := 0; i < files; i++ {
		p := fmt.Sprintf("/ls/local/f%03d", i)
		hh := open(t, cl2, p)
		data, _, err := hh.GetContentsAndStat(ctx)
		if err != nil || string(data) != fmt.Sprint("v", i) {
			t.Fatalf("%s after restart = %q, %v", p, data, err)
		}
	}
	if !checkSeq(t, cl2, seq) {
		t.Fatal("the lock held before the restart is not held after it")
	}
	// Both sessions are known to the restarted master: the one from before
	// the restart (restored) and the new one.
	if st := s2.Status(); st.Sessions != 2 {
		t.Fatalf("%d sessions after restart, want 2: %+v", st.Sessions, st)
	}
}
