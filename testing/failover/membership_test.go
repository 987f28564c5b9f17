package failover_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/chubby-dev/chubby/client"
	"github.com/chubby-dev/chubby/fs"
	"github.com/chubby-dev/chubby/testing/cell"
	"github.com/chubby-dev/chubby/wire"
)

// TestRemoveServerGuarded (issue 17, finding 6): RemoveServer needs a
// session, never takes a cell below a quorum of its current voters without
// ForceRemove, and a refused removal changes nothing — before, two calls
// with session 0 shrank a three-voter cell to one voter.
func TestRemoveServerGuarded(t *testing.T) {
	c := cell.StartCluster(t, 3)
	m := c.Master(t)
	var followers []string
	for i := range c.N() {
		if i != m {
			followers = append(followers, c.ID(i))
		}
	}
	cl := c.Dial(t, client.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	voters := func() int {
		t.Helper()
		ms, err := cl.Members(ctx)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, mb := range ms {
			if mb.Voter {
				n++
			}
		}
		return n
	}

	// No session: refused before anything is done.
	raw := c.DialRaw(t, m)
	if _, err := raw.Hello(); err != nil {
		t.Fatal(err)
	}
	if err := raw.Call(wire.MRemoveServer, wire.RemoveServerArgs{Name: followers[0]}, nil); err == nil {
		t.Fatal("RemoveServer without a session succeeded")
	}
	if n := voters(); n != 3 {
		t.Fatalf("%d voters after a refused anonymous removal, want 3", n)
	}

	// 3 → 2 voters: a quorum of 3 (2) remains.
	if err := cl.RemoveServer(ctx, followers[0]); err != nil {
		t.Fatal(err)
	}
	if n := voters(); n != 2 {
		t.Fatalf("%d voters after removing %s, want 2", n, followers[0])
	}
	// 2 → 1 would leave fewer than a quorum of 2: refused, nothing changed.
	err := cl.RemoveServer(ctx, followers[1])
	if !errors.Is(err, fs.ErrBadRequest) || !strings.Contains(err.Error(), "quorum") {
		t.Fatalf("removing a second voter of three: %v; want a refusal naming the quorum", err)
	}
	if n := voters(); n != 2 {
		t.Fatalf("%d voters after a refused removal, want 2", n)
	}
	if _, err := cl.WriteFile(ctx, c.Path("after-refusal"), []byte("x")); err != nil {
		t.Fatalf("the cell does not serve after a refused removal: %v", err)
	}
	// The master itself is the last voter: never removable.
	master := c.ID(m)
	if err := cl.RemoveServer(ctx, followers[1], client.ForceRemove()); err != nil {
		t.Fatalf("forced removal: %v", err)
	}
	if n := voters(); n != 1 {
		t.Fatalf("%d voters after a forced removal, want 1", n)
	}
	if err := cl.RemoveServer(ctx, master, client.ForceRemove()); !errors.Is(err, fs.ErrBadRequest) {
		t.Fatalf("removing the last voter: %v; want a refusal", err)
	}
	if _, err := cl.WriteFile(ctx, c.Path("one-voter"), []byte("x")); err != nil {
		t.Fatalf("a one-voter cell does not serve: %v", err)
	}
}
