package client_test

// Tests of the search for the master: one connection per search, not one
// per server.

import (
	"testing"
	"time"

	"github.com/chubby-dev/chubby/client"
	"github.com/chubby-dev/chubby/testing/cell"
	"github.com/chubby-dev/chubby/wire"
)

// TestSearchAsksOneServerAtATime: a client given four addresses that all
// lead to the master (four proxies) says Hello through one of them only,
// and the clients spread over them. With every server asked at once, each
// client would open four connections: thousands of clients searching after
// a failover behind proxies ran a process out of file descriptors.
func TestSearchAsksOneServerAtATime(t *testing.T) {
	client.SetProbeStagger(t, time.Minute) // only an answer moves the search on
	c := cell.Start(t)
	ps := []*cell.Proxy{c.NewProxy(t), c.NewProxy(t), c.NewProxy(t), c.NewProxy(t)}
	const n = 24
	for range n {
		c.Dial(t, client.Config{Servers: cell.ProxyAddrs(ps), FixedServers: true, OwnConnection: true})
	}
	total, used := 0, 0
	for _, p := range ps {
		h := p.Count(wire.MHello)
		total += h
		if h > 0 {
			used++
		}
	}
	if total != n {
		t.Fatalf("%d clients said Hello %d times over 4 addresses of the master; want once each", n, total)
	}
	if used < 2 {
		t.Fatalf("%d clients all chose the same one of 4 addresses; want them spread", n)
	}
}

// TestSearchMovesOnFromRefusingServers: servers that refuse connections
// cost the search nothing: it asks the next at once, not after a wait.
func TestSearchMovesOnFromRefusingServers(t *testing.T) {
	client.SetProbeStagger(t, time.Minute)
	c := cell.Start(t)
	down := []*cell.Proxy{c.NewProxy(t), c.NewProxy(t), c.NewProxy(t)}
	for _, p := range down {
		p.Break() // refuses connections
	}
	up := c.NewProxy(t)
	start := time.Now()
	for range 8 {
		c.Dial(t, client.Config{Servers: append(cell.ProxyAddrs(down), up.Addr()), FixedServers: true, OwnConnection: true})
	}
	// The probe timeout is 2 s: a search that waited on a refusal would
	// fail and retry; eight clients would take seconds.
	if took := time.Since(start); took > 10*time.Second {
		t.Fatalf("8 clients took %v to find the master behind 3 refusing servers", took)
	}
	if got := up.Count(wire.MHello); got != 8 {
		t.Fatalf("the master's address saw %d Hellos from 8 clients, want 8", got)
	}
}
