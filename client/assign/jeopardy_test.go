package assign_test

import (
	"slices"
	"testing"
	"time"

	"github.com/chubby-dev/chubby/client"
	"github.com/chubby-dev/chubby/client/assign"
	"github.com/chubby-dev/chubby/session"
	"github.com/chubby-dev/chubby/testing/cell"
	"github.com/chubby-dev/chubby/testing/wait"
	"github.com/chubby-dev/chubby/wire"
)

// TestJeopardyThenSafe: a member whose session enters jeopardy reports
// every item lost at once (OnLost, Ctx done, gone from its assignment).
// Meanwhile a third member joins; the coordinator (another member) gives
// it one of the cut-off member's items, but its write of the table waits
// for the cut-off member (which caches the table) as Chubby's cache
// coherence has it, and the joiner cannot take the item's lock. When the
// session comes back safe, the member takes back the item the table still
// gives it — the same hold, same sequencer — and gives up the other
// (released at once if the new table is what it reads first, else
// revoked), which the joiner then acquires with a greater generation.
//
// The cut-off member is x, the coordinator b (x and b hold two items each
// of four; the extra slot goes to b by name, so the joiner c takes one of
// x's). The cell and x's client run on manual clocks (the other members on
// the real one), so the jeopardy ends before the master's lease of the
// session does.
func TestJeopardyThenSafe(t *testing.T) {
	c := cell.Start(t, cell.WithManualClock())
	sc := c.Manual(t)
	cc := session.NewManualClock(cell.Epoch)
	g := &group{t: t, c: c, dir: c.Path("work"), m: 4, obs: c.Dial(t, client.Config{}),
		members: map[string]*assign.Member{}, proxies: map[string]*cell.Proxy{}}
	g.joinWith("b", client.Config{SessionTTL: 12 * time.Second})
	g.settle("b")
	p := c.NewProxy(t)
	cl := g.joinWith("x", client.Config{Servers: []string{p.Addr()}, FixedServers: true, Clock: cc, SessionTTL: 12 * time.Second})
	t1 := g.settle("x", "b")
	if g.members["x"].Coordinator() {
		t.Fatal("x is the coordinator; the test wants b to be")
	}
	held := g.members["x"].Current().Items
	if len(held) != 2 {
		t.Fatalf("x holds %v", held)
	}

	p.Break()
	cc.Advance(cl.Session().LeaseLeft)
	wait.For(t, 0, "x's items lost at jeopardy", func() bool { return len(g.members["x"].Current().Items) == 0 })
	for _, it := range held {
		if it.Ctx.Err() == nil {
			t.Errorf("item %d's Ctx is live in jeopardy", it.N)
		}
	}
	if !slices.ContainsFunc(g.callbacks(), func(cb callback) bool {
		return cb.kind == "lost" && cb.member == "x" && slices.Equal(cb.items, t1.Of("x"))
	}) {
		t.Fatalf("no OnLost of x's items %v: %v", t1.Of("x"), g.callbacks())
	}

	g.joinWith("c", client.Config{SessionTTL: 12 * time.Second})
	// The coordinator's new table waits: a caches the table, and the
	// master lets the write commit only once a acknowledged the
	// invalidation or its lease ran out. Nobody owns two items at once.
	wait.Never(t, 300*time.Millisecond, "the table changing or c owning an item while x's session may cache the table and holds its items' locks", func() bool {
		return g.table().Epoch != t1.Epoch || len(g.members["c"].Current().Items) > 0
	})

	// Back to safe: heal, let the client reconnect on its clock and the
	// master answer on its own.
	n := p.Count(wire.MKeepAlive)
	p.Heal()
	for i := 0; p.Count(wire.MKeepAlive) == n; i++ {
		if i == 400 {
			t.Fatal("x did not reconnect")
		}
		cc.Advance(100 * time.Millisecond)
		wait.Until(5*time.Millisecond, func() bool { return p.Count(wire.MKeepAlive) > n })
	}
	safe := func() bool { return cl.Session().State == client.SessionSafe }
	for i := 0; !safe(); i++ {
		if i == 50 {
			t.Fatal("x's session did not come back safe")
		}
		sc.Advance(500 * time.Millisecond)
		wait.Until(20*time.Millisecond, safe)
	}
	t3 := g.settle("x", "b", "c")
	var taken int
	for _, n := range t3.Of("c") {
		if t1.OwnerOf(n) == "x" {
			taken++
		}
	}
	if len(t3.Of("c")) != 1 || taken != 1 {
		t.Fatalf("c owns %v, want one of x's items %v", t3.Of("c"), t1.Of("x"))
	}
	now := g.seqs("x", "b", "c")
	for _, it := range held {
		switch owner := t3.OwnerOf(it.N); owner {
		case "x":
			if now[it.N] != it.Seq {
				t.Errorf("item %d: x holds it with %v, want the same hold as before the jeopardy %v", it.N, now[it.N], it.Seq)
			}
		case "c":
			if now[it.N].Gen <= it.Seq.Gen {
				t.Errorf("item %d: c holds it with generation %d, not after x's %d", it.N, now[it.N].Gen, it.Seq.Gen)
			}
		default:
			t.Errorf("item %d moved from x to %s", it.N, owner)
		}
	}
	cbs := g.callbacks()
	lostAt := slices.IndexFunc(cbs, func(cb callback) bool { return cb.kind == "lost" && cb.member == "x" })
	if !slices.ContainsFunc(cbs[lostAt+1:], func(cb callback) bool {
		return cb.kind == "assigned" && cb.member == "x" && len(cb.items) > 0
	}) {
		t.Error("x did not report the items it took back (OnAssigned)")
	}
}
