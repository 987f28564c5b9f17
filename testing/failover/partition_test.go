package failover_test

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/chubby-dev/chubby/client"
	"github.com/chubby-dev/chubby/server"
	"github.com/chubby-dev/chubby/testing/cell"
	"github.com/chubby-dev/chubby/testing/wait"
	"github.com/chubby-dev/chubby/wire"
)

// TestIsolatedMasterStopsServing checks DESIGN invariant 6 (one master; an
// old master that was partitioned must not answer from stale state),
// invariant 5 (a write commits only once no client can serve the old value
// from its cache) and issue 3's acceptance 2 for a master cut off from the
// quorum:
//
//  1. a writer and a reader that follow the master run throughout; every
//     acknowledged write and every read is recorded;
//  2. a client pinned to the master (FixedServers) has just read — and
//     cached — the register when the master's raft links are cut; it keeps
//     reading throughout, from its cache while its local lease lasts;
//  3. the majority elects a new master and acknowledges writes, but only
//     once the pinned client can no longer answer from its cache;
//  4. from the moment the majority has acknowledged a write, the isolated
//     old master answers no read and no write: over a raw session it made
//     itself, calls fail (not_master, or not at all) and never return data;
//     the pinned client gets errors, never the old value; a write sent to
//     it never takes effect;
//  5. heal: exactly one master; the old master catches up with the
//     majority's log;
//  6. no split brain: no read in the whole history, whoever answered it,
//     returns a value older than a write acknowledged before the read
//     started, and no two servers ever report IsMaster with one epoch.
func TestIsolatedMasterStopsServing(t *testing.T) {
	c := cell.StartCluster(t, 3)
	old := c.Master(t)
	reg, stray := c.Path("reg"), c.Path("stray")
	hist := &history{}
	masters := watchMasters(c)
	wl := startWorkload(t, c, reg, hist)
	waitAckAfter(t, hist, time.Now())

	// A client pinned to the old master, and a raw session on it. Both
	// have short TTLs: after the failover the new master holds writes until
	// every session carried over from the old master has acknowledged the
	// failover or run out its lease (invariant 5), and these two are stuck
	// with the old master.
	pinned := c.Dial(t, client.Config{Servers: []string{c.Addr(old)}, FixedServers: true,
		SessionTTL: 2 * time.Second, Grace: time.Second})
	ph := open(t, pinned, reg)
	raw := c.NewRawSession(t, old, 2*time.Second)

	// With the writer paused, the pinned client reads (and caches) the
	// register's latest value; then the master is cut off.
	wl.pause()
	if _, err := strconv.Atoi(contents(t, ph)); err != nil {
		t.Fatalf("pinned read before the partition: %v", err)
	}
	rawCall(t, raw, wire.MKeepAlive, wire.KeepAliveArgs{Urgent: true}, nil)
	c.Isolate(old)
	isolatedAt := time.Now()
	wl.resume()
	t.Logf("isolated node%d (master)", old)

	var ackMu sync.Mutex
	var ackAt time.Time // the majority's first acknowledged write
	pinnedDone := make(chan struct{})
	var pinnedWG sync.WaitGroup
	pinnedWG.Add(1)
	pinnedReads, pinnedOK := 0, 0
	go func() { // the pinned client reads throughout
		defer pinnedWG.Done()
		for {
			select {
			case <-pinnedDone:
				return
			default:
			}
			ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
			start := time.Now()
			data, _, err := ph.GetContentsAndStat(ctx)
			cancel()
			recordRead(hist, "pinned@old-master", data, err, start)
			pinnedReads++
			if err == nil {
				pinnedOK++
				ackMu.Lock()
				acked := !ackAt.IsZero() && ackAt.Before(start)
				ackMu.Unlock()
				if acked {
					t.Errorf("client pinned to the isolated old master read %q after the majority acknowledged a write", data)
				}
			}
			time.Sleep(10 * time.Millisecond) // pacing of the reads until pinnedDone
		}
	}()

	newMaster := c.WaitMaster(t, others(c, old))
	t.Logf("node%d is master of the majority after %v", newMaster, time.Since(isolatedAt).Round(time.Millisecond))
	ackVal, at := waitAckAfter(t, hist, isolatedAt)
	ackMu.Lock()
	ackAt = at
	ackMu.Unlock()
	t.Logf("the majority acknowledged write %d %v after the partition", ackVal, at.Sub(isolatedAt).Round(time.Millisecond))

	// The isolated server answers nothing, whether it still believes it is
	// master (its reads wait for a quorum that never answers) or has
	// stepped down (not_master).
	deadline := time.Now().Add(time.Second)
	rawReads := 0
	for time.Now().Before(deadline) {
		start := time.Now()
		id, err := raw.Go(wire.MGetContents, wire.NodeArgs{Path: reg})
		if err != nil {
			t.Fatalf("raw send: %v", err)
		}
		resp, err := raw.Await(id, 2*time.Second)
		if err == nil {
			var rep wire.ContentsReply
			rerr := cell.DecodeResult(resp, &rep)
			recordRead(hist, "raw@old-master", rep.Data, rerr, start)
			if rerr == nil {
				t.Errorf("isolated old master answered a read with %q after the majority acknowledged %d", rep.Data, ackVal)
			} else if !isAny(rerr, wire.ErrNotMaster, wire.ErrWrongEpoch) {
				t.Errorf("isolated old master failed a read with %v, want not_master or wrong_epoch", rerr)
			}
		}
		rawReads++
		time.Sleep(10 * time.Millisecond) // pacing: reads throughout the second the scenario checks
	}
	// Writes through the old master fail and never take effect.
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	_, err := pinned.WriteFile(ctx, stray, []byte("from the isolated master"))
	cancel()
	if err == nil {
		t.Errorf("write through the isolated old master succeeded")
	}
	if err := raw.Call(wire.MSetContents, wire.SetContentsArgs{Path: stray, Data: []byte("raw"), Create: true}, nil); err == nil {
		t.Errorf("raw write on the isolated old master succeeded")
	} else if !isAny(err, wire.ErrNotMaster, wire.ErrWrongEpoch) {
		t.Errorf("raw write on the isolated old master: %v, want not_master", err)
	}
	wait.For(t, 0, "the isolated master to step down", func() bool { return !c.Server(old).IsMaster() })
	close(pinnedDone)
	pinnedWG.Wait()
	t.Logf("the pinned client read %d times (%d answered, all before the majority's write); %d raw reads at the isolated server all failed",
		pinnedReads, pinnedOK, rawReads)

	c.Heal()
	healedAt := time.Now()
	m := c.Master(t)
	t.Logf("healed: node%d is the one master", m)
	waitAckAfter(t, hist, healedAt)
	wl.stop()
	c.WaitCaughtUp(t, m)
	if got, want := c.Applied(old), c.Applied(m); got < want {
		t.Fatalf("old master applied %d, master %d", got, want)
	}

	// A new client reads the last acknowledged write (or a later one whose
	// acknowledgement was lost), and the stray writes never happened.
	last, _ := hist.lastAcked()
	cl := c.Dial(t, client.Config{})
	got, err := strconv.Atoi(contents(t, open(t, cl, reg)))
	if err != nil || got < last {
		t.Fatalf("after heal the register is %d (%v), want at least the last acknowledged %d", got, err, last)
	}
	if _, err := cl.Open(ctxT(t), stray); !errors.Is(err, client.ErrNoSuchNode) {
		t.Fatalf("open %s after heal: %v; a write refused by the isolated master took effect", stray, err)
	}
	reads, writes := hist.check(t)
	masters.check(t)
	t.Logf("history: %d acknowledged writes, %d successful reads, all linearizable", writes, reads)
}

// TestMinorityPartition checks that losing a minority costs nothing (the
// Chubby paper §2.1: a cell serves while a majority of its replicas is up):
// a follower is cut off; the master keeps serving writes and reads (ten
// writes in a row each acknowledged within 2 s, every read linearizable);
// the cut-off follower falls behind, is not master and says so; after heal
// it catches up with the log.
func TestMinorityPartition(t *testing.T) {
	c := cell.StartCluster(t, 3)
	m := c.Master(t)
	epoch := c.Server(m).Epoch()
	f := others(c, m)[0]
	reg := c.Path("reg")
	hist := &history{}
	masters := watchMasters(c)
	wl := startWorkload(t, c, reg, hist)
	waitAckAfter(t, hist, time.Now())

	c.Isolate(f)
	isolatedAt := time.Now()
	t.Logf("isolated node%d (follower; node%d is master)", f, m)
	// Service continues: writes keep being acknowledged, promptly.
	for i := 0; i < 10; i++ {
		before := time.Now()
		_, at := waitAckAfter(t, hist, before)
		if d := at.Sub(before); d > 2*time.Second {
			t.Errorf("a write took %v while only a follower was cut off", d)
		}
	}
	// No failover is needed; one may still happen if the machine stalls the
	// master past an election timeout, so this is noted, not failed.
	if got := c.WaitMaster(t, others(c, f)); got != m || c.Server(m).Epoch() != epoch {
		t.Logf("note: master node%d epoch %d → node%d epoch %d while a follower was cut off", m, epoch, got, c.Server(got).Epoch())
	}
	// The cut-off follower is not master, and tells a client so.
	r := c.DialRaw(t, f)
	hello, err := r.Hello()
	if err != nil || hello.IsMaster {
		t.Fatalf("hello to the cut-off follower: %+v, %v", hello, err)
	}
	if c.Applied(f) >= c.Applied(m) {
		t.Fatalf("the cut-off follower applied %d ≥ master %d: it was not cut off", c.Applied(f), c.Applied(m))
	}
	t.Logf("follower behind by %d entries after %v", c.Applied(m)-c.Applied(f), time.Since(isolatedAt).Round(time.Millisecond))

	c.Heal()
	waitAckAfter(t, hist, time.Now())
	wl.stop()
	if got := c.Master(t); got != m {
		t.Logf("note: master moved to node%d after heal", got)
	}
	c.WaitCaughtUp(t, c.Master(t))
	reads, writes := hist.check(t)
	masters.check(t)
	t.Logf("history: %d acknowledged writes, %d successful reads, all linearizable", writes, reads)
}

// TestUnawareOldMasterServesNoReads checks the quorum check of reads
// (server/verify.go; DESIGN invariant 6, issue 3 "an old master that was
// paused or partitioned must not answer from stale state") where raft's
// leader lease alone would not save it: node0 is given a leader lease far
// longer than the others' election timeout (as if its lease checks ran
// late, like a paused process's), made master, and cut off. The majority
// elects a new master and acknowledges a write while node0 still believes
// it is master; reads and writes sent to node0 then must not be answered
// with data or success — they wait for a quorum that never answers and fail
// when node0 finally steps down.
func TestUnawareOldMasterServesNoReads(t *testing.T) {
	c := cell.StartCluster(t, 3, cell.WithServerConfig(func(i int, cfg *server.Config) {
		if i == 0 {
			cfg.HeartbeatTimeout, cfg.ElectionTimeout, cfg.LeaderLeaseTimeout = 4*time.Second, 4*time.Second, 3900*time.Millisecond
		}
	}))
	// Hand mastership around until node0 has it.
	for tries := 0; c.Master(t) != 0; tries++ {
		if tries == 10 {
			t.Fatal("node0 never became master")
		}
		cur := c.Master(t)
		c.Stop(t, cur)
		c.WaitMaster(t, others(c, cur))
		c.Restart(t, cur)
	}
	reg := c.Path("reg")
	w := c.Dial(t, client.Config{})
	if _, err := w.WriteFile(ctxT(t), reg, []byte("old")); err != nil {
		t.Fatal(err)
	}
	// No session but the raw one may be carried over to the new master:
	// it would hold the majority's write until it acknowledged the failover
	// or its lease ran out (invariant 5). The raw one has the shortest TTL.
	w.Close()
	raw := c.NewRawSession(t, 0, time.Second)
	var cr wire.ContentsReply
	rawCall(t, raw, wire.MGetContents, wire.NodeArgs{Path: reg}, &cr)
	if string(cr.Data) != "old" {
		t.Fatalf("raw read before the partition: %q", cr.Data)
	}
	rawCall(t, raw, wire.MKeepAlive, wire.KeepAliveArgs{Urgent: true}, nil)

	c.Isolate(0)
	isolatedAt := time.Now()
	// Renew the raw session on node0 (which answers KeepAlives from its
	// lease table while it believes it is master) throughout, so that the
	// calls below meet a live session and reach the read path; once the
	// majority has a master, write through a client of the majority.
	nm := -1
	var wrote chan error
	for done := false; !done; {
		if err := raw.Call(wire.MKeepAlive, wire.KeepAliveArgs{Urgent: true}, nil); err != nil {
			t.Fatalf("KeepAlive on node0 while it believes it is master: %v", err)
		}
		if wrote == nil {
			for _, i := range []int{1, 2} {
				if c.Server(i).IsMaster() {
					nm = i
				}
			}
			if nm >= 0 {
				maj := c.Dial(t, client.Config{Servers: []string{c.Addr(1), c.Addr(2)}, FixedServers: true})
				wrote = make(chan error, 1)
				go func() {
					_, err := maj.WriteFile(ctxT(t), reg, []byte("new"))
					wrote <- err
				}()
			}
		}
		select {
		case err := <-wrote:
			if err != nil {
				t.Fatal(err)
			}
			done = true
		case <-time.After(250 * time.Millisecond):
		}
		if time.Since(isolatedAt) > callTimeout {
			t.Fatal("the majority did not acknowledge a write")
		}
	}
	ackAt := time.Now()
	if !c.Server(0).IsMaster() {
		t.Skipf("node0 stepped down %v after the partition, before the majority's write: nothing to check", ackAt.Sub(isolatedAt))
	}
	t.Logf("node%d is master and acknowledged a write %v after the partition; node0 still believes it is master",
		nm, ackAt.Sub(isolatedAt).Round(time.Millisecond))
	if err := raw.Call(wire.MKeepAlive, wire.KeepAliveArgs{Urgent: true}, nil); err != nil {
		t.Fatalf("KeepAlive on node0: %v", err)
	}
	readID, err := raw.Go(wire.MGetContents, wire.NodeArgs{Path: reg})
	if err != nil {
		t.Fatal(err)
	}
	writeID, err := raw.Go(wire.MSetContents, wire.SetContentsArgs{Path: reg, Data: []byte("stray")})
	if err != nil {
		t.Fatal(err)
	}
	for _, call := range []struct {
		what string
		id   uint64
	}{{"read", readID}, {"write", writeID}} {
		resp, err := raw.Await(call.id, 10*time.Second)
		if err != nil {
			t.Fatalf("%s on the unaware old master: no reply within 10 s after it should have stepped down: %v", call.what, err)
		}
		var rep wire.ContentsReply
		if rerr := cell.DecodeResult(resp, &rep); rerr == nil {
			t.Errorf("the unaware old master answered a %s (%q) after the new master acknowledged a write", call.what, rep.Data)
		} else if !isAny(rerr, wire.ErrNotMaster, wire.ErrWrongEpoch) {
			t.Errorf("%s on the unaware old master failed with %v, want not_master", call.what, rerr)
		}
	}
	t.Logf("node0's replies came %v after the partition", time.Since(isolatedAt).Round(time.Millisecond))

	c.Heal()
	m := c.Master(t)
	c.WaitCaughtUp(t, m)
	if got := contents(t, open(t, c.Dial(t, client.Config{}), reg)); got != "new" {
		t.Fatalf("after heal the register is %q, want \"new\"", got)
	}
}
