package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/chubby-dev/chubby/client"
	"github.com/chubby-dev/chubby/testing/proc"
	"github.com/chubby-dev/chubby/testing/wait"
)

// TestDurabilityWholeCellKilled (DESIGN invariant 7): a call is acknowledged
// only once its command is committed by a quorum and fsynced. Writers load a
// three-server cell of real processes; every server is SIGKILLed at once in
// the middle of the load (no clean shutdown, no leadership transfer); the
// cell is restarted from its data directories, and every write that was
// acknowledged before the kill is there with its value. The raft log is
// -raft-log bolt (raft-boltdb, the default before issue 13).
func TestDurabilityWholeCellKilled(t *testing.T) {
	t.Parallel()
	wholeCellKilled(t, proc.CellOptions{ExtraArgs: []string{"-raft-log", "bolt"}})
}

// TestDurabilityWholeCellKilledWAL: the same with chubbyd's default log
// store, raft-wal (an fsync per appended batch of segment files).
func TestDurabilityWholeCellKilledWAL(t *testing.T) {
	t.Parallel()
	c := wholeCellKilled(t, proc.CellOptions{})
	for _, s := range c.Servers() {
		if _, err := os.Stat(filepath.Join(s.DataDir, "wal")); err != nil {
			t.Errorf("%s: no raft-wal log: %v", s.NodeID, err)
		}
		if _, err := os.Stat(filepath.Join(s.DataDir, "raft.db")); err == nil {
			t.Errorf("%s: a bolt raft.db beside the wal", s.NodeID)
		}
	}
}

// wholeCellKilled loads a three-server cell started with opts, SIGKILLs
// every server at once, restarts them and checks every acknowledged write.
func wholeCellKilled(t *testing.T, opts proc.CellOptions) *proc.Cell {
	c := proc.StartCell(t, 3, opts)
	wantOK(t, c.Sh(t, "mkdir", "/ls/local/d"))

	const writers = 4
	var (
		mu    sync.Mutex
		acked = map[string]string{}
		wg    sync.WaitGroup
	)
	stop := make(chan struct{})
	for w := 0; w < writers; w++ {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		cl, err := client.Dial(ctx, client.Config{Servers: c.AddrList(), SessionTTL: 5 * time.Second})
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func(w int, cl *client.Client) {
			defer wg.Done()
			defer cl.Close()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				key, val := fmt.Sprintf("/ls/local/d/w%d-%d", w, i), fmt.Sprintf("value %d of writer %d", i, w)
				ctx, cancel := context.WithTimeout(context.Background(), time.Second)
				_, err := cl.WriteFile(ctx, key, []byte(val))
				cancel()
				if err != nil {
					// Not acknowledged: a leader change under load, or the
					// cell is gone. Go on with the next key until stopped.
					time.Sleep(10 * time.Millisecond)
					continue
				}
				mu.Lock()
				acked[key] = val
				mu.Unlock()
			}
		}(w, cl)
	}
	// Let the load run, then kill every server at once.
	wait.For(t, 20*time.Second, "200 acknowledged writes", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(acked) >= 200
	})
	var kills sync.WaitGroup
	for _, s := range c.Servers() {
		kills.Add(1)
		go func(s *proc.Server) { defer kills.Done(); s.Kill(t) }(s)
	}
	kills.Wait()
	close(stop)
	wg.Wait()
	mu.Lock()
	want := make(map[string]string, len(acked))
	for k, v := range acked {
		want[k] = v
	}
	mu.Unlock()
	t.Logf("%d writes acknowledged before the whole cell was SIGKILLed", len(want))

	c.StartAll(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cl, err := client.Dial(ctx, client.Config{Servers: c.AddrList()})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	lost := 0
	for k, v := range want {
		h, err := cl.Open(ctx, k)
		if err != nil {
			t.Errorf("acknowledged write %s lost: %v", k, err)
			lost++
			continue
		}
		data, _, err := h.GetContentsAndStat(ctx)
		if err != nil || string(data) != v {
			t.Errorf("acknowledged write %s = %q, %v; want %q", k, data, err, v)
			lost++
		}
	}
	if lost > 0 {
		t.Fatalf("%d of %d acknowledged writes lost", lost, len(want))
	}
	return c
}
