package client_test

// Tests of the process's shared connections: Clients dialled with neither
// a Pool nor OwnConnection.

import (
	"bytes"
	"testing"
	"time"

	"github.com/chubby-dev/chubby/client"
	"github.com/chubby-dev/chubby/testing/cell"
	"github.com/chubby-dev/chubby/testing/wait"
	"github.com/chubby-dev/chubby/wire"
)

// TestClientsShareTheProcessConnection: Clients dialled with defaults reach
// the master over one connection, each renewing its own session with a
// KeepAlive of its own (no KeepAliveMany), events streamed on it; closing
// one leaves the others safe on the connection, the connection closes with
// the last Client, and OwnConnection gets a Client one of its own.
func TestClientsShareTheProcessConnection(t *testing.T) {
	c := cell.Start(t)
	p := c.NewProxy(t)
	cfg := client.Config{Servers: []string{p.Addr()}, FixedServers: true}
	const n = 8
	cls := make([]*client.Client, n)
	for i := range cls {
		cls[i] = c.Dial(t, cfg)
	}
	if got := p.Conns(); got != 1 {
		t.Fatalf("%d Clients dialled with defaults opened %d connections, want 1", n, got)
	}
	ids := map[uint64]bool{}
	for _, cl := range cls {
		ids[cl.Session().ID] = true
	}
	if len(ids) != n {
		t.Fatalf("%d Clients on one connection have %d sessions, want %d", n, len(ids), n)
	}
	wait.For(t, 0, "a KeepAlive of each session", func() bool { return p.Count(wire.MKeepAlive) >= n })
	if got := p.Count(wire.MKeepAliveMany); got != 0 {
		t.Fatalf("%d KeepAliveMany calls; want each session's own KeepAlive", got)
	}

	// An event reaches its watcher on the shared connection, and the
	// watcher's cache has the new contents.
	f := c.Path("shared")
	w := cls[0]
	h := mustOpen(t, w, f, client.Create(), client.WithEvents(client.EventContentsModified))
	if _, _, err := h.GetContentsAndStat(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	if _, err := cls[1].WriteFile(ctxT(t), f, []byte("v2")); err != nil {
		t.Fatal(err)
	}
	nextEvent(t, w, client.EventContentsModified)
	if data, _, err := h.GetContentsAndStat(ctxT(t)); err != nil || !bytes.Equal(data, []byte("v2")) {
		t.Fatalf("watcher reads %q, %v after the event; want v2", data, err)
	}

	// One Client's end is its own: the connection stays for the others.
	if err := cls[2].Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := cls[3].WriteFile(ctxT(t), f, []byte("v3")); err != nil {
		t.Fatalf("a write after another Client of the connection closed: %v", err)
	}
	for i, cl := range cls {
		if i != 2 && cl.State() != client.SessionSafe {
			t.Fatalf("client %d is %v after client 2 closed", i, cl.State())
		}
	}
	if got := p.Conns(); got != 1 {
		t.Fatalf("%d connections after one Client closed, want the shared one", got)
	}

	own := c.Dial(t, client.Config{Servers: []string{p.Addr()}, FixedServers: true, OwnConnection: true})
	if got := p.Conns(); got != 2 {
		t.Fatalf("%d connections with an OwnConnection Client, want 2", got)
	}
	own.Close()
	for _, cl := range cls {
		cl.Close()
	}
	wait.For(t, 0, "the shared connection closed with its last Client", func() bool { return p.Conns() == 0 })
}

// TestPoolForgetsOldSearches: a Pool keeps the outcome of a search, and of
// a failed dial, only while it stands; a process that dials one cell after
// another (processPool lives as long as the process) does not keep a
// record and a connection of each.
func TestPoolForgetsOldSearches(t *testing.T) {
	a, b := cell.Start(t), cell.Start(t)
	pool := client.NewPool()
	t.Cleanup(func() { pool.Close() })
	cl := a.Dial(t, client.Config{Servers: []string{"127.0.0.1:1", a.Addr()}, FixedServers: true, Pool: pool})
	cl.Close()
	// The search, and the failed dial if the search tried that server
	// before the cell's.
	if got := client.PoolRecords(pool); got < 1 {
		t.Fatalf("after a search the Pool keeps %d records; want its outcome", got)
	}
	client.AgePoolRecords(pool, 2*time.Second)
	b.Dial(t, client.Config{Pool: pool})
	if got := client.PoolRecords(pool); got != 1 {
		t.Fatalf("the Pool keeps %d records after a search of another cell; want 1 (the new search), the stale ones forgotten", got)
	}
}
