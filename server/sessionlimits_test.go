package server_test

// Per-session and per-principal bounds (issue 11, "limits"): each exceeded
// gives resource_exhausted to that caller only, and its slot comes back.

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/chubby-dev/chubby/client"
	"github.com/chubby-dev/chubby/server"
	"github.com/chubby-dev/chubby/testing/cell"
	"github.com/chubby-dev/chubby/testing/wait"
	"github.com/chubby-dev/chubby/wire"
)

// TestWaitsPerSessionBounded: a session may have MaxWaitsPerSession
// blocked Acquires waiting; one more is refused, others' are not, and a
// granted wait frees its slot.
func TestWaitsPerSessionBounded(t *testing.T) {
	c := cell.Start(t, cell.WithServerConfig(func(_ int, cfg *server.Config) { cfg.MaxWaitsPerSession = 2 }))
	holder, waiter, other := c.Dial(t, client.Config{}), c.Dial(t, client.Config{}), c.Dial(t, client.Config{})
	var held []*client.Handle
	for i := range 3 {
		h := open(t, holder, c.Path(fmt.Sprint("l", i)), client.Create())
		if err := h.Acquire(ctxT(t), client.Exclusive); err != nil {
			t.Fatal(err)
		}
		held = append(held, h)
	}
	granted := make(chan error, 2)
	for i := range 2 {
		h := open(t, waiter, c.Path(fmt.Sprint("l", i)))
		go func() { granted <- h.Acquire(context.Background(), client.Exclusive) }()
	}
	wait.For(t, 0, "two waits queued", func() bool { return server.RegisteredWaits(c.Server()) == 2 })
	third := open(t, waiter, c.Path("l2"))
	if err := third.Acquire(ctxT(t), client.Exclusive); !errors.Is(err, client.ErrResourceExhausted) {
		t.Fatalf("a third blocked Acquire: %v, want ErrResourceExhausted", err)
	}
	// Another session is not held to the first one's count.
	otherDone := make(chan error, 1)
	oh := open(t, other, c.Path("l2"))
	go func() { otherDone <- oh.Acquire(context.Background(), client.Exclusive) }()
	// A grant frees a slot.
	if err := held[0].Release(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	if err := <-granted; err != nil {
		t.Fatal(err)
	}
	if err := held[2].Release(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	if err := <-otherDone; err != nil {
		t.Fatalf("the other session's wait: %v", err)
	}
	go func() { granted <- third.Acquire(context.Background(), client.Exclusive) }()
	if err := oh.Release(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	if err := <-granted; err != nil {
		t.Fatalf("a wait after a slot was freed: %v", err)
	}
}

// TestWatchesPerSessionBounded: a session may watch MaxWatchesPerSession
// nodes; one more is refused, watching one again is not, and closing a
// watching handle frees its slot.
func TestWatchesPerSessionBounded(t *testing.T) {
	c := cell.Start(t, cell.WithServerConfig(func(_ int, cfg *server.Config) { cfg.MaxWatchesPerSession = 2 }))
	cl := c.Dial(t, client.Config{})
	a := open(t, cl, c.Path("a"), client.Create(), client.WithEvents())
	open(t, cl, c.Path("b"), client.Create(), client.WithEvents())
	if _, err := cl.Open(ctxT(t), c.Path("c"), client.Create(), client.WithEvents()); !errors.Is(err, client.ErrResourceExhausted) {
		t.Fatalf("a third watch: %v, want ErrResourceExhausted", err)
	}
	a2 := open(t, cl, c.Path("a"), client.WithEvents()) // watched already
	for _, h := range []*client.Handle{a, a2} {         // the last handle watching a ends its watch
		if err := h.Close(); err != nil {
			t.Fatal(err)
		}
	}
	wait.For(t, 0, "the closed handle's watch gone", func() bool {
		h, err := cl.Open(ctxT(t), c.Path("c"), client.Create(), client.WithEvents())
		return err == nil && h != nil
	})
}

// TestCreateSessionRateBounded: past CreateSessionRate a second, a
// CreateSession is refused; a moment later they are admitted again.
func TestCreateSessionRateBounded(t *testing.T) {
	c := cell.Start(t, cell.WithServerConfig(func(_ int, cfg *server.Config) { cfg.CreateSessionRate = 3 }))
	r := c.DialRaw(t)
	if _, err := r.Hello(); err != nil {
		t.Fatal(err)
	}
	refused := 0
	for range 6 {
		if _, err := r.CreateSession(12 * time.Second); errors.Is(err, wire.ErrResourceExhausted) {
			refused++
		} else if err != nil {
			t.Fatal(err)
		}
	}
	if refused == 0 {
		t.Fatal("6 CreateSessions at once at a rate of 3 a second: none refused")
	}
	wait.For(t, 0, "a CreateSession admitted again", func() bool {
		_, err := r.CreateSession(12 * time.Second)
		return err == nil
	})
}

// TestSessionsPerPrincipalBounded: on a TLS cell one principal may hold
// MaxSessionsPerPrincipal sessions; another principal is not held to its
// count, and an ended session frees a slot.
func TestSessionsPerPrincipalBounded(t *testing.T) {
	files, clients := cell.DevTLS(t, "alice", "bob")
	c := cell.Start(t, cell.WithServerConfig(func(_ int, cfg *server.Config) {
		cfg.TLS = files
		cfg.MaxSessionsPerPrincipal = 2
	}))
	alice, bob := clients["alice"], clients["bob"]
	a1 := c.Dial(t, client.Config{TLS: alice})
	c.Dial(t, client.Config{TLS: alice})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if cl, err := client.Dial(ctx, client.Config{Servers: []string{c.Addr()}, TLS: alice}); !errors.Is(err, client.ErrResourceExhausted) {
		if cl != nil {
			cl.Close()
		}
		t.Fatalf("alice's third session: %v, want ErrResourceExhausted", err)
	}
	if p := c.Dial(t, client.Config{TLS: bob}).Session().Principal; p != "bob" {
		t.Fatalf("bob's session belongs to %q", p)
	}
	if err := a1.Close(); err != nil {
		t.Fatal(err)
	}
	cl, err := client.Dial(ctx, client.Config{Servers: []string{c.Addr()}, TLS: alice})
	if err != nil {
		t.Fatalf("alice's session after one ended: %v", err)
	}
	cl.Close()
}
