package cell_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/chubby-dev/chubby/client"
	"github.com/chubby-dev/chubby/testing/cell"
	"github.com/chubby-dev/chubby/testing/wait"
	"github.com/chubby-dev/chubby/wire"
)

// TestCluster: the multi-server harness (here with fast raft timing)
// elects one master; isolating it
// moves mastership to the majority and the old master steps down; after
// Heal there is one master and everyone catches up; Kill and Restart bring a
// server back on its data dir, caught up.
func TestCluster(t *testing.T) {
	c := cell.StartCluster(t, 3, cell.WithRaftTiming(200*time.Millisecond, 200*time.Millisecond, 100*time.Millisecond))
	m := c.Master(t)
	cl := c.Dial(t, client.Config{})
	ctx := context.Background()
	if _, err := cl.WriteFile(ctx, c.Path("f"), []byte("v1")); err != nil {
		t.Fatal(err)
	}
	var rest []int
	for i := 0; i < c.N(); i++ {
		if i != m {
			rest = append(rest, i)
		}
	}
	c.Isolate(m)
	m2 := c.WaitMaster(t, rest)
	wait.For(t, 0, "the isolated master to step down", func() bool { return !c.Server(m).IsMaster() })
	if _, err := cl.WriteFile(ctx, c.Path("f"), []byte("v2")); err != nil {
		t.Fatal(err)
	}
	c.Heal()
	m3 := c.Master(t)
	c.WaitCaughtUp(t, m3)
	c.Kill(t, m3)
	if got := c.Running(); len(got) != 2 {
		t.Fatalf("running after Kill: %v", got)
	}
	m4 := c.WaitMaster(t, nil)
	if _, err := cl.WriteFile(ctx, c.Path("f"), []byte("v3")); err != nil {
		t.Fatal(err)
	}
	c.Restart(t, m3)
	c.WaitCaughtUp(t, m4)
	t.Logf("masters: node%d → (isolated) node%d → (healed) node%d → (killed) node%d", m, m2, m3, m4)
}

// TestProxyDropReply: a reply armed with DropReply is swallowed after the
// server applied the call; with LoseAndReset the client retries on a new
// connection and gets the first result.
func TestProxyDropReply(t *testing.T) {
	c := cell.Start(t)
	p := c.NewProxy(t)
	cl := c.Dial(t, client.Config{Servers: []string{p.Addr()}, FixedServers: true})
	ctx := context.Background()
	d := p.DropReply(func(r *wire.Request) bool { return r.Method == wire.MSetContents }, cell.LoseAndReset)
	if _, err := cl.WriteFile(ctx, c.Path("x"), []byte("once")); err != nil {
		t.Fatalf("write whose first reply was lost: %v", err)
	}
	select {
	case <-d.Done():
	default:
		t.Fatal("no reply was dropped")
	}
	if d.Request() == nil || d.Request().Method != wire.MSetContents {
		t.Fatalf("dropped the reply to %+v", d.Request())
	}
	if n := p.Count(wire.MSetContents); n != 2 {
		t.Fatalf("%d SetContents reached the server, want the call and its retry", n)
	}
}

// TestProxyBlackhole: a black-holed link keeps its connections but passes
// nothing; Heal lets calls through again.
func TestProxyBlackhole(t *testing.T) {
	c := cell.Start(t)
	p := c.NewProxy(t)
	cl := c.Dial(t, client.Config{Servers: []string{p.Addr()}, FixedServers: true})
	p.Blackhole()
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	_, err := cl.WriteFile(ctx, c.Path("x"), nil)
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("write through a black hole: %v, want the caller's deadline", err)
	}
	if p.Conns() == 0 {
		t.Fatal("the black hole closed the connection")
	}
	p.Heal()
	if _, err := cl.WriteFile(context.Background(), c.Path("x"), []byte("ok")); err != nil {
		t.Fatalf("write after heal: %v", err)
	}
}
