package client_test

// Tests of SessionGroup: many sessions renewed by one loop over one
// connection, on real cells.

import (
	"context"
	"testing"
	"time"

	"github.com/chubby-dev/chubby/client"
	"github.com/chubby-dev/chubby/session"
	"github.com/chubby-dev/chubby/testing/cell"
	"github.com/chubby-dev/chubby/testing/wait"
	"github.com/chubby-dev/chubby/wire"
)

// groupRig is a one-server cell with a manual clock (sc), a proxy in front
// of it, and a SessionGroup of n sessions through the proxy on its own
// manual clock (cc).
type groupRig struct {
	c      *cell.Cell
	sc, cc *session.ManualClock
	p      *cell.Proxy
	g      *client.SessionGroup
}

func newGroupRig(t *testing.T, n int) *groupRig {
	t.Helper()
	c := cell.Start(t, cell.WithManualClock())
	r := &groupRig{c: c, sc: c.Manual(t), cc: session.NewManualClock(cell.Epoch), p: c.NewProxy(t)}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	g, err := client.NewSessionGroup(ctx, client.Config{Servers: []string{r.p.Addr()}, FixedServers: true, Clock: r.cc, SessionTTL: 12 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	r.g = g
	t.Cleanup(func() { g.Close(context.Background()) })
	for range n {
		if _, err := g.Create(ctx); err != nil {
			t.Fatalf("create: %v", err)
		}
	}
	return r
}

// TestSessionGroupRenewsOverOneConnection: 40 sessions of a group use one
// connection and are renewed by KeepAliveMany calls alone, a call per hold
// for all of them, and outlive several TTLs of the master's clock; Close
// ends them on the master.
func TestSessionGroupRenewsOverOneConnection(t *testing.T) {
	const n = 40
	r := newGroupRig(t, n)
	if got := r.p.Conns(); got != 1 {
		t.Fatalf("a group of %d sessions opened %d connections, want 1", n, got)
	}
	if got := r.c.Status().Sessions; got != n {
		t.Fatalf("the master has %d sessions, want %d", got, n)
	}
	wait.For(t, 0, "the first KeepAliveMany", func() bool { return r.p.Count(wire.MKeepAliveMany) >= 1 })
	start := r.p.Count(wire.MKeepAliveMany)
	// Each round the master's clock moves a step at a time until the
	// parked call is answered and the next one arrives: 8 rounds of a
	// hold (a fifth of the 12 s TTL) are 19 s, past the TTL.
	const rounds = 8
	for range rounds {
		before := r.p.Count(wire.MKeepAliveMany)
		wait.For(t, 0, "the next KeepAliveMany", func() bool {
			if r.p.Count(wire.MKeepAliveMany) > before {
				return true
			}
			r.sc.Advance(200 * time.Millisecond)
			return false
		})
	}
	if got := r.c.Status().Sessions; got != n {
		t.Fatalf("after %d holds the master has %d sessions, want %d", rounds, got, n)
	}
	if got := r.g.Len(); got != n || r.g.Lost() != 0 {
		t.Fatalf("the group holds %d sessions and lost %d, want %d and 0", got, r.g.Lost(), n)
	}
	if got := r.p.Count(wire.MKeepAlive); got != 0 {
		t.Fatalf("%d KeepAlive calls of a session of its own, want none", got)
	}
	// One call per hold for all of them (the one parked at the end may
	// have been sent already): not one per session.
	if got := r.p.Count(wire.MKeepAliveMany) - start; got > rounds+1 {
		t.Fatalf("%d KeepAliveMany calls over %d holds, want one per hold", got, rounds)
	}
	if err := r.g.Close(context.Background()); err != nil {
		t.Fatalf("close: %v", err)
	}
	if got := r.c.Status().Sessions; got != 0 {
		t.Fatalf("after Close the master has %d sessions, want 0", got)
	}
	if _, err := r.g.Create(context.Background()); err == nil {
		t.Fatal("Create after Close succeeded")
	}
}

// TestSessionGroupCountsExpiredSessionsLost: while the group cannot reach
// the master its sessions expire there; once it can, the master's answer
// tells it so, and it counts them lost and stops renewing them.
func TestSessionGroupCountsExpiredSessionsLost(t *testing.T) {
	const n = 10
	r := newGroupRig(t, n)
	r.p.Break()
	// The master's clock runs past the TTL: it expires them all.
	wait.For(t, 0, "the master expired the sessions", func() bool {
		if r.c.Status().Sessions == 0 {
			return true
		}
		r.sc.Advance(time.Second)
		return false
	})
	r.p.Heal()
	// The group's clock moves less than the TTL: its own leases have not
	// run out, so only the master's answer can tell it.
	wait.For(t, 0, "the group learnt its sessions expired", func() bool {
		if r.g.Lost() == n {
			return true
		}
		r.cc.Advance(100 * time.Millisecond)
		return false
	})
	if got := r.g.Len(); got != 0 {
		t.Fatalf("the group still holds %d sessions", got)
	}
	if now := r.cc.Now(); now.Sub(cell.Epoch) >= 12*time.Second {
		t.Fatalf("the group's clock moved %v: its own leases ran out", now.Sub(cell.Epoch))
	}
}

// TestSessionGroupSurvivesFailover: after a SIGKILL-like stop of the
// master, every session of a group reaches the new master at once (its
// writes, which wait for every session carried over, go through long
// before a lease could run out) and none is lost.
func TestSessionGroupSurvivesFailover(t *testing.T) {
	const n = 200
	const ttl = 30 * time.Second
	c := cell.StartCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	g, err := client.NewSessionGroup(ctx, client.Config{Servers: c.Addrs(), SessionTTL: ttl})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close(context.Background()) })
	for range n {
		if _, err := g.Create(ctx); err != nil {
			t.Fatalf("create: %v", err)
		}
	}
	w := c.Dial(t, client.Config{SessionTTL: ttl})
	old := c.Master(t)
	c.Kill(t, old)
	// A write on the new master waits for every session carried over to
	// renew there, or for its lease to end (a TTL after the takeover).
	// A third of the TTL is far more than the group needs, far less than
	// the TTL.
	wctx, wcancel := context.WithTimeout(context.Background(), ttl/3)
	defer wcancel()
	h, err := w.Open(wctx, c.Path("after-failover"), client.Create())
	if err != nil {
		t.Fatalf("open on the new master: %v", err)
	}
	if _, err := h.SetContents(wctx, []byte("x")); err != nil {
		t.Fatalf("a write on the new master did not go through within %v: %v", ttl/3, err)
	}
	m := c.Master(t)
	if got := c.Server(m).Status().Sessions; got != n+1 {
		t.Fatalf("the new master has %d sessions, want %d", got, n+1)
	}
	if g.Lost() != 0 || g.Len() != n {
		t.Fatalf("the group lost %d sessions and holds %d, want 0 and %d", g.Lost(), g.Len(), n)
	}
}
