package server

// Unit tests of the tracker's invalidation decisions (DESIGN invariant 5)
// on a manual clock, with fake sessions: no raft, no server.

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/chubby-dev/chubby/session"
	"github.com/chubby-dev/chubby/testing/wait"
	"github.com/chubby-dev/chubby/wire"
)

// fakeCachers stands in for the lease table: each session with a lease has
// a deadline; invalidations are recorded and acknowledged by the test.
type fakeCachers struct {
	mu        sync.Mutex
	deadlines map[uint64]time.Time
	sent      map[uint64][][]string
	acks      map[uint64][]chan struct{}
	waits     []ackWait // returned by unflushed
}

func newFakeCachers() *fakeCachers {
	return &fakeCachers{deadlines: map[uint64]time.Time{}, sent: map[uint64][][]string{}, acks: map[uint64][]chan struct{}{}}
}

func (f *fakeCachers) invalidate(id uint64, paths []string) (<-chan struct{}, time.Time, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	d, ok := f.deadlines[id]
	if !ok {
		return nil, time.Time{}, false
	}
	ch := make(chan struct{})
	f.sent[id] = append(f.sent[id], paths)
	f.acks[id] = append(f.acks[id], ch)
	return ch, d, true
}

func (f *fakeCachers) unflushed(except uint64) []ackWait {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []ackWait
	for _, w := range f.waits {
		if w.session != except {
			out = append(out, w)
		}
	}
	return out
}

// ack acknowledges every invalidation sent to id so far.
func (f *fakeCachers) ack(id uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, ch := range f.acks[id] {
		close(ch)
	}
	f.acks[id] = nil
}

func (f *fakeCachers) sentTo(id uint64) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.sent[id])
}

type unitTracker struct {
	*tracker
	clk  *session.ManualClock
	fake *fakeCachers
	done chan struct{}
}

func newUnitTracker(t *testing.T) *unitTracker {
	clk := session.NewManualClock(unitStart)
	fake := newFakeCachers()
	done := make(chan struct{})
	tr := newTracker(fake, clk, hclog.NewNullLogger(), newMetrics().invalWait, newMetrics().invalWaiting, done, "n1")
	return &unitTracker{tracker: tr, clk: clk, fake: fake, done: done}
}

// write starts beforeWrite of paths by writer; the result arrives on the
// channel once the write may be proposed.
func (u *unitTracker) write(writer uint64, paths ...string) <-chan writeGo {
	ch := make(chan writeGo, 1)
	go func() {
		release, err := u.beforeWrite(writer, paths)
		ch <- writeGo{release, err}
	}()
	return ch
}

type writeGo struct {
	release func()
	err     error
}

// waitUntil polls cond until it holds (another goroutine makes it so).
func proceeds(t *testing.T, ch <-chan writeGo, what string) func() {
	t.Helper()
	select {
	case w := <-ch:
		if w.err != nil {
			t.Fatalf("%s: %v", what, w.err)
		}
		return w.release
	case <-time.After(10 * time.Second):
		t.Fatalf("%s: the write still waits", what)
		return nil
	}
}

func blocked(t *testing.T, ch <-chan writeGo, what string) {
	t.Helper()
	select {
	case w := <-ch:
		t.Fatalf("%s: the write went ahead (err %v); want it waiting", what, w.err)
	default:
	}
}

const pathA, pathB = "/ls/c/a", "/ls/c/b"

// TestWriteWaitsForEachCacher: a write of a node cached by two sessions
// sends each an invalidation and waits until both acknowledged; meanwhile
// the node is uncachable; afterwards it is cachable again.
func TestWriteWaitsForEachCacher(t *testing.T) {
	u := newUnitTracker(t)
	for _, id := range []uint64{1, 2, 3, 4} {
		u.fake.deadlines[id] = unitStart.Add(unitTTL)
	}
	if !u.admit(1, pathA) || !u.admit(2, pathA) {
		t.Fatal("a node no write touches must be cachable")
	}
	w := u.write(3, pathA)
	wait.For(t, 0, "invalidations to both cachers", func() bool { return u.fake.sentTo(1) == 1 && u.fake.sentTo(2) == 1 })
	blocked(t, w, "no acknowledgement yet")
	if u.admit(4, pathA) {
		t.Fatal("a read of a node being invalidated was admitted as cachable")
	}
	if !u.admit(4, pathB) {
		t.Fatal("another node must stay cachable")
	}
	u.fake.ack(1)
	blocked(t, w, "session 2 has not acknowledged")
	u.fake.ack(2)
	release := proceeds(t, w, "both acknowledged")
	if u.admit(4, pathA) {
		t.Fatal("node cachable before the write was applied (release)")
	}
	release()
	if !u.admit(4, pathA) {
		t.Fatal("node not cachable after the write was applied")
	}
	if n := u.fake.sentTo(3); n != 0 {
		t.Fatalf("the writer was sent %d invalidations of its own write", n)
	}
}

// TestWriteWaitsUntilLeaseDeadline: a cacher that never acknowledges
// holds the write until its lease, as of the write, runs out (its cache
// cannot serve the node after that) and not a moment less.
func TestWriteWaitsUntilLeaseDeadline(t *testing.T) {
	u := newUnitTracker(t)
	u.fake.deadlines[1] = unitStart.Add(5 * time.Second)
	u.admit(1, pathA)
	w := u.write(2, pathA)
	wait.For(t, 0, "the write's wait on the lease deadline", func() bool { return u.clk.Pending() == 1 })
	u.clk.Advance(5*time.Second - time.Millisecond)
	blocked(t, w, "the cacher's lease has not run out")
	u.clk.Advance(time.Millisecond)
	proceeds(t, w, "the cacher's lease ran out")()
}

// TestNonCacherNotWaitedOn: sessions that never cached the node (or that
// only the writer cached) are neither sent an invalidation nor waited for.
func TestNonCacherNotWaitedOn(t *testing.T) {
	u := newUnitTracker(t)
	for _, id := range []uint64{1, 2, 3} {
		u.fake.deadlines[id] = unitStart.Add(unitTTL)
	}
	u.admit(1, pathA)
	u.admit(2, pathB)
	u.admit(3, pathB)
	w := u.write(3, pathA)
	wait.For(t, 0, "the invalidation to session 1", func() bool { return u.fake.sentTo(1) == 1 })
	u.fake.ack(1)
	proceeds(t, w, "the one cacher acknowledged")()
	if u.fake.sentTo(2) != 0 || u.fake.sentTo(3) != 0 {
		t.Fatalf("sessions that did not cache %s were sent invalidations: %v", pathA, u.fake.sent)
	}
	// Nobody caches A now; the writer's own cache of B is not waited for,
	// session 2's is.
	proceeds(t, u.write(1, pathA), "a write of a node nobody caches")()
	w = u.write(3, pathB)
	wait.For(t, 0, "the invalidation to session 2", func() bool { return u.fake.sentTo(2) == 1 })
	blocked(t, w, "session 2 caches B")
	u.fake.ack(2)
	proceeds(t, w, "session 2 acknowledged")()
	if n := u.fake.sentTo(3); n != 0 {
		t.Fatalf("the writer was sent %d invalidations of its own write", n)
	}
}

// TestLaterWriteWaitsForEarlierInvalidation: a second write of a node finds
// no cachers left (the first took them) but must not go ahead before the
// first write's invalidations were acknowledged.
func TestLaterWriteWaitsForEarlierInvalidation(t *testing.T) {
	u := newUnitTracker(t)
	u.fake.deadlines[1] = unitStart.Add(unitTTL)
	u.admit(1, pathA)
	w1 := u.write(2, pathA)
	wait.For(t, 0, "the first write's invalidation", func() bool { return u.fake.sentTo(1) == 1 })
	wait.For(t, 0, "the first write's wait", func() bool { return u.clk.Pending() == 1 })
	w2 := u.write(3, pathA)
	blocked(t, w2, "the first write's cacher has not acknowledged")
	u.fake.ack(1)
	proceeds(t, w1, "first write")()
	proceeds(t, w2, "second write")()
	if n := u.fake.sentTo(1); n != 1 {
		t.Fatalf("session 1 was sent %d invalidations, want 1", n)
	}
}

// TestQueuedWritesWaitInAChain (issue 17, finding 1): each write of a path
// waits only for the write before it, which waited for the one before it,
// so a third write still waits for the first write's cacher; a write that
// names a path twice (a node and its parent, twice) does not wait for
// itself.
func TestQueuedWritesWaitInAChain(t *testing.T) {
	u := newUnitTracker(t)
	u.fake.deadlines[1] = unitStart.Add(unitTTL)
	u.admit(1, pathA)
	w1 := u.write(2, pathA)
	wait.For(t, 0, "the first write's invalidation", func() bool { return u.fake.sentTo(1) == 1 })
	w2 := u.write(3, pathA)
	w3 := u.write(4, pathA, pathB, pathA)
	blocked(t, w2, "the first write's cacher has not acknowledged")
	blocked(t, w3, "the first write's cacher has not acknowledged")
	u.fake.ack(1)
	for _, w := range []<-chan writeGo{w1, w2, w3} {
		proceeds(t, w, "a queued write after the acknowledgement")()
	}
	proceeds(t, u.write(5, pathB, pathB), "a write naming its path twice")()
}

// TestWriteWaitsForUnflushedSessions: after a failover, a session that has
// not talked to the new master may cache anything: every write waits for
// it, except the session's own writes.
func TestWriteWaitsForUnflushedSessions(t *testing.T) {
	u := newUnitTracker(t)
	flushed := make(chan struct{})
	u.fake.waits = []ackWait{{session: 1, done: flushed, deadline: unitStart.Add(unitTTL)}}
	proceeds(t, u.write(1, pathA), "the unflushed session's own write")()
	w := u.write(2, pathB)
	wait.For(t, 0, "the write's wait", func() bool { return u.clk.Pending() == 1 })
	blocked(t, w, "session 1 has not talked to this master")
	close(flushed)
	proceeds(t, w, "session 1 flushed")()
}

// TestShutdownRefusesWaitingWrite: a write still waiting when the server
// shuts down is refused with not_master (the client retries elsewhere).
func TestShutdownRefusesWaitingWrite(t *testing.T) {
	u := newUnitTracker(t)
	u.fake.deadlines[1] = unitStart.Add(unitTTL)
	u.admit(1, pathA)
	w := u.write(2, pathA)
	wait.For(t, 0, "the invalidation", func() bool { return u.fake.sentTo(1) == 1 })
	close(u.done)
	select {
	case r := <-w:
		r.release()
		if !errors.Is(r.err, wire.ErrNotMaster) {
			t.Fatalf("write waiting at shutdown: %v; want ErrNotMaster", r.err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a waiting write did not end at shutdown")
	}
}

// TestInvalidationThroughLeaseTable: the tracker on the real lease table.
// The invalidation answers the cacher's parked KeepAlive at once, and its
// next KeepAlive, acknowledging it, lets the write go ahead.
func TestInvalidationThroughLeaseTable(t *testing.T) {
	clk := session.NewManualClock(unitStart)
	lt := newUnitLeases(t, clk, &fakeStall{})
	done := make(chan struct{})
	tr := newTracker(lt, clk, hclog.NewNullLogger(), newMetrics().invalWait, newMetrics().invalWaiting, done, "n1")
	lt.add(clk.Now(), 1, unitTTL, nil, "")
	lt.add(clk.Now(), 2, unitTTL, nil, "")
	var r replies
	if err := lt.keepAlive(&r, 10, 1, false, 0, false); err != nil {
		t.Fatal(err)
	}
	tr.admit(1, pathA)
	u := &unitTracker{tracker: tr, clk: clk, done: done}
	w := u.write(2, pathA)
	var rep wire.KeepAliveReply
	wait.For(t, 0, "the parked KeepAlive answered with the invalidation", func() bool {
		got := r.all()
		if len(got) == 1 {
			rep = got[0].body.(wire.KeepAliveReply)
		}
		return len(got) == 1
	})
	if len(rep.Invalidations) != 1 || rep.Invalidations[0] != pathA || rep.InvalSeq == 0 {
		t.Fatalf("KeepAlive reply %+v; want the invalidation of %s", rep, pathA)
	}
	blocked(t, w, "not acknowledged")
	if err := lt.keepAlive(&r, 11, 1, false, rep.InvalSeq-1, false); err != nil {
		t.Fatal(err)
	}
	blocked(t, w, "an older sequence acknowledged")
	if err := lt.keepAlive(&r, 12, 1, false, rep.InvalSeq, false); err != nil {
		t.Fatal(err)
	}
	proceeds(t, w, "acknowledged by the next KeepAlive")()
	lt.Demote()
}

// TestACLFileWriteInvalidatesEveryPath: a write of every path (an ACL file
// edit, which may revoke any read) invalidates each cacher of each path
// and waits for them; until it is applied nothing is cachable, so no read
// of the old ACLs is cached past it.
func TestACLFileWriteInvalidatesEveryPath(t *testing.T) {
	u := newUnitTracker(t)
	for _, id := range []uint64{1, 2, 3} {
		u.fake.deadlines[id] = unitStart.Add(unitTTL)
	}
	if !u.admit(1, pathA) || !u.admit(2, pathB) {
		t.Fatal("nodes no write touches must be cachable")
	}
	const aclFile = "/ls/c/acl/team"
	w := u.write(3, aclFile, "/ls/c/acl", everyPath)
	wait.For(t, 0, "invalidations to the cachers of every path", func() bool { return u.fake.sentTo(1) == 1 && u.fake.sentTo(2) == 1 })
	if u.admit(3, "/ls/c/untouched") {
		t.Fatal("a path was cachable during a write of every path")
	}
	u.fake.ack(1)
	blocked(t, w, "the cacher of b has not acknowledged")
	u.fake.ack(2)
	release := proceeds(t, w, "every cacher acknowledged")
	if u.admit(3, pathA) {
		t.Fatal("cachable before the write of every path was applied")
	}
	release()
	if !u.admit(3, pathA) || !u.admit(3, "/ls/c/untouched") {
		t.Fatal("not cachable after the write of every path was applied")
	}
}
