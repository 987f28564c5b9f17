package server_test

// Paper-mapped tests of sessions, locks and sequencers on a real one-server
// cell (raft + bbolt, TCP). Section numbers are those of Burrows, "The Chubby
// lock service for loosely-coupled distributed systems", OSDI 2006. Lease and
// lock-delay deadlines are moved with the cell's ManualClock; real-time waits
// only cover raft applies and TCP hops.

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/chubby-dev/chubby/client"
	"github.com/chubby-dev/chubby/fs"
	"github.com/chubby-dev/chubby/testing/cell"
	"github.com/chubby-dev/chubby/testing/wait"
	"github.com/chubby-dev/chubby/wire"
)

// TestExpiredSessionLosesLocksAfterTTLAndLockDelay follows a holder that
// stops sending KeepAlives:
//
//   - §2.8 "Sessions and KeepAlives": the master ends the session only when
//     its own view of the lease runs out — not a moment before;
//   - §2.3/§2.8: the session's ephemeral file is deleted and its lock freed;
//   - §2.4 "Sequencers" (lock-delay): because the holder failed rather than
//     released, nobody gets the lock for the lock-delay the holder chose; a
//     waiter queued all along is granted exactly at TTL + lock-delay;
//   - §2.4: the old holder's sequencer is then invalid and the new holder's
//     compares greater.
func TestExpiredSessionLosesLocksAfterTTLAndLockDelay(t *testing.T) {
	c := cell.Start(t, cell.WithManualClock())
	mc := c.Manual(t)
	ctx := context.Background()
	const ttl, delay = 12 * time.Second, 15 * time.Second
	lock, eph := c.Path("lock"), c.Path("eph")

	// The waiter and the observer ask for 60 s sessions, so that nothing this
	// test does to the clock threatens them.
	w := c.Dial(t, client.Config{SessionTTL: 60 * time.Second})
	obs := c.Dial(t, client.Config{SessionTTL: 60 * time.Second})

	// 1. The doomed holder: a raw session that never sends a KeepAlive, so
	//    its lease is exactly [start, start+ttl) on the master's clock.
	start := mc.Now()
	v := c.NewRawSession(t, ttl)
	rawCall(t, v, wire.MOpen, wire.OpenArgs{Path: lock, Create: true}, nil)
	rawCall(t, v, wire.MOpen, wire.OpenArgs{Path: eph, Create: true, Ephemeral: true}, nil)
	seqV := rawAcquire(t, v, lock, delay)

	// 2. Another session queues for the lock.
	hw := open(t, w, lock)
	got := queue(t, c, hw, ctx)
	hObs := open(t, obs, lock)

	// 3. A millisecond before the lease ends nothing has happened.
	mc.Advance(ttl - time.Millisecond)
	barrier(t, c)
	if !checkSeq(t, obs, seqV) {
		t.Fatalf("at +%v (lease %v) the holder's sequencer is already invalid", mc.Now().Sub(start), ttl)
	}
	if st := c.Status(); st.Sessions != 3 {
		t.Fatalf("at +%v: %d sessions, want 3 (holder still alive)", mc.Now().Sub(start), st.Sessions)
	}
	open(t, obs, eph)
	notGranted(t, got, "before the holder's lease ended")

	// 4. The lease ends: the master expires the session.
	mc.Advance(time.Millisecond)
	wait.For(t, 0, "the master to expire the silent session", func() bool { return c.Status().Sessions == 2 })
	barrier(t, c) // the lock-delay timer is armed
	if checkSeq(t, obs, seqV) {
		t.Fatal("the expired holder's sequencer is still valid")
	}
	if _, err := obs.Open(ctxT(t), eph); !errors.Is(err, client.ErrNoSuchNode) {
		t.Fatalf("ephemeral file of the expired session: Open = %v, want ErrNoSuchNode", err)
	}
	if err := v.Call(wire.MGetStat, wire.NodeArgs{Path: lock}, nil); !errors.Is(err, fs.ErrSessionExpired) {
		t.Fatalf("call on the expired session: %v, want session_expired", err)
	}
	wantErr(t, hObs.TryAcquire(ctxT(t), client.Exclusive), client.ErrLockDelay, "TryAcquire right after the expiry")
	notGranted(t, got, "right after the expiry (lock-delay running)")

	// 5. The lock-delay runs from the expiry; a millisecond before its end
	//    the lock is still out of reach.
	mc.Advance(delay - time.Millisecond)
	barrier(t, c)
	wantErr(t, hObs.TryAcquire(ctxT(t), client.Exclusive), client.ErrLockDelay, "TryAcquire just before the lock-delay ends")
	notGranted(t, got, "just before the lock-delay ended")

	// 6. The lock-delay ends: the queued waiter, and only it, gets the lock.
	mc.Advance(time.Millisecond)
	granted(t, got, "at TTL + lock-delay")
	if d := mc.Now().Sub(start); d != ttl+delay {
		t.Fatalf("granted at +%v, want +%v", d, ttl+delay)
	}
	seqW := sequencer(t, hw)
	if !seqW.Newer(seqV) {
		t.Fatalf("new holder's sequencer %s does not compare greater than the old %s", seqW, seqV)
	}
	if !checkSeq(t, obs, seqW) || checkSeq(t, obs, seqV) {
		t.Fatalf("after the hand-off: CheckSequencer(new %s) must be true and (old %s) false", seqW, seqV)
	}
	wantErr(t, hObs.TryAcquire(ctxT(t), client.Exclusive), client.ErrLockHeld, "TryAcquire after the hand-off")
}

// TestDeadHolderLockMovesTTLAfterItsLastKeepAlive (issue 16): a holder that
// renews by parked KeepAlives and then dies — its last KeepAlive parked and
// answered, the answer never read — loses its lock exactly TTL after that
// KeepAlive arrived, and with lock-delay none the waiter is granted in the
// expiry's own apply: the clock does not move again. (Answering a parked
// KeepAlive used to extend the lease once more, so the lock moved up to a
// hold, a third of the TTL, late.)
func TestDeadHolderLockMovesTTLAfterItsLastKeepAlive(t *testing.T) {
	c := cell.Start(t, cell.WithManualClock())
	mc := c.Manual(t)
	const ttl = 12 * time.Second
	lock := c.Path("lock")
	w := c.Dial(t, client.Config{SessionTTL: 60 * time.Second})
	v := c.NewRawSession(t, ttl)
	rawCall(t, v, wire.MOpen, wire.OpenArgs{Path: lock, Create: true}, nil)
	seqV := rawAcquire(t, v, lock, 0) // wire lock-delay 0: none
	got := queue(t, c, open(t, w, lock), context.Background())

	for range 3 { // a few renewals, each answered after its hold
		mc.Advance(time.Second)
		id := parkKeepAlive(t, v)
		mc.Advance(ttl/3 + ttl/15)
		if _, ok := v.Answered(id, wait.Timeout); !ok {
			t.Fatal("a parked KeepAlive was not answered after its hold")
		}
	}
	last := mc.Now()
	id := parkKeepAlive(t, v)
	mc.Advance(ttl/3 + ttl/15)
	if _, ok := v.Answered(id, wait.Timeout); !ok {
		t.Fatal("the last KeepAlive was not answered after its hold")
	}
	// The holder is dead from here on: it sends nothing more.
	mc.Advance(last.Add(ttl - time.Millisecond).Sub(mc.Now()))
	barrier(t, c)
	notGranted(t, got, "a millisecond before TTL after the last KeepAlive")
	if !checkSeq(t, w, seqV) {
		t.Fatal("the holder's sequencer is invalid before its lease ended")
	}
	mc.Advance(time.Millisecond)
	granted(t, got, "TTL after the holder's last KeepAlive")
	if d := mc.Now().Sub(last); d != ttl {
		t.Fatalf("granted %v after the last KeepAlive, want exactly %v", d, ttl)
	}
}

// TestCloseReleasesWithoutLockDelay: §2.4 applies the lock-delay only when a
// holder fails; a client that ends its session (Close, like a Release of
// every lock) frees its locks at once — the waiter is granted without the
// clock moving at all — and its ephemeral files go with it (§2.3).
func TestCloseReleasesWithoutLockDelay(t *testing.T) {
	c := cell.Start(t, cell.WithManualClock())
	mc := c.Manual(t)
	ctx := context.Background()
	lock, eph := c.Path("lock"), c.Path("eph")

	a := c.Dial(t, client.Config{})
	w := c.Dial(t, client.Config{})
	ha := open(t, a, lock, client.Create())
	if err := ha.TryAcquire(ctxT(t), client.Exclusive, client.LockDelay(60*time.Second)); err != nil {
		t.Fatal(err)
	}
	seqA := sequencer(t, ha)
	lost := ha.LockLost()
	open(t, a, eph, client.Ephemeral())

	got := queue(t, c, open(t, w, lock), ctx)
	before := mc.Now()
	if err := a.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	granted(t, got, "after the holder closed its session")
	if !mc.Now().Equal(before) {
		t.Fatal("the clock moved; the test must grant with no time passing")
	}
	select {
	case <-lost:
	default:
		t.Fatal("LockLost of the closing client's lock is still open after Close")
	}
	if checkSeq(t, w, seqA) {
		t.Fatalf("closed session's sequencer %s is still valid", seqA)
	}
	if _, err := w.Open(ctxT(t), eph); !errors.Is(err, client.ErrNoSuchNode) {
		t.Fatalf("ephemeral file of the closed session: Open = %v, want ErrNoSuchNode", err)
	}
	if _, err := ha.GetStat(ctxT(t)); !errors.Is(err, client.ErrClosed) {
		t.Fatalf("call through a closed client: %v, want ErrClosed", err)
	}
}

// TestContendedHandOffIsFIFO: §2.4 — a blocked Acquire waits on the master
// (no polling) and is granted when the holder releases; waiters are served
// in the order they queued, one at a time for an exclusive lock, and each
// grant has a larger lock generation (§2.4 sequencers).
func TestContendedHandOffIsFIFO(t *testing.T) {
	c := cell.Start(t, cell.WithManualClock())
	ctx := context.Background()
	lock := c.Path("lock")

	holder := c.Dial(t, client.Config{})
	hh := open(t, holder, lock, client.Create())
	if err := hh.TryAcquire(ctxT(t), client.Exclusive); err != nil {
		t.Fatal(err)
	}
	prev := sequencer(t, hh)

	const n = 4
	handles := make([]*client.Handle, n)
	results := make([]<-chan error, n)
	for i := range n {
		cl := c.Dial(t, client.Config{})
		handles[i] = open(t, cl, lock)
		results[i] = queue(t, c, handles[i], ctx) // queued in index order
	}

	if err := hh.Release(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		granted(t, results[i], fmt.Sprintf("waiter %d", i))
		barrier(t, c)
		for j := i + 1; j < n; j++ {
			notGranted(t, results[j], fmt.Sprintf("waiter %d while waiter %d holds the lock", j, i))
		}
		seq := sequencer(t, handles[i])
		if !seq.Newer(prev) {
			t.Fatalf("waiter %d got %s, not newer than the previous holder's %s", i, seq, prev)
		}
		if !checkSeq(t, holder, seq) || checkSeq(t, holder, prev) {
			t.Fatalf("waiter %d: CheckSequencer(new %s) must be true, (previous %s) false", i, seq, prev)
		}
		prev = seq
		if err := handles[i].Release(ctxT(t)); err != nil {
			t.Fatalf("waiter %d release: %v", i, err)
		}
	}
}

// TestCancelledAcquireLeavesQueue: a blocked Acquire abandoned by its caller
// (ctx cancelled) leaves the master's queue, so the next waiter gets the lock
// and the canceller does not hold it. If the grant raced the cancel, the
// master hands back what the cancelled wait was granted.
func TestCancelledAcquireLeavesQueue(t *testing.T) {
	c := cell.Start(t, cell.WithManualClock())
	lock := c.Path("lock")

	holder := c.Dial(t, client.Config{})
	hh := open(t, holder, lock, client.Create())
	if err := hh.TryAcquire(ctxT(t), client.Exclusive); err != nil {
		t.Fatal(err)
	}
	a, b := c.Dial(t, client.Config{}), c.Dial(t, client.Config{})
	ha, hb := open(t, a, lock), open(t, b, lock)
	actx, cancel := context.WithCancel(context.Background())
	gotA := queue(t, c, ha, actx)
	gotB := queue(t, c, hb, context.Background())

	cancel()
	select {
	case err := <-gotA:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled Acquire returned %v, want context.Canceled", err)
		}
	case <-time.After(wait.Timeout):
		t.Fatal("cancelled Acquire did not return")
	}
	// Acquire returns after the master applied the cancel.
	if err := hh.Release(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	granted(t, gotB, "the waiter behind the cancelled one")
	if _, err := ha.Sequencer(); !errors.Is(err, client.ErrNotHeld) {
		t.Fatalf("canceller's handle: Sequencer = %v, want ErrNotHeld", err)
	}
	seqB := sequencer(t, hb)
	if !checkSeq(t, a, seqB) {
		t.Fatalf("the second waiter's sequencer %s is not valid", seqB)
	}
	wantErr(t, ha.TryAcquire(ctxT(t), client.Exclusive), client.ErrLockHeld, "canceller's TryAcquire")

	// The grant-races-cancel case, at the wire level: the wait is granted
	// and its cancel arrives afterwards; the master must release the lock.
	if err := hb.Release(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	r1, r2 := c.NewRawSession(t, 0), c.NewRawSession(t, 0)
	seq1 := rawAcquire(t, r1, lock, 0)
	const waitID = 7
	applied := c.Status().Applied
	id, err := r2.Go(wire.MAcquire, wire.AcquireArgs{Path: lock, Mode: fs.Exclusive, Wait: true, WaitID: waitID, LockDelay: 0})
	if err != nil {
		t.Fatal(err)
	}
	c.WaitApplied(t, applied) // queued
	barrier(t, c)
	rawCall(t, r1, wire.MRelease, wire.ReleaseArgs{Path: lock, Gen: seq1.Gen}, nil)
	var rep wire.SeqReply
	if err := r2.Result(id, &rep); err != nil {
		t.Fatalf("raw wait: %v", err)
	}
	if !checkSeq(t, a, rep.Seq) {
		t.Fatalf("raw wait granted %s, but it is not valid", rep.Seq)
	}
	rawCall(t, r2, wire.MCancelAcquire, wire.CancelAcquireArgs{Path: lock, WaitID: waitID}, nil)
	if checkSeq(t, a, rep.Seq) {
		t.Fatalf("a cancel after the grant left the lock held (%s)", rep.Seq)
	}
	if err := ha.TryAcquire(ctxT(t), client.Exclusive); err != nil {
		t.Fatalf("lock not free after the late cancel: %v", err)
	}
}

// TestFencedWrites: §2.4 — a sequencer passed with a request lets the server
// reject it if the lock has since moved on. SetContents carrying the
// current holder's sequencer commits; one carrying a superseded sequencer
// fails with ErrBadSequencer and changes nothing.
func TestFencedWrites(t *testing.T) {
	c := cell.Start(t, cell.WithManualClock())
	lock, data := c.Path("lock"), c.Path("data")
	a, b := c.Dial(t, client.Config{}), c.Dial(t, client.Config{})

	ha := open(t, a, lock, client.Create())
	if err := ha.TryAcquire(ctxT(t), client.Exclusive); err != nil {
		t.Fatal(err)
	}
	seq1 := sequencer(t, ha)
	fa := open(t, a, data, client.Create())
	if _, err := fa.SetContents(ctxT(t), []byte("by holder 1"), client.WithSequencer(seq1)); err != nil {
		t.Fatalf("fenced write with the valid sequencer: %v", err)
	}

	if err := ha.Release(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	hb := open(t, b, lock)
	if err := hb.TryAcquire(ctxT(t), client.Exclusive); err != nil {
		t.Fatal(err)
	}
	seq2 := sequencer(t, hb)
	if !seq2.Newer(seq1) {
		t.Fatalf("second holder's %s is not newer than %s", seq2, seq1)
	}

	before, err := fa.GetStat(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	_, err = fa.SetContents(ctxT(t), []byte("by the superseded holder"), client.WithSequencer(seq1))
	wantErr(t, err, client.ErrBadSequencer, "fenced write with a superseded sequencer")
	_, err = a.WriteFile(ctxT(t), data, []byte("by the superseded holder"), client.WithSequencer(seq1))
	wantErr(t, err, client.ErrBadSequencer, "WriteFile with a superseded sequencer")
	err = fa.Delete(ctxT(t), client.WithSequencer(seq1))
	wantErr(t, err, client.ErrBadSequencer, "fenced delete with a superseded sequencer")
	shared := seq2
	shared.Mode = client.Shared
	_, err = fa.SetContents(ctxT(t), []byte("wrong mode"), client.WithSequencer(shared))
	wantErr(t, err, client.ErrBadSequencer, "fenced write with the right generation in the wrong mode")

	if got := contents(t, b, data); got != "by holder 1" {
		t.Fatalf("contents after rejected writes = %q, want %q", got, "by holder 1")
	}
	after, err := fa.GetStat(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	if after.ContentGen != before.ContentGen {
		t.Fatalf("content generation moved %d → %d on rejected writes", before.ContentGen, after.ContentGen)
	}
	fb := open(t, b, data)
	if _, err := fb.SetContents(ctxT(t), []byte("by holder 2"), client.WithSequencer(seq2)); err != nil {
		t.Fatalf("fenced write with the new holder's sequencer: %v", err)
	}
	if got := contents(t, a, data); got != "by holder 2" {
		t.Fatalf("contents = %q, want %q", got, "by holder 2")
	}
}
