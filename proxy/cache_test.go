package proxy_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/chubby-dev/chubby/client"
	"github.com/chubby-dev/chubby/proxy"
	"github.com/chubby-dev/chubby/testing/cell"
	"github.com/chubby-dev/chubby/wire"
)

func startProxy(t *testing.T, c *cell.Cell, servers []string) *proxy.Proxy {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	p, err := proxy.Start(ctx, proxy.Config{Cell: servers, Listen: "127.0.0.1:0", Logger: c.Logger()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func readFile(t *testing.T, cl *client.Client, path string) string {
	t.Helper()
	h, err := cl.Open(ctxT(t), path, client.NoCache())
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	data, _, err := h.GetContentsAndStat(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// TestProxyAnswersReadsFromItsCache: clients that do not cache read a file
// through a proxy; after the proxy's first read of it the master sees no
// more reads, however many clients read, and a write that returned is
// seen by the very next read through the proxy (the proxy's entry was
// invalidated before the write committed).
func TestProxyAnswersReadsFromItsCache(t *testing.T) {
	c := cell.Start(t)
	up := c.NewProxy(t) // counts the proxy's calls to the master
	p := startProxy(t, c, []string{up.Addr()})
	writer := c.Dial(t, client.Config{})
	f := c.Path("config")
	if _, err := writer.WriteFile(ctxT(t), f, []byte("v1")); err != nil {
		t.Fatal(err)
	}
	var readers []*client.Client
	for range 5 {
		readers = append(readers, c.Dial(t, client.Config{Servers: []string{p.Addr()}, FixedServers: true, DisableCache: true}))
	}
	if got := readFile(t, readers[0], f); got != "v1" {
		t.Fatalf("read %q, want v1", got)
	}
	before, hits := up.Count(wire.MGetContents), p.CacheStats().Hits
	n := 0
	for range 4 {
		for i, r := range readers {
			if got := readFile(t, r, f); got != "v1" {
				t.Fatalf("reader %d read %q, want v1", i, got)
			}
			n++
		}
	}
	if got := p.CacheStats().Hits - hits; got != uint64(n) {
		t.Fatalf("the proxy answered %d of %d reads itself; want all", got, n)
	}
	if got := up.Count(wire.MGetContents) - before; got != 0 {
		t.Fatalf("the master got %d of %d reads of a file that did not change; want the proxy's cache to answer them", got, n)
	}
	for round := range 5 {
		v := []byte{'w', byte('0' + round)}
		if _, err := writer.WriteFile(ctxT(t), f, v); err != nil {
			t.Fatal(err)
		}
		before := up.Count(wire.MGetContents)
		for i, r := range readers {
			if got := readFile(t, r, f); got != string(v) {
				t.Fatalf("round %d: reader %d read %q after the write of %q returned", round, i, got, v)
			}
		}
		if got := up.Count(wire.MGetContents) - before; got != 1 {
			t.Fatalf("round %d: the master got %d reads from the proxy after a write; want its one refill", round, got)
		}
	}
	t.Logf("proxy cache: %+v", p.CacheStats())
}

// TestProxyCacheServesOnlyRenewedSessions: the proxy answers a read from
// its cache only for a session it saw renewed with the same secret; a
// read naming the session with another secret, or a session closed, goes
// to the master, which refuses it.
func TestProxyCacheServesOnlyRenewedSessions(t *testing.T) {
	c := cell.Start(t)
	p := startProxy(t, c, []string{c.Addr()})
	writer := c.Dial(t, client.Config{})
	f := c.Path("secret")
	if _, err := writer.WriteFile(ctxT(t), f, []byte("s1")); err != nil {
		t.Fatal(err)
	}
	r := cell.DialRawTo(t, p.Addr())
	if _, err := r.Hello(); err != nil {
		t.Fatal(err)
	}
	if _, err := r.CreateSession(5 * time.Second); err != nil {
		t.Fatal(err)
	}
	if err := r.Call(wire.MKeepAlive, wire.KeepAliveArgs{Urgent: true}, &wire.KeepAliveReply{}); err != nil {
		t.Fatal(err)
	}
	read := func() (string, error) {
		var rep wire.ContentsReply
		err := r.Call(wire.MGetContents, wire.NodeArgs{Path: f}, &rep)
		return string(rep.Data), err
	}
	hits := p.CacheStats().Hits
	for range 2 {
		if got, err := read(); err != nil || got != "s1" {
			t.Fatalf("read %q, %v; want s1", got, err)
		}
	}
	if got := p.CacheStats().Hits - hits; got == 0 {
		t.Fatal("the proxy answered none of a renewed session's reads itself")
	}
	secret := r.Secret
	r.Secret = []byte("not the secret")
	hits = p.CacheStats().Hits
	if got, err := read(); !errors.Is(err, client.ErrPermission) {
		t.Fatalf("a read with the wrong secret: %q, %v; want permission denied", got, err)
	}
	r.Secret = secret
	if err := r.Call(wire.MCloseSession, wire.Empty{}, nil); err != nil {
		t.Fatal(err)
	}
	if got, err := read(); err == nil {
		t.Fatalf("a read of a closed session answered %q", got)
	}
	if got := p.CacheStats().Hits - hits; got != 0 {
		t.Fatalf("the proxy answered %d reads of a wrong secret or a closed session from its cache", got)
	}
}
