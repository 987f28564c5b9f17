package client_test

// Tests of Pool: many Clients, each its own session, over one connection,
// renewed by KeepAliveMany calls, on a real one-server cell with manual
// clocks on both sides and a counting proxy between them.

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/chubby-dev/chubby/client"
	"github.com/chubby-dev/chubby/session"
	"github.com/chubby-dev/chubby/testing/cell"
	"github.com/chubby-dev/chubby/testing/wait"
	"github.com/chubby-dev/chubby/wire"
)

// poolRig is a cell and n Clients of it dialled with one Pool through a
// proxy; sc is the server's clock, cc the clients'.
type poolRig struct {
	c      *cell.Cell
	sc, cc *session.ManualClock
	p      *cell.Proxy
	pool   *client.Pool
	cls    []*client.Client
}

func newPoolRig(t *testing.T, n int) *poolRig {
	t.Helper()
	c := cell.Start(t, cell.WithManualClock())
	r := &poolRig{c: c, sc: c.Manual(t), cc: session.NewManualClock(cell.Epoch), p: c.NewProxy(t), pool: client.NewPool()}
	t.Cleanup(func() { r.pool.Close() }) // after the clients (cleanups run last first)
	for range n {
		r.cls = append(r.cls, c.Dial(t, client.Config{Servers: []string{r.p.Addr()}, FixedServers: true, Clock: r.cc, Pool: r.pool}))
	}
	return r
}

// TestPoolSharesConnectionAndRenewals: 20 Clients of one Pool use one
// connection, renew their sessions with KeepAliveMany calls only (no
// KeepAlive of their own, a few calls per round rather than one per
// session), and stay safe over several TTLs of both clocks.
func TestPoolSharesConnectionAndRenewals(t *testing.T) {
	const n = 20
	r := newPoolRig(t, n)
	if got := r.p.Conns(); got != 1 {
		t.Fatalf("%d Clients of one Pool opened %d connections, want 1", n, got)
	}
	wait.For(t, 0, "the first KeepAliveMany", func() bool { return r.p.Count(wire.MKeepAliveMany) >= 1 })
	start := r.p.Count(wire.MKeepAliveMany)
	// Each round the clients' clock moves a bit less than the shortest
	// renewal interval (so nobody sends a second KeepAlive early), then the
	// server's clock a step at a time until every client's lease runs from
	// a KeepAlive sent after that move (a call parked after a step waits for
	// later ones): 6 rounds are 18 s of the clients' clock, past the 12 s
	// TTL.
	const rounds = 6
	for i := range rounds {
		r.cc.Advance(3 * time.Second)
		ends := make([]time.Time, n)
		for j, cl := range r.cls {
			ends[j] = cl.Session().LeaseEnd
		}
		wait.For(t, 0, "every session renewed", func() bool {
			for j, cl := range r.cls {
				if !cl.Session().LeaseEnd.After(ends[j]) {
					r.sc.Advance(250 * time.Millisecond)
					return false
				}
			}
			return true
		})
		for j, cl := range r.cls {
			if st := cl.State(); st != client.SessionSafe {
				t.Fatalf("round %d: client %d is %v", i, j, st)
			}
		}
	}
	if got := r.p.Count(wire.MKeepAlive); got != 0 {
		t.Fatalf("%d KeepAlive calls through the Pool, want none (KeepAliveMany only)", got)
	}
	// One call per round would be ideal; replies racing the gather window
	// can split the sessions over a few calls, never one per session.
	if got := r.p.Count(wire.MKeepAliveMany) - start; got > n*rounds/4 {
		t.Fatalf("%d KeepAliveMany calls for %d rounds of %d sessions, want at most %d", got, rounds, n, n*rounds/4)
	}
	if got := r.c.Status().Sessions; got != n {
		t.Fatalf("the master has %d sessions, want %d", got, n)
	}
}

// TestPoolClientsStayDistinctSessions: Clients sharing a connection keep
// sessions, caches and locks of their own: one's cached read is
// invalidated before another's write returns (the invalidation travels in
// a KeepAliveMany reply), a lock held by one is not another's, and closing
// one ends only its session.
func TestPoolClientsStayDistinctSessions(t *testing.T) {
	r := newPoolRig(t, 3)
	a, b, c := r.cls[0], r.cls[1], r.cls[2]
	path := r.c.Path("cfg")
	if _, err := a.WriteFile(ctxT(t), path, []byte("v1")); err != nil {
		t.Fatalf("write v1: %v", err)
	}
	h, err := b.Open(ctxT(t), path)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	if data, _, err := h.GetContentsAndStat(ctxT(t)); err != nil || !bytes.Equal(data, []byte("v1")) {
		t.Fatalf("b reads %q, %v; want v1", data, err)
	}
	hits := b.CacheStats().Hits
	if data, _, err := h.GetContentsAndStat(ctxT(t)); err != nil || !bytes.Equal(data, []byte("v1")) || b.CacheStats().Hits != hits+1 {
		t.Fatalf("b's second read: %q, %v, cache hits %d → %d; want v1 from the cache", data, err, hits, b.CacheStats().Hits)
	}
	if _, err := a.WriteFile(ctxT(t), path, []byte("v2")); err != nil {
		t.Fatalf("write v2: %v", err)
	}
	if data, _, err := h.GetContentsAndStat(ctxT(t)); err != nil || !bytes.Equal(data, []byte("v2")) {
		t.Fatalf("b reads %q, %v after a's write returned; want v2", data, err)
	}

	lock := r.c.Path("lock")
	la, err := a.Open(ctxT(t), lock, client.Create())
	if err != nil {
		t.Fatal(err)
	}
	if err := la.Acquire(ctxT(t), client.Exclusive); err != nil {
		t.Fatalf("a acquires: %v", err)
	}
	lc, err := c.Open(ctxT(t), lock)
	if err != nil {
		t.Fatal(err)
	}
	if err := lc.TryAcquire(ctxT(t), client.Exclusive); !errors.Is(err, client.ErrLockHeld) {
		t.Fatalf("c's TryAcquire of a's lock: %v; want ErrLockHeld", err)
	}

	if err := c.Close(); err != nil {
		t.Fatalf("close c: %v", err)
	}
	wait.For(t, 0, "the master to end c's session", func() bool { return r.c.Status().Sessions == 2 })
	if data, _, err := h.GetContentsAndStat(ctxT(t)); err != nil || !bytes.Equal(data, []byte("v2")) {
		t.Fatalf("b reads %q, %v after c closed; want v2", data, err)
	}
	if err := la.Release(ctxT(t)); err != nil {
		t.Fatalf("a releases after c closed: %v", err)
	}
	if got := r.p.Conns(); got != 1 {
		t.Fatalf("%d connections after c closed, want the shared 1", got)
	}
}

// TestPoolAsksHelloOnce: 40 Clients of one Pool dialling at once ask the
// server who the master is once (a Hello in flight answers every Client
// waiting for it), not once each: after a failover every session of a
// Pool looks for the new master at the same moment.
func TestPoolAsksHelloOnce(t *testing.T) {
	const n = 40
	c := cell.Start(t)
	p := c.NewProxy(t)
	pool := client.NewPool()
	t.Cleanup(func() { pool.Close() })
	errs := make(chan error, n)
	cls := make(chan *client.Client, n)
	for range n {
		go func() {
			cl, err := client.Dial(ctxT(t), client.Config{Servers: []string{p.Addr()}, FixedServers: true, Pool: pool})
			errs <- err
			cls <- cl
		}()
	}
	for range n {
		if err := <-errs; err != nil {
			t.Fatalf("dial: %v", err)
		}
		cl := <-cls
		t.Cleanup(func() { cl.Close() })
	}
	// One, or a few if the dials outlast the master's answer standing
	// (helloFresh, 1 s) on a loaded machine.
	if got := p.Count(wire.MHello); got > 3 {
		t.Fatalf("%d Clients dialling at once through one Pool sent %d Hellos, want 1 (a few at most)", n, got)
	}
	if got := c.Status().Sessions; got != n {
		t.Fatalf("the master has %d sessions, want %d", got, n)
	}
}

// TestPoolSearchesTogetherAfterFailover: when the master dies, the
// Clients of a Pool, which lost it at the same moment, look for the new
// master together: a few searches for all of them, not one each (at
// 100,000 sessions in a process, a search each starved it of CPU past
// the sessions' leases).
func TestPoolSearchesTogetherAfterFailover(t *testing.T) {
	const n = 50
	c := cell.StartCluster(t, 3)
	pool := client.NewPool()
	t.Cleanup(func() { pool.Close() })
	var cls []*client.Client
	for range n {
		cls = append(cls, c.Dial(t, client.Config{Pool: pool, SessionTTL: 6 * time.Second}))
	}
	old := c.Master(t)
	epoch := cls[0].Session().Epoch
	before := client.PoolSearches(pool)
	c.Kill(t, old)
	wait.For(t, 0, "every session renewed by the new master", func() bool {
		for _, cl := range cls {
			if s := cl.Session(); s.Epoch == epoch || s.State != client.SessionSafe {
				return false
			}
		}
		return true
	})
	got := client.PoolSearches(pool) - before
	// A search every notMasterFresh while the election runs, then one
	// that finds the master; each failed search sends the Clients to back
	// off for a while, so some search again later.
	if got > n/2 {
		t.Fatalf("%d Clients of a Pool searched for the new master %d times; want them to search together", n, got)
	}
	t.Logf("%d searches for %d Clients", got, n)
	for i, cl := range cls {
		if st := cl.State(); st != client.SessionSafe {
			t.Fatalf("client %d is %v after the failover", i, st)
		}
	}
}
