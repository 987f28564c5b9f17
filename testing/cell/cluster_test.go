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

// dirOrderTB is a test whose temporary directory's removal (registered,
// as testing.T does, by the first TempDir call) records which of the
// cluster's servers were still running when it ran.
type dirOrderTB struct {
	*testing.T
	c           **cell.Cluster
	registered  bool
	runningThen []int
	removed     bool
}

func (o *dirOrderTB) TempDir() string {
	if !o.registered {
		o.registered = true
		o.T.Cleanup(func() {
			if *o.c != nil {
				o.runningThen = (*o.c).Running()
			}
			o.removed = true
		})
	}
	return o.T.TempDir()
}

// TestClusterClosedBeforeDirRemoved: a cluster's servers are closed before
// the test's temporary directory is removed. The other way round, the
// removal raced with servers writing their logs and snapshots: it failed
// with "directory not empty", or took the log's segment files from under
// a running follower, which panicked with "log not found"
// (TestRaftLogMigratesToWAL's failures in CI).
func TestClusterClosedBeforeDirRemoved(t *testing.T) {
	var c *cell.Cluster
	o := &dirOrderTB{c: &c}
	t.Run("cluster", func(t *testing.T) {
		o.T = t
		c = cell.StartCluster(o, 3)
		if _, err := c.Dial(t, client.Config{}).WriteFile(context.Background(), c.Path("f"), []byte("v")); err != nil {
			t.Fatal(err)
		}
	})
	if !o.removed {
		t.Fatal("the temporary directory's removal did not run")
	}
	if len(o.runningThen) > 0 {
		t.Fatalf("servers %v were still running when the temporary directory was removed", o.runningThen)
	}
}
