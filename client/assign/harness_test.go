package assign_test

// A small harness for the integration tests: a group of members of one
// in-process cell, each recording what its callbacks saw.

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/chubby-dev/chubby/client"
	"github.com/chubby-dev/chubby/client/assign"
	"github.com/chubby-dev/chubby/testing/cell"
	"github.com/chubby-dev/chubby/testing/wait"
)

// Short leases, so that a dead member's items move within a second or two.
const (
	ttl       = time.Second
	lockDelay = 200 * time.Millisecond
)

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// callback is one callback call a member made.
type callback struct {
	kind   string // "assigned", "revoked", "revoked-done", "lost"
	member string
	items  []int
	at     time.Time
}

// group is the members of one group, with a log of their callbacks.
type group struct {
	t     *testing.T
	c     *cell.Cell
	dir   string
	m     int
	obs   *client.Client // an observer's session
	mu    sync.Mutex
	log   []callback
	onRev func(member string, ctx context.Context, items []assign.Item)

	members map[string]*assign.Member
	proxies map[string]*cell.Proxy
}

func newGroup(t *testing.T, m int) *group {
	c := cell.Start(t)
	return &group{t: t, c: c, dir: c.Path("work"), m: m, obs: c.Dial(t, client.Config{}),
		members: map[string]*assign.Member{}, proxies: map[string]*cell.Proxy{}}
}

func (g *group) record(kind, member string, items []assign.Item) {
	g.mu.Lock()
	defer g.mu.Unlock()
	var ns []int
	for _, it := range items {
		ns = append(ns, it.N)
	}
	g.log = append(g.log, callback{kind, member, ns, time.Now()})
}

func (g *group) callbacks() []callback {
	g.mu.Lock()
	defer g.mu.Unlock()
	return slices.Clone(g.log)
}

// join dials a client through its own proxy (so it can be cut off) and
// joins it as name.
func (g *group) join(name string, opts ...assign.Option) *assign.Member {
	g.t.Helper()
	p := g.c.NewProxy(g.t)
	g.proxies[name] = p
	g.joinWith(name, client.Config{Servers: []string{p.Addr()}, FixedServers: true, SessionTTL: ttl, Grace: time.Second, LockDelay: lockDelay}, opts...)
	return g.members[name]
}

// joinWith dials a client with cfg and joins it as name; it returns the
// client.
func (g *group) joinWith(name string, cfg client.Config, opts ...assign.Option) *client.Client {
	g.t.Helper()
	cl := g.c.Dial(g.t, cfg)
	opts = append([]assign.Option{assign.Name(name), assign.RevokeTimeout(3 * time.Second), assign.Logger(g.c.Logger()),
		assign.OnAssigned(func(items []assign.Item) { g.record("assigned", name, items) }),
		assign.OnLost(func(items []assign.Item) { g.record("lost", name, items) }),
		assign.OnRevoked(func(ctx context.Context, items []assign.Item) {
			g.record("revoked", name, items)
			if g.onRev != nil {
				g.onRev(name, ctx, items)
			}
			g.record("revoked-done", name, items)
		}),
	}, opts...)
	mb, err := assign.Join(ctxT(g.t), cl, g.dir, g.m, opts...)
	if err != nil {
		g.t.Fatalf("join %s: %v", name, err)
	}
	g.t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		mb.Leave(ctx)
	})
	g.members[name] = mb
	return cl
}

func (g *group) table() assign.Table {
	t, err := assign.ReadTable(ctxT(g.t), g.obs, g.dir)
	if err != nil {
		return assign.Table{}
	}
	return t
}

// settle waits until the table names exactly the live members and each of
// them holds exactly what the table gives it; it returns the table.
func (g *group) settle(live ...string) assign.Table {
	g.t.Helper()
	slices.Sort(live)
	var tab assign.Table
	var why string
	ok := wait.Until(15*time.Second, func() bool {
		tab = g.table()
		if !slices.Equal(tab.Members, live) {
			why = fmt.Sprintf("table members %v, want %v", tab.Members, live)
			return false
		}
		for _, name := range live {
			cur := g.members[name].Current()
			if !slices.Equal(cur.Numbers(), tab.Of(name)) || cur.Epoch != tab.Epoch {
				why = fmt.Sprintf("%s holds %v at epoch %d, the table (epoch %d) gives it %v", name, cur.Numbers(), cur.Epoch, tab.Epoch, tab.Of(name))
				return false
			}
		}
		return true
	})
	if !ok {
		g.t.Fatalf("the group did not settle: %s", why)
	}
	g.checkOwnedOnce(tab, live)
	return tab
}

// checkOwnedOnce: every item is held by exactly one live member, with a
// sequencer the cell says is valid; each member holds ⌊m/n⌋ or ⌈m/n⌉.
func (g *group) checkOwnedOnce(tab assign.Table, live []string) {
	g.t.Helper()
	owner := map[int]string{}
	for _, name := range live {
		cur := g.members[name].Current()
		n := len(cur.Items)
		if lo, hi := g.m/len(live), (g.m+len(live)-1)/len(live); n < lo || n > hi {
			g.t.Errorf("%s owns %d items, want %d..%d", name, n, lo, hi)
		}
		for _, it := range cur.Items {
			if o, dup := owner[it.N]; dup {
				g.t.Errorf("item %d owned by %s and %s", it.N, o, name)
			}
			owner[it.N] = name
			if ok, err := g.obs.CheckSequencer(ctxT(g.t), it.Seq); err != nil || !ok {
				g.t.Errorf("%s's sequencer %v of item %d is not valid: %v %v", name, it.Seq, it.N, ok, err)
			}
			if it.Ctx.Err() != nil {
				g.t.Errorf("%s's item %d has its Ctx done", name, it.N)
			}
		}
	}
	if len(owner) != g.m {
		g.t.Errorf("%d of %d items owned: %v", len(owner), g.m, owner)
	}
}

// seqs maps each item to its holder's sequencer now.
func (g *group) seqs(live ...string) map[int]client.Sequencer {
	out := map[int]client.Sequencer{}
	for _, name := range live {
		for _, it := range g.members[name].Current().Items {
			out[it.N] = it.Seq
		}
	}
	return out
}
