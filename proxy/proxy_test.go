package proxy_test

import (
	"context"
	"testing"
	"time"

	"github.com/chubby-dev/chubby/client"
	"github.com/chubby-dev/chubby/proxy"
	"github.com/chubby-dev/chubby/testing/cell"
	"github.com/chubby-dev/chubby/testing/leak"
	"github.com/chubby-dev/chubby/testing/netproxy"
	"github.com/chubby-dev/chubby/testing/wait"
	"github.com/chubby-dev/chubby/wire"
)

// TestMain fails the package if a test leaves a goroutine behind, but for
// the stranded raft waiter testing/leak names.
func TestMain(m *testing.M) { leak.VerifyTestMain(m) }

// TestProxyRenewsClientsTogether: clients of a proxy — with connections of
// their own (a KeepAlive each) and sharing one through a Pool (a
// KeepAliveMany) — keep their sessions renewed, while the master sees
// only the proxy's KeepAliveMany calls, far fewer than the renewals they
// carry.
func TestProxyRenewsClientsTogether(t *testing.T) {
	c := cell.Start(t)
	up := c.NewProxy(t) // counts the proxy's calls to the master
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	// NoCache: the proxy's own session would renew through up too.
	p, err := proxy.Start(ctx, proxy.Config{Cell: []string{up.Addr()}, Listen: "127.0.0.1:0", Logger: c.Logger(), NoCache: true})
	cancel()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	pool := client.NewPool()
	t.Cleanup(func() { pool.Close() })
	var cls []*client.Client
	for i := range 20 {
		cfg := client.Config{Servers: []string{p.Addr()}, FixedServers: true, SessionTTL: 2 * time.Second}
		if i%2 == 1 {
			cfg.Pool = pool
		}
		cls = append(cls, c.Dial(t, cfg))
	}
	if got := c.Status().Sessions; got != len(cls) {
		t.Fatalf("the master has %d sessions, want %d", got, len(cls))
	}
	for i, cl := range cls {
		if s := cl.Session(); s.Master != p.Addr() {
			t.Fatalf("client %d's master is %q, want the proxy %s", i, s.Master, p.Addr())
		}
	}
	// Three renewals of every session: each lease end moves on three times.
	for round := range 3 {
		ends := make([]time.Time, len(cls))
		for i, cl := range cls {
			ends[i] = cl.Session().LeaseEnd
		}
		wait.For(t, 0, "every session renewed", func() bool {
			for i, cl := range cls {
				if !cl.Session().LeaseEnd.After(ends[i]) {
					return false
				}
			}
			return true
		})
		for i, cl := range cls {
			if st := cl.State(); st != client.SessionSafe {
				t.Fatalf("round %d: client %d is %v", round, i, st)
			}
		}
	}
	ka, many := up.Count(wire.MKeepAlive), up.Count(wire.MKeepAliveMany)
	if ka != 0 || many == 0 {
		t.Fatalf("the master got %d KeepAlive and %d KeepAliveMany calls from the proxy; want KeepAliveMany only", ka, many)
	}
	// 20 sessions renewed at least 3 times each, plus their first: one
	// call per session would be 80.
	if many > 40 {
		t.Fatalf("%d KeepAliveMany calls for 20 sessions renewed 4 times; want them carried together", many)
	}
	t.Logf("%d KeepAliveMany calls to the master", many)
}

// TestProxyClientsKeepConnectionsThroughFailover: when the master fails,
// a proxy's clients (each on a connection of its own) ask the proxy for
// the new master on the connection they have, instead of each dialling
// every proxy again, and renew their sessions with the new master.
// (Clients sharing their process's connection search together instead:
// client's TestPoolSearchesTogetherAfterFailover.)
func TestProxyClientsKeepConnectionsThroughFailover(t *testing.T) {
	const n = 20
	c := cell.StartCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	p, err := proxy.Start(ctx, proxy.Config{Cell: c.Addrs(), Listen: "127.0.0.1:0", Logger: c.Logger(), NoCache: true})
	cancel()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	link, err := netproxy.Listen("clients", p.Addr()) // counts the clients' connections
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { link.Close() })
	var cls []*client.Client
	for range n {
		cls = append(cls, c.Dial(t, client.Config{Servers: []string{link.Addr()}, FixedServers: true, SessionTTL: 6 * time.Second, OwnConnection: true}))
	}
	before := link.Stats().Accepted
	epoch := cls[0].Session().Epoch
	c.Kill(t, c.Master(t))
	wait.For(t, 0, "every session renewed by the new master", func() bool {
		for _, cl := range cls {
			if s := cl.Session(); s.Epoch == epoch || s.State != client.SessionSafe {
				return false
			}
		}
		return true
	})
	if got := link.Stats().Accepted - before; got != 0 {
		t.Fatalf("%d clients of the proxy opened %d new connections to it through the failover; want none (each asks on its own)", n, got)
	}
}
