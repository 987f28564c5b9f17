package server_test

// Paper-mapped tests of the master's lease table (Chubby §2.8 "Sessions and
// KeepAlives", §2.9 "Fail-overs", §4.1 on KeepAlive load) on a real
// one-server cell, with the lease clock driven by the test.

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/chubby-dev/chubby/client"
	"github.com/chubby-dev/chubby/fs"
	"github.com/chubby-dev/chubby/testing/cell"
	"github.com/chubby-dev/chubby/testing/wait"
	"github.com/chubby-dev/chubby/wire"
)

// parkKeepAlive sends a KeepAlive and returns once the master has parked it:
// KeepAlive is served on the connection's reader goroutine, so the reply to
// a Hello sent after it proves it was handled.
func parkKeepAlive(t *testing.T, r *cell.RawConn) uint64 {
	t.Helper()
	id, err := r.Go(wire.MKeepAlive, wire.KeepAliveArgs{})
	if err != nil {
		t.Fatal(err)
	}
	epoch := r.Epoch
	if _, err := r.Hello(); err != nil {
		t.Fatal(err)
	}
	r.Epoch = epoch
	return id
}

// TestKeepAliveCostsNoRaftWrite: §2.8/§4.1 — KeepAlives are the bulk of a
// Chubby master's traffic, so renewing a lease must not touch the replicated
// log (DESIGN hazard etcd #11886). Many sessions renew for many rounds —
// far longer than their TTL, so they would have expired without the
// renewals — and the applied raft index does not move.
func TestKeepAliveCostsNoRaftWrite(t *testing.T) {
	c := cell.Start(t, cell.WithManualClock())
	mc := c.Manual(t)
	const ttl = 12 * time.Second
	// Every hold is at most a third of the TTL plus 20 %; one step answers
	// every parked KeepAlive and is well inside the TTL.
	step := ttl/3 + ttl/15 + time.Millisecond

	const nRaw, rounds = 16, 25
	raws := make([]*cell.RawConn, nRaw)
	ids := make([]uint64, nRaw)
	for i := range raws {
		raws[i] = c.NewRawSession(t, ttl)
		ids[i] = parkKeepAlive(t, raws[i])
	}
	// A library client renews by itself, through a proxy that counts.
	p := c.NewProxy(t)
	cl := c.Dial(t, client.Config{Servers: []string{p.Addr()}, FixedServers: true, SessionTTL: ttl})
	wait.For(t, 0, "the client's first KeepAlive", func() bool { return p.Count(wire.MKeepAlive) >= 1 })
	barrier(t, c)
	before := c.Status()

	for round := range rounds {
		waitParked(t, c, nRaw+1, fmt.Sprintf("round %d", round))
		mc.Advance(step)
		for i, r := range raws {
			var rep wire.KeepAliveReply
			if err := r.Result(ids[i], &rep); err != nil {
				t.Fatalf("round %d, session %d: KeepAlive: %v", round, r.Session, err)
			}
			if rep.TTL != int64(ttl) {
				t.Fatalf("KeepAlive granted %v, want %v", time.Duration(rep.TTL), ttl)
			}
			ids[i] = parkKeepAlive(t, r)
		}
	}
	barrier(t, c)
	after := c.Status()
	if elapsed := time.Duration(rounds) * step; elapsed < 5*ttl {
		t.Fatalf("test bug: only %v of lease time passed", elapsed)
	}
	if after.Applied != before.Applied {
		t.Fatalf("%d KeepAlive rounds of %d sessions moved the applied index %d → %d; KeepAlive must not write to raft",
			rounds, nRaw+1, before.Applied, after.Applied)
	}
	if after.Sessions != before.Sessions || after.Sessions != nRaw+1 {
		t.Fatalf("sessions %d → %d, want all %d alive", before.Sessions, after.Sessions, nRaw+1)
	}
	if n := p.Count(wire.MKeepAlive); n < rounds {
		t.Fatalf("the client sent %d KeepAlives in %d rounds", n, rounds)
	}
	if st := cl.State(); st != client.SessionSafe {
		t.Fatalf("client state %v, want safe", st)
	}
	// And the renewed sessions still work.
	for _, r := range raws {
		rawCall(t, r, wire.MGetStat, wire.NodeArgs{Path: c.Root()}, nil)
	}
}

// TestMasterStallDoesNotMassExpire: DESIGN hazard etcd #15247 / #12528 — a
// master stalled (GC, SIGSTOP, slow fsync) sees every lease timer fire late
// when it resumes, and must not take its own pause for the clients'
// silence: every session is given a fresh lease instead of being expired
// (cf. Chubby §2.9, where a new master likewise extends every lease before
// expiring anyone). The protection is one fresh TTL, not immortality: a
// session that then stays silent expires a TTL later.
func TestMasterStallDoesNotMassExpire(t *testing.T) {
	clk := cell.NewStallClock(cell.Epoch)
	c := cell.Start(t, cell.WithClock(clk))
	const ttl = 12 * time.Second

	// Silent raw sessions, each holding a lock: their KeepAlive would be
	// "in flight" when the master stalled. No parked poll renews them.
	const n = 8
	raws := make([]*cell.RawConn, n)
	seqs := make([]fs.Sequencer, n)
	for i := range raws {
		raws[i] = c.NewRawSession(t, ttl)
		p := c.Path(fmt.Sprintf("lock%d", i))
		rawCall(t, raws[i], wire.MOpen, wire.OpenArgs{Path: p, Create: true}, nil)
		seqs[i] = rawAcquire(t, raws[i], p, time.Second)
	}
	// A library client with a parked KeepAlive, through a counting proxy.
	p := c.NewProxy(t)
	cl := c.Dial(t, client.Config{Servers: []string{p.Addr()}, FixedServers: true, SessionTTL: ttl})
	wait.For(t, 0, "the client's first KeepAlive", func() bool { return p.Count(wire.MKeepAlive) >= 1 })
	h := open(t, cl, c.Path("client-lock"), client.Create())
	if err := h.TryAcquire(ctxT(t), client.Exclusive); err != nil {
		t.Fatal(err)
	}
	barrier(t, c)
	before := c.Status()

	// The master is paused for ten minutes: fifty TTLs.
	kas := p.Count(wire.MKeepAlive)
	clk.Stall(10 * time.Minute)
	// The lease table decides synchronously, in the timer callbacks run by
	// Stall; a session being expired is refused at once.
	for _, r := range raws {
		if err := r.Call(wire.MGetStat, wire.NodeArgs{Path: c.Root()}, nil); err != nil {
			t.Fatalf("after a master stall, session %d: %v; a stalled master must not expire sessions for its own pause", r.Session, err)
		}
	}
	barrier(t, c)
	after := c.Status()
	if after.Sessions != before.Sessions {
		t.Fatalf("after a master stall %d of %d sessions were expired; a stalled master must not mass-expire",
			before.Sessions-after.Sessions, before.Sessions)
	}
	if after.Applied != before.Applied {
		t.Fatalf("the stall caused raft writes (applied %d → %d): something was expired", before.Applied, after.Applied)
	}
	for i, r := range raws {
		if !checkSeq(t, cl, seqs[i]) {
			t.Fatalf("session %d lost its lock %s in the stall", r.Session, seqs[i])
		}
	}
	if !checkSeq(t, cl, sequencer(t, h)) {
		t.Fatal("the client lost its lock in the stall")
	}
	// Its parked KeepAlive was answered (late) and it parked the next one.
	wait.For(t, 0, "the client's KeepAlive after the stall", func() bool { return p.Count(wire.MKeepAlive) > kas })
	waitParked(t, c, 1, "after the stall")

	// One fresh TTL: a millisecond before it ends everyone is alive; at its
	// end the still-silent raw sessions expire (punctual timers now), while
	// the client, which kept renewing, stays.
	kas = p.Count(wire.MKeepAlive)
	clk.Advance(ttl - time.Millisecond)
	// The client's parked KeepAlive was answered within that advance; its
	// next one (the client runs on real time) must reach the master before
	// the last millisecond of the TTL passes, or the client expires too.
	wait.For(t, 0, "the client's KeepAlive within the fresh TTL", func() bool { return p.Count(wire.MKeepAlive) > kas })
	waitParked(t, c, 1, "within the fresh TTL")
	barrier(t, c)
	if got := c.Status().Sessions; got != before.Sessions {
		t.Fatalf("%d sessions expired before the fresh TTL ended", before.Sessions-got)
	}
	clk.Advance(time.Millisecond)
	wait.For(t, 0, "the silent sessions to expire one TTL after the stall", func() bool {
		return c.Status().Sessions == before.Sessions-n
	})
	for i := range raws {
		if checkSeq(t, cl, seqs[i]) {
			t.Fatalf("expired session still holds %s", seqs[i])
		}
	}
	if !checkSeq(t, cl, sequencer(t, h)) {
		t.Fatal("the renewing client lost its lock")
	}
}

// TestRestartKeepsStateLocksAndSessions: §2.9 "Fail-overs" and DESIGN
// invariants 3 and 7 — everything acknowledged is in the fsynced raft log, so
// a restarted server (a new master, new epoch) has the files, the locks and
// the sessions; the new master gives each session a fresh lease, and a
// client that keeps renewing rides through: it sees a master-failover event,
// keeps its session id, and still holds its lock.
func TestRestartKeepsStateLocksAndSessions(t *testing.T) {
	c := cell.Start(t, cell.WithManualClock())
	mc := c.Manual(t)
	// The client's own lease runs on the real clock; the TTL leaves ample
	// room for the restart (about a second).
	const ttl = 30 * time.Second
	step := ttl/3 + ttl/15 + time.Millisecond

	p := c.NewProxy(t)
	cl := c.Dial(t, client.Config{Servers: []string{p.Addr()}, FixedServers: true, SessionTTL: ttl})
	files := map[string]string{c.Path("a"): "alpha", c.Path("dir/b"): "beta"}
	if _, err := cl.Open(ctxT(t), c.Path("dir"), client.CreateDir()); err != nil {
		t.Fatal(err)
	}
	for path, v := range files {
		if _, err := cl.WriteFile(ctxT(t), path, []byte(v)); err != nil {
			t.Fatal(err)
		}
	}
	eph := c.Path("eph")
	open(t, cl, eph, client.Ephemeral())
	h := open(t, cl, c.Path("lock"), client.Create())
	if err := h.TryAcquire(ctxT(t), client.Exclusive); err != nil {
		t.Fatal(err)
	}
	seq := sequencer(t, h)
	lost := h.LockLost()
	info := cl.Session()
	// A waiter blocked in Acquire across the restart: its call is retried
	// with the same wait id on the new master, which recognises the queued
	// wait instead of queueing it twice.
	w := c.Dial(t, client.Config{SessionTTL: ttl})
	hw := open(t, w, c.Path("lock"))
	gotW := queue(t, c, hw, context.Background())

	c.Restart(t)

	// The clients find the new master and re-handshake. (They back off on
	// the real clock; the lease clock must not move before they are back.)
	waitEvent(t, cl, client.EventMasterFailover)
	waitEvent(t, w, client.EventMasterFailover)
	after := cl.Session()
	if after.ID != info.ID || after.Epoch <= info.Epoch {
		t.Fatalf("after restart: session %d epoch %d; want session %d and an epoch above %d", after.ID, after.Epoch, info.ID, info.Epoch)
	}
	if st := c.Status(); st.Sessions != 2 {
		t.Fatalf("restarted master has %d sessions, want the holder's and the waiter's", st.Sessions)
	}

	// Another client sees the data, the lock and the ephemeral file. (Its
	// TTL, like cl's, outlasts a clock step even if its next KeepAlive is
	// parked a little late.)
	other := c.Dial(t, client.Config{SessionTTL: ttl})
	for path, v := range files {
		if got := contents(t, other, path); got != v {
			t.Fatalf("%s = %q after restart, want %q", path, got, v)
		}
	}
	if !checkSeq(t, other, seq) {
		t.Fatalf("the lock %s is not held after the restart", seq)
	}
	open(t, other, eph)

	// The session keeps renewing with the new master for well over a TTL.
	for round := 0; time.Duration(round)*step < 2*ttl; round++ {
		waitParked(t, c, 3, fmt.Sprintf("round %d", round))
		n := p.Count(wire.MKeepAlive)
		mc.Advance(step)
		wait.For(t, 0, fmt.Sprintf("round %d: the client's next KeepAlive", round), func() bool {
			return p.Count(wire.MKeepAlive) > n
		})
	}
	barrier(t, c)
	if st := c.Status(); st.Sessions != 3 {
		t.Fatalf("%d sessions after renewing past the TTL, want 3", st.Sessions)
	}
	select {
	case err := <-gotW:
		t.Fatalf("the waiter's Acquire returned %v while the lock is still held", err)
	default:
	}
	select {
	case <-lost:
		t.Fatal("LockLost closed: the client was in jeopardy during a quick restart")
	default:
	}
	if !checkSeq(t, other, seq) {
		t.Fatalf("the lock %s was lost while renewing with the new master", seq)
	}
	// Releasing by generation proves the master still counts this session
	// as the holder; the lock goes to the waiter queued before the restart.
	if err := h.Release(ctxT(t)); err != nil {
		t.Fatalf("release after restart: %v", err)
	}
	granted(t, gotW, "the waiter queued before the restart (its Acquire must ride through the restart)")
	if seqW := sequencer(t, hw); !seqW.Newer(seq) || !checkSeq(t, other, seqW) {
		t.Fatalf("waiter's sequencer %s: want valid and newer than %s", seqW, seq)
	}
}

func waitEvent(t *testing.T, cl *client.Client, want client.EventType) client.Event {
	t.Helper()
	timeout := time.After(wait.Timeout)
	for {
		select {
		case e := <-cl.Events():
			if e.Type == want {
				return e
			}
		case <-timeout:
			t.Fatalf("no %s event within %v", want, wait.Timeout)
		}
	}
}
