package assign_test

// Integration tests of the assignment recipe on an in-process cell.

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chubby-dev/chubby/client"
	"github.com/chubby-dev/chubby/client/assign"
	"github.com/chubby-dev/chubby/testing/wait"
	"github.com/chubby-dev/chubby/wire"
)

// TestGroupLifecycle: three members share ten items, each owned exactly
// once; a fourth joins and takes only the items it must (⌊10/4⌋ = 2; every
// other item keeps its holder and sequencer); one leaves and only its items
// move, each revoked (OnRevoked, then the release) before its new owner
// acquires it.
func TestGroupLifecycle(t *testing.T) {
	g := newGroup(t, 10)
	for _, n := range []string{"a", "b", "c"} {
		g.join(n)
	}
	t1 := g.settle("a", "b", "c")
	before := g.seqs("a", "b", "c")

	g.join("d")
	t2 := g.settle("a", "b", "c", "d")
	moved := assign.Moves(t1.Owners(), t2.Owners())
	minimum := 10 / 4
	if took := len(t2.Of("d")); moved != took || moved > minimum+1 {
		t.Fatalf("a join moved %d items (the joiner took %d); the minimum is %d", moved, took, minimum)
	}
	after := g.seqs("a", "b", "c", "d")
	for i, s := range before {
		if t2.OwnerOf(i) == t1.OwnerOf(i) && after[i] != s {
			t.Errorf("item %d stayed with %s but its sequencer changed %v → %v: it was released and taken again", i, t1.OwnerOf(i), s, after[i])
		}
	}
	t.Logf("join: %d items moved (minimum %d)", moved, minimum)

	leaver := t2.Of("b")
	if err := g.members["b"].Leave(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	if err := g.members["b"].Err(); !errors.Is(err, assign.ErrLeft) {
		t.Fatalf("Err after Leave: %v", err)
	}
	t3 := g.settle("a", "c", "d")
	if moved := assign.Moves(t2.Owners(), t3.Owners()); moved != len(leaver) {
		t.Fatalf("a leave of a member with %d items moved %d", len(leaver), moved)
	}
	checkRevokedBeforeAssigned(t, g.callbacks())
}

// checkRevokedBeforeAssigned: no item was assigned to a member while
// another still had it (assigned and neither revoked-done nor lost).
func checkRevokedBeforeAssigned(t *testing.T, log []callback) {
	t.Helper()
	owner := map[int]string{}
	for _, cb := range log {
		for _, n := range cb.items {
			switch cb.kind {
			case "assigned":
				if o, ok := owner[n]; ok && o != cb.member {
					t.Errorf("item %d assigned to %s at %v while %s still owned it", n, cb.member, cb.at.Format("15:04:05.000"), o)
				}
				owner[n] = cb.member
			case "revoked-done", "lost":
				if owner[n] == cb.member {
					delete(owner, n)
				}
			}
		}
	}
}

// TestRevokedBeforeTheMove: while the owner's OnRevoked runs, its item's
// Ctx is live, its sequencer still valid, and the joiner that takes the
// item has not acquired it; the joiner's Acquire succeeds only after the
// release.
func TestRevokedBeforeTheMove(t *testing.T) {
	g := newGroup(t, 4)
	g.join("a")
	g.settle("a")
	inRevoke := make(chan []assign.Item, 1)
	proceed := make(chan struct{})
	g.onRev = func(member string, ctx context.Context, items []assign.Item) {
		if member != "a" {
			return
		}
		inRevoke <- items
		<-proceed
	}
	b := g.join("b")
	var items []assign.Item
	select {
	case items = <-inRevoke:
	case <-time.After(wait.Timeout):
		t.Fatal("OnRevoked not called when b joined")
	}
	if len(items) != 2 {
		t.Fatalf("a revoked %v, want 2 items", items)
	}
	for _, it := range items {
		if it.Ctx.Err() != nil {
			t.Fatalf("item %d's Ctx is done during OnRevoked", it.N)
		}
		if ok, err := g.obs.CheckSequencer(ctxT(t), it.Seq); err != nil || !ok {
			t.Fatalf("item %d's sequencer invalid during OnRevoked: %v %v", it.N, ok, err)
		}
	}
	wait.Never(t, 300*time.Millisecond, "b owning an item while a's OnRevoked runs", func() bool { return len(b.Current().Items) > 0 })
	close(proceed)
	g.settle("a", "b")
	for _, it := range items {
		if it.Ctx.Err() == nil {
			t.Errorf("item %d's old Ctx is live after the release", it.N)
		}
	}
	got := b.Current().Items
	for i, it := range got {
		if it.Seq.Gen <= items[i].Seq.Gen {
			t.Errorf("item %d: the new owner's generation %d is not after the old %d", it.N, it.Seq.Gen, items[i].Seq.Gen)
		}
	}
	checkRevokedBeforeAssigned(t, g.callbacks())
}

// TestDeadMemberItemsReowned: a member cut off from the cell (its client
// alive, its links silent: a crash as the cell sees it) loses its items at
// jeopardy (OnLost, Ctx done), and the others own them again within TTL +
// lock-delay + 1 s of the cut, measured on the real clock.
func TestDeadMemberItemsReowned(t *testing.T) {
	g := newGroup(t, 10)
	for _, n := range []string{"a", "b", "c"} {
		g.join(n)
	}
	t1 := g.settle("a", "b", "c")
	victim := t1.Of("b")
	vItems := g.members["b"].Current().Items
	cut := time.Now()
	g.proxies["b"].Blackhole()
	bound := ttl + lockDelay + time.Second
	var took time.Duration
	wait.For(t, 10*time.Second, "b's items owned by a and c", func() bool {
		have := g.seqs("a", "c")
		for _, n := range victim {
			if _, ok := have[n]; !ok {
				return false
			}
		}
		took = time.Since(cut)
		return true
	})
	t.Logf("re-owned %d items %v after %v (bound %v)", len(victim), victim, took.Round(time.Millisecond), bound)
	if took > bound {
		t.Errorf("items re-owned %v after the cut, bound TTL + lock-delay + 1 s = %v", took, bound)
	}
	for _, it := range vItems {
		if it.Ctx.Err() == nil {
			t.Errorf("the dead member's item %d still has a live Ctx", it.N)
		}
	}
	wait.For(t, 10*time.Second, "the dead member to end", func() bool { return wait.Closed(g.members["b"].Done()) })
	if err := g.members["b"].Err(); !errors.Is(err, client.ErrSessionExpired) {
		t.Errorf("the dead member's Err = %v, want ErrSessionExpired", err)
	}
	var lost []int
	for _, cb := range g.callbacks() {
		if cb.kind == "lost" && cb.member == "b" {
			lost = append(lost, cb.items...)
		}
	}
	slices.Sort(lost)
	if !slices.Equal(lost, victim) {
		t.Errorf("OnLost was not called with the dead member's items %v: %v", victim, g.callbacks())
	}
	g.settle("a", "c")
	checkRevokedBeforeAssigned(t, g.callbacks())
}

// TestCoordinatorDiesItemsReowned: the same when the member that dies is
// the coordinator (the others elect another, which rebalances).
func TestCoordinatorDiesItemsReowned(t *testing.T) {
	g := newGroup(t, 6)
	for _, n := range []string{"a", "b", "c"} {
		g.join(n)
	}
	g.settle("a", "b", "c")
	var coord string
	for name, mb := range g.members {
		if mb.Coordinator() {
			coord = name
		}
	}
	if coord == "" {
		t.Fatal("no member says it is the coordinator")
	}
	var live []string
	for _, n := range []string{"a", "b", "c"} {
		if n != coord {
			live = append(live, n)
		}
	}
	cut := time.Now()
	g.proxies[coord].Blackhole()
	g.settle(live...)
	took := time.Since(cut)
	t.Logf("coordinator %s cut off; the others own every item after %v", coord, took.Round(time.Millisecond))
	if bound := ttl + lockDelay + time.Second; took > bound {
		t.Errorf("re-owned after %v, bound %v", took, bound)
	}
}

// TestJoinRejectsBadInput: m out of range, a bad directory, a taken name,
// another m than the group's.
func TestJoinRejectsBadInput(t *testing.T) {
	g := newGroup(t, 3)
	cl := g.c.Dial(t, client.Config{})
	for _, m := range []int{0, -1, assign.MaxItems + 1} {
		if _, err := assign.Join(ctxT(t), cl, g.dir, m); !errors.Is(err, assign.ErrItemCount) {
			t.Errorf("Join with m=%d: %v, want ErrItemCount", m, err)
		}
	}
	if _, err := assign.Join(ctxT(t), cl, "/not/a/cell/path", 3); !errors.Is(err, client.ErrBadPath) {
		t.Errorf("Join with a bad dir: %v, want ErrBadPath", err)
	}
	if _, err := assign.Join(ctxT(t), cl, g.c.Path("missing", "dir"), 3); !errors.Is(err, client.ErrNoSuchNode) {
		t.Errorf("Join under a missing parent: %v, want ErrNoSuchNode", err)
	}
	if _, err := assign.Join(ctxT(t), cl, g.dir, 3, assign.Name("a/b")); !errors.Is(err, assign.ErrBadName) {
		t.Errorf("Join with name a/b: %v, want ErrBadName", err)
	}
	if _, err := assign.Join(ctxT(t), nil, g.dir, 3); err == nil || !strings.Contains(err.Error(), "nil client") {
		t.Errorf("Join with a nil client: %v", err)
	}
	g.join("a")
	g.settle("a")
	if _, err := assign.Join(ctxT(t), cl, g.dir, 3, assign.Name("a")); !errors.Is(err, client.ErrExists) {
		t.Errorf("Join with a taken name: %v, want ErrExists", err)
	}
	if _, err := assign.Join(ctxT(t), cl, g.dir, 4); !errors.Is(err, assign.ErrItemCount) {
		t.Errorf("Join with another m than the group's: %v, want ErrItemCount", err)
	}
}

// TestAssignmentsCoalesce: a reader that does not read meanwhile gets the
// latest assignment, and the channel closes when the member leaves.
func TestAssignmentsCoalesce(t *testing.T) {
	g := newGroup(t, 5)
	a := g.join("a")
	g.settle("a")
	g.join("b")
	tab := g.settle("a", "b")
	got := <-a.Assignments()
	if !slices.Equal(got.Numbers(), tab.Of("a")) || got.Epoch != tab.Epoch {
		t.Fatalf("a late reader got %v at epoch %d, want the latest %v at %d", got.Numbers(), got.Epoch, tab.Of("a"), tab.Epoch)
	}
	if err := a.Leave(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for range a.Assignments() {
		}
	}()
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(wait.Timeout):
		t.Fatal("Assignments not closed after Leave")
	}
	g.settle("b")
}

// TestRevokeTimeoutBoundsAStuckCallback: an OnRevoked that never returns
// holds the items up only for RevokeTimeout: then they are released (their
// Ctx done) and the joiner owns them.
func TestRevokeTimeoutBoundsAStuckCallback(t *testing.T) {
	g := newGroup(t, 4)
	stuck := make(chan struct{})
	defer close(stuck)
	var sawDeadline sync.Once
	deadline := make(chan time.Duration, 1)
	g.onRev = func(member string, ctx context.Context, items []assign.Item) {
		if member != "a" {
			return
		}
		sawDeadline.Do(func() {
			d, _ := ctx.Deadline()
			deadline <- time.Until(d)
		})
		<-stuck // never finishes its step
	}
	g.join("a", assign.RevokeTimeout(300*time.Millisecond))
	g.settle("a")
	start := time.Now()
	g.join("b")
	g.settle("a", "b")
	took := time.Since(start)
	if d := <-deadline; d <= 0 || d > 300*time.Millisecond {
		t.Errorf("OnRevoked's ctx deadline was %v away, want within RevokeTimeout 300ms", d)
	}
	if took < 300*time.Millisecond {
		t.Errorf("the items moved %v after the join, before the revoke timeout", took)
	}
	t.Logf("a stuck OnRevoked held the move up for %v (RevokeTimeout 300ms)", took.Round(time.Millisecond))
}

// TestClosedClientItemsMoveAtOnce: a member whose client is closed (its
// session ended, its locks released without lock-delay) ends with
// ErrSessionExpired, and the others own its items without waiting for a
// TTL.
func TestClosedClientItemsMoveAtOnce(t *testing.T) {
	g := newGroup(t, 6)
	p := g.c.NewProxy(t)
	cl := g.joinWith("a", client.Config{Servers: []string{p.Addr()}, FixedServers: true, SessionTTL: 10 * time.Second, LockDelay: 10 * time.Second})
	g.join("b")
	g.join("c")
	t1 := g.settle("a", "b", "c")
	start := time.Now()
	cl.Close()
	wait.For(t, 0, "a to end", func() bool { return wait.Closed(g.members["a"].Done()) })
	if err := g.members["a"].Err(); !errors.Is(err, client.ErrSessionExpired) {
		t.Errorf("Err of a member whose client was closed: %v, want ErrSessionExpired", err)
	}
	t2 := g.settle("b", "c")
	took := time.Since(start)
	if moved := assign.Moves(t1.Owners(), t2.Owners()); moved != len(t1.Of("a")) {
		t.Errorf("%d items moved, a had %d", moved, len(t1.Of("a")))
	}
	if took > 5*time.Second {
		t.Errorf("a closed client's items moved after %v: they waited for its TTL or lock-delay (10 s)", took)
	}
	t.Logf("closed client: items owned again after %v", took.Round(time.Millisecond))
}

// TestOptionsMetadataAndItemLockDelay: Metadata is the member file's
// contents; ItemLockOptions sets the items' lock-delay, here 200 ms while
// the client's default is 15 s, so a cut-off member's items move within
// TTL + 200 ms + 1 s.
func TestOptionsMetadataAndItemLockDelay(t *testing.T) {
	g := newGroup(t, 4)
	for _, name := range []string{"a", "b"} {
		p := g.c.NewProxy(t)
		g.proxies[name] = p
		g.joinWith(name, client.Config{Servers: []string{p.Addr()}, FixedServers: true, SessionTTL: ttl, Grace: time.Second},
			assign.Metadata([]byte("addr-of-"+name)), assign.ItemLockOptions(client.LockDelay(lockDelay)))
	}
	g.settle("a", "b")
	h, err := g.obs.Open(ctxT(t), g.dir+"/members/a")
	if err != nil {
		t.Fatal(err)
	}
	if data, st, err := h.GetContentsAndStat(ctxT(t)); err != nil || string(data) != "addr-of-a" || !st.Ephemeral {
		t.Fatalf("member file: %q %+v %v; want ephemeral with the metadata", data, st, err)
	}
	cut := time.Now()
	g.proxies["a"].Blackhole()
	g.settle("b")
	took := time.Since(cut)
	t.Logf("items re-owned %v after the cut (item lock-delay 200ms, client default 15s)", took.Round(time.Millisecond))
	if bound := ttl + lockDelay + time.Second; took > bound {
		t.Errorf("re-owned after %v, bound %v: the items' lock-delay was not ItemLockOptions'", took, bound)
	}
}

// TestUnansweredReleaseIsCleared: a revoked item's Release that never
// reaches the cell (the request lost; the client gives up after its
// timeout) leaves the lock with the member's session while its handle
// forgets it. The member notices the failure and clears the lock itself
// (TryAcquire gets its hold back, Release frees it), so the new owner gets
// the item without waiting for the old member's session to end.
func TestUnansweredReleaseIsCleared(t *testing.T) {
	g := newGroup(t, 2)
	a := g.join("a")
	g.settle("a")
	var dropped atomic.Int32
	g.proxies["a"].DropRequests(func(req *wire.Request) bool {
		return req.Method == wire.MRelease && dropped.CompareAndSwap(0, 1)
	})
	start := time.Now()
	g.join("b")
	g.settle("a", "b")
	if dropped.Load() != 1 {
		t.Fatal("no Release was dropped")
	}
	t.Logf("the item moved %v after the join, its first Release lost", time.Since(start).Round(time.Millisecond))
	if len(a.Current().Items) != 1 {
		t.Fatalf("a holds %v", a.Current().Numbers())
	}
}
