package cell_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/chubby-dev/chubby/client"
	"github.com/chubby-dev/chubby/testing/cell"
	"github.com/chubby-dev/chubby/testing/leak"
	"github.com/chubby-dev/chubby/testing/wait"
	"github.com/chubby-dev/chubby/wire"
)

// TestMain fails the package if a test leaves a goroutine behind, but for
// the stranded raft waiter testing/leak names.
func TestMain(m *testing.M) { leak.VerifyTestMain(m) }

// TestStartDialRestart: the harness brings up a master, a client can write,
// and the data survives Restart on the same data dir and ports.
func TestStartDialRestart(t *testing.T) {
	c := cell.Start(t, cell.WithManualClock())
	if st := c.Status(); !st.Master || st.Epoch == 0 {
		t.Fatalf("status after Start = %+v, want a serving master", st)
	}
	ctx := context.Background()
	cl := c.Dial(t, client.Config{})
	if _, err := cl.WriteFile(ctx, c.Path("f"), []byte("v1")); err != nil {
		t.Fatal(err)
	}
	addr, dir, epoch := c.Addr(), c.DataDir(), c.Status().Epoch
	c.Restart(t)
	if c.Addr() != addr || c.DataDir() != dir {
		t.Fatalf("restart moved the cell: %s %s → %s %s", addr, dir, c.Addr(), c.DataDir())
	}
	if e := c.Status().Epoch; e <= epoch {
		t.Fatalf("epoch after restart = %d, want > %d", e, epoch)
	}
	cl2 := c.Dial(t, client.Config{})
	h, err := cl2.Open(ctx, c.Path("f"))
	if err != nil {
		t.Fatal(err)
	}
	data, _, err := h.GetContentsAndStat(ctx)
	if err != nil || string(data) != "v1" {
		t.Fatalf("after restart: %q, %v; want v1", data, err)
	}
}

// TestRawSession: a raw session speaks the wire protocol by hand.
func TestRawSession(t *testing.T) {
	c := cell.Start(t, cell.WithManualClock())
	r := c.NewRawSession(t, 5*time.Second)
	if r.Session == 0 || r.Epoch == 0 {
		t.Fatalf("raw session = %d epoch %d", r.Session, r.Epoch)
	}
	var st wire.StatReply
	if err := r.Call(wire.MOpen, wire.OpenArgs{Path: c.Path("raw"), Create: true}, &st); err != nil {
		t.Fatal(err)
	}
	if st.Stat.Instance == 0 {
		t.Fatalf("open returned %+v", st.Stat)
	}
	// A KeepAlive is parked until the hold ends on the server's clock.
	id, err := r.Go(wire.MKeepAlive, wire.KeepAliveArgs{})
	if err != nil {
		t.Fatal(err)
	}
	// Hello is served inline after the KeepAlive was parked.
	if _, err := r.Hello(); err != nil {
		t.Fatal(err)
	}
	if _, ok := r.Answered(id, 20*time.Millisecond); ok {
		t.Fatal("KeepAlive answered before its hold ended")
	}
	c.Manual(t).Advance(5 * time.Second)
	var ka wire.KeepAliveReply
	if err := r.Result(id, &ka); err != nil || ka.TTL != int64(5*time.Second) {
		t.Fatalf("KeepAlive reply = %+v, %v", ka, err)
	}
}

// TestProxy: breaking the proxy cuts the client off; healing lets it back.
func TestProxy(t *testing.T) {
	c := cell.Start(t, cell.WithManualClock())
	p := c.NewProxy(t)
	cl := c.Dial(t, client.Config{Servers: []string{p.Addr()}, FixedServers: true})
	wait.For(t, 0, "the client's first KeepAlive to pass", func() bool { return p.Count(wire.MKeepAlive) >= 1 })
	p.Break()
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	_, err := cl.WriteFile(ctx, c.Path("x"), nil)
	cancel()
	if err == nil {
		t.Fatal("write through a broken proxy succeeded")
	}
	p.Heal()
	// The client's reconnect backoff runs on the real clock here.
	if _, err := cl.WriteFile(context.Background(), c.Path("x"), []byte("ok")); err != nil {
		t.Fatalf("write after heal: %v", err)
	}
	p.DropRequests(func(r *wire.Request) bool { return r.Method == wire.MCheckSequencer })
	ctx, cancel = context.WithTimeout(context.Background(), 50*time.Millisecond)
	_, err = cl.CheckSequencer(ctx, client.Sequencer{Path: c.Path("x"), Mode: client.Exclusive, Gen: 1})
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("dropped call returned %v, want the caller's deadline", err)
	}
}

// TestStallClock: Advance fires callbacks at their own deadlines; Stall fires
// them late, with Now at the end of the stall.
func TestStallClock(t *testing.T) {
	clk := cell.NewStallClock(cell.Epoch)
	var at []time.Duration
	record := func() { at = append(at, clk.Now().Sub(cell.Epoch)) }
	clk.AfterFunc(time.Second, record)
	clk.Advance(10 * time.Second)
	clk.AfterFunc(time.Second, record)
	clk.AfterFunc(2*time.Second, record)
	clk.Stall(100 * time.Second)
	want := []time.Duration{time.Second, 110 * time.Second, 110 * time.Second}
	if len(at) != len(want) {
		t.Fatalf("callbacks ran at %v, want %v", at, want)
	}
	for i := range want {
		if at[i] != want[i] {
			t.Fatalf("callbacks ran at %v, want %v", at, want)
		}
	}
}
