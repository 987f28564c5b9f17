package nemesis

import (
	"context"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/chubby-dev/chubby/client"
	"github.com/chubby-dev/chubby/testing/cell"
	"github.com/chubby-dev/chubby/testing/linear"
	"github.com/chubby-dev/chubby/testing/nemesis/core"
	"github.com/chubby-dev/chubby/testing/wait"
)

// TestDriftBeyondMarginBreaksCoherence is the negative control of the
// clock faults: why TestNemesis keeps drift within session.DriftMargin. A
// caching client is cut off from the master (its link silent) just after
// it cached a file; another client writes the file, which the master lets
// commit once the silent client's lease has run out by the master's clock;
// meanwhile the silent client keeps reading the file from its cache, as
// long as its local lease lasts by its own clock. At real speed its lease
// ends first (DESIGN invariant 3) and the register history is
// linearizable; with the client's clock at half speed — a drift far beyond
// the margin — it serves the old contents after the write returned, and
// CASRegisterModel must reject the history.
func TestDriftBeyondMarginBreaksCoherence(t *testing.T) {
	for _, tc := range []struct {
		rate       float64
		linearizes bool
	}{{1, true}, {0.5, false}} {
		c := cell.Start(t)
		key := c.Path("drift")
		writer := c.Dial(t, client.Config{})
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		if _, err := writer.WriteFile(ctx, key, []byte("v0")); err != nil {
			t.Fatal(err)
		}
		p := c.NewProxy(t)
		clk := cell.NewSkewClock(time.Now())
		clk.SetRate(tc.rate)
		reader := c.Dial(t, client.Config{Servers: []string{p.Addr()}, FixedServers: true, Clock: clk, SessionTTL: time.Second, Grace: 5 * time.Second})
		h, err := reader.Open(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		wh, err := writer.Open(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		rec := linear.NewRecorder()
		rec.Add(porcupine.Operation{ClientId: 1, Input: core.RegInput{Kind: core.OpWrite, Key: key, Value: "v0"}, Output: core.RegOutput{OK: true}})
		read := func() {
			call := rec.Now()
			rctx, rcancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
			data, _, err := h.GetContentsAndStat(rctx)
			rcancel()
			if err == nil {
				rec.Add(porcupine.Operation{ClientId: 0, Input: core.RegInput{Kind: core.OpRead, Key: key}, Call: call,
					Output: core.RegOutput{Value: string(data)}, Return: rec.Now()})
			}
		}
		read() // cached now
		p.Blackhole()
		call := rec.Now()
		if _, err := wh.SetContents(ctx, []byte("v1")); err != nil {
			t.Fatal(err)
		}
		rec.Add(porcupine.Operation{ClientId: 1, Input: core.RegInput{Kind: core.OpWrite, Key: key, Value: "v1"}, Call: call,
			Output: core.RegOutput{OK: true}, Return: rec.Now()})
		wrote := time.Now()
		for time.Since(wrote) < 500*time.Millisecond {
			read()
			wait.Sleep(ctx, time.Millisecond) // pacing: a read every millisecond is plenty
		}
		got := porcupine.CheckOperations(core.CASRegisterModel, rec.History())
		t.Logf("client clock at rate %v: %d reads, linearizable %v", tc.rate, len(rec.History())-2, got)
		if got != tc.linearizes {
			t.Errorf("client clock at rate %v: linearizable %v, want %v", tc.rate, got, tc.linearizes)
		}
		p.Heal()
	}
}
