package server_test

// Tests of the master's side of cache coherence (Chubby §2.9 "Caching",
// DESIGN invariant 5): a write first invalidates every session that may
// cache the node — on its KeepAlive reply, returning a parked long poll at
// once — and commits only when each acknowledged (its next KeepAlive) or its
// lease, as the master sees it, has run out; meanwhile the node is
// uncachable. The cachers here are raw wire sessions, so the test decides
// exactly when (or whether) they send KeepAlives: a session that sends none
// is what the master sees of a SIGSTOPped client. The master's clock is a
// ManualClock: leases end when the test moves it.

import (
	"bufio"
	"context"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chubby-dev/chubby/client"
	"github.com/chubby-dev/chubby/testing/cell"
	"github.com/chubby-dev/chubby/testing/wait"
	"github.com/chubby-dev/chubby/wire"
)

// metric reads a counter or gauge without labels from the server's /metrics.
func metric(t *testing.T, c *cell.Cell, name string) float64 {
	t.Helper()
	resp, err := http.Get("http://" + c.HTTPAddr() + "/metrics")
	if err != nil {
		t.Fatalf("GET /metrics: %v", err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatalf("metric %s: %v", name, err)
			}
			return f
		}
	}
	t.Fatalf("metric %s not exported", name)
	return 0
}

const invalidationsSent = "chubby_cache_invalidations_total"

// cacheRead reads path on a raw session asking to cache it, and returns the
// reply.
func cacheRead(t *testing.T, r *cell.RawConn, path string) wire.ContentsReply {
	t.Helper()
	var rep wire.ContentsReply
	rawCall(t, r, wire.MGetContents, wire.NodeArgs{Path: path, Cache: true}, &rep)
	return rep
}

// asyncWrite writes path through cl; the result arrives on the channel.
func asyncWrite(cl *client.Client, path, data string) <-chan error {
	done := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_, err := cl.WriteFile(ctx, path, []byte(data))
		done <- err
	}()
	return done
}

func returned(ch <-chan error) bool { return len(ch) > 0 }

func wantReturned(t *testing.T, ch <-chan error, what string) {
	t.Helper()
	select {
	case err := <-ch:
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	case <-time.After(wait.Timeout):
		t.Fatalf("%s: not returned within %v", what, wait.Timeout)
	}
}

// keepAliveReply waits for the reply to KeepAlive call id.
func keepAliveReply(t *testing.T, r *cell.RawConn, id uint64, what string) wire.KeepAliveReply {
	t.Helper()
	var rep wire.KeepAliveReply
	if err := r.Result(id, &rep); err != nil {
		t.Fatalf("%s: KeepAlive: %v", what, err)
	}
	return rep
}

// TestSilentCacherDelaysWriteByAtMostItsLease is acceptance 2 of the cache
// issue, on the master: a caching session that stops sending KeepAlives (a
// SIGSTOPped client) holds up a write of a node it cached until its lease,
// as the master sees it, ends — not a moment less, not a moment more. Reads
// by other sessions meanwhile are answered (with the committed value) but
// may not be cached.
func TestSilentCacherDelaysWriteByAtMostItsLease(t *testing.T) {
	const ttl = 3 * time.Second
	c := cell.Start(t, cell.WithManualClock(), cell.WithHTTP())
	mc := c.Manual(t)
	w := c.Dial(t, client.Config{})
	f := c.Path("f")
	if _, err := w.WriteFile(ctxT(t), f, []byte("v1")); err != nil {
		t.Fatal(err)
	}
	silent := c.NewRawSession(t, ttl)
	leaseEnd := mc.Now().Add(ttl) // created now; it never renews
	if rep := cacheRead(t, silent, f); !rep.Cacheable || string(rep.Data) != "v1" {
		t.Fatalf("cached read: %q cacheable=%v, want v1, cacheable", rep.Data, rep.Cacheable)
	}

	sent := metric(t, c, invalidationsSent)
	done := asyncWrite(w, f, "v2")
	wait.For(t, 0, "the master to invalidate the silent cacher", func() bool { return metric(t, c, invalidationsSent) > sent })
	wait.Never(t, 100*time.Millisecond, "the write returning while the silent cacher's lease runs", func() bool { return returned(done) })

	other := c.NewRawSession(t, 0)
	if rep := cacheRead(t, other, f); rep.Cacheable || string(rep.Data) != "v1" {
		t.Fatalf("read during the invalidation: %q cacheable=%v, want the committed v1, not cacheable", rep.Data, rep.Cacheable)
	}

	mc.Advance(leaseEnd.Sub(mc.Now()) - time.Millisecond)
	wait.Never(t, 100*time.Millisecond, "the write returning 1 ms before the silent cacher's lease ends", func() bool { return returned(done) })
	mc.Advance(time.Millisecond)
	wantReturned(t, done, "the write at the end of the silent cacher's lease")
	if got := contents(t, w, f); got != "v2" {
		t.Fatalf("after the write: %q", got)
	}
	// The read during the window did not make other a cacher: the next
	// write sends nobody an invalidation.
	sent = metric(t, c, invalidationsSent)
	done = asyncWrite(w, f, "v3")
	wantReturned(t, done, "a write nobody caches")
	if n := metric(t, c, invalidationsSent); n != sent {
		t.Fatalf("%v invalidations sent for a node nobody may cache", n-sent)
	}
}

// TestAcknowledgedInvalidationReleasesWrite: the invalidation answers the
// cacher's parked KeepAlive at once (the long poll returns early), the write
// waits for the acknowledgement — the cacher's next KeepAlive — and commits
// as soon as it comes, with no clock movement. The acknowledged session is no
// longer a cacher.
func TestAcknowledgedInvalidationReleasesWrite(t *testing.T) {
	c := cell.Start(t, cell.WithManualClock(), cell.WithHTTP())
	w := c.Dial(t, client.Config{})
	d, f := c.Path("d"), c.Path("d", "f")
	if _, err := w.Open(ctxT(t), d, client.CreateDir()); err != nil {
		t.Fatal(err)
	}
	if _, err := w.WriteFile(ctxT(t), f, []byte("v1")); err != nil {
		t.Fatal(err)
	}
	cacher := c.NewRawSession(t, 0)
	cacheRead(t, cacher, f)
	poll := parkKeepAlive(t, cacher)
	if _, ok := cacher.Answered(poll, 50*time.Millisecond); ok {
		t.Fatal("the KeepAlive was answered before anything happened")
	}

	done := asyncWrite(w, f, "v2")
	rep := keepAliveReply(t, cacher, poll, "the parked poll after the write began")
	if !slices.Contains(rep.Invalidations, f) || rep.InvalSeq == 0 {
		t.Fatalf("KeepAlive reply %+v, want an invalidation of %s", rep, f)
	}
	wait.Never(t, 100*time.Millisecond, "the write returning before the cacher acknowledged", func() bool { return returned(done) })

	// A KeepAlive that acknowledges less does not release it, and is
	// answered at once again with the invalidation still pending.
	id, _ := cacher.Go(wire.MKeepAlive, wire.KeepAliveArgs{AckInval: rep.InvalSeq - 1})
	if again := keepAliveReply(t, cacher, id, "a KeepAlive without the acknowledgement"); !slices.Contains(again.Invalidations, f) {
		t.Fatalf("reply %+v no longer carries the unacknowledged invalidation", again)
	}
	wait.Never(t, 50*time.Millisecond, "the write returning without the acknowledgement", func() bool { return returned(done) })

	ack, _ := cacher.Go(wire.MKeepAlive, wire.KeepAliveArgs{AckInval: rep.InvalSeq})
	wantReturned(t, done, "the write after the acknowledgement")
	if _, ok := cacher.Answered(ack, 50*time.Millisecond); ok {
		t.Fatal("the acknowledging KeepAlive was answered at once; with nothing to deliver it should be parked")
	}
	sent := metric(t, c, invalidationsSent)
	wantReturned(t, asyncWrite(w, f, "v3"), "a second write")
	if n := metric(t, c, invalidationsSent); n != sent {
		t.Fatalf("%v invalidations for the second write: the session that acknowledged is still counted a cacher", n-sent)
	}
}

// TestEveryCacherInvalidatedAtOnce: with several cachers, every invalidation
// goes out before the master waits for any acknowledgement (the write waits
// for the slowest cacher, not for the sum of their round trips), and the
// write commits only after the last one. A session that read without asking
// to cache is not sent anything, and a cacher that writes the node itself
// is not waited for.
func TestEveryCacherInvalidatedAtOnce(t *testing.T) {
	c := cell.Start(t, cell.WithManualClock(), cell.WithHTTP())
	w := c.Dial(t, client.Config{})
	f := c.Path("f")
	if _, err := w.WriteFile(ctxT(t), f, []byte("v1")); err != nil {
		t.Fatal(err)
	}
	const n = 4
	cachers := make([]*cell.RawConn, n)
	polls := make([]uint64, n)
	for i := range cachers {
		cachers[i] = c.NewRawSession(t, 0)
		cacheRead(t, cachers[i], f)
		polls[i] = parkKeepAlive(t, cachers[i])
	}
	plain := c.NewRawSession(t, 0)
	rawCall(t, plain, wire.MGetContents, wire.NodeArgs{Path: f}, nil)
	plainPoll := parkKeepAlive(t, plain)

	done := asyncWrite(w, f, "v2")
	seqs := make([]uint64, n)
	for i, r := range cachers {
		rep := keepAliveReply(t, r, polls[i], "a cacher's parked poll")
		if !slices.Contains(rep.Invalidations, f) {
			t.Fatalf("cacher %d: reply %+v without the invalidation", i, rep)
		}
		seqs[i] = rep.InvalSeq
	}
	for i, r := range cachers {
		if returned(done) {
			t.Fatalf("the write returned with %d of %d cachers unacknowledged", n-i, n)
		}
		r.Go(wire.MKeepAlive, wire.KeepAliveArgs{AckInval: seqs[i]})
		if i < n-1 {
			wait.Never(t, 30*time.Millisecond, "the write returning before every cacher acknowledged", func() bool { return returned(done) })
		}
	}
	wantReturned(t, done, "the write after every acknowledgement")
	if _, ok := plain.Answered(plainPoll, 50*time.Millisecond); ok {
		t.Fatal("a session that did not cache the node was sent something")
	}

	// A cacher writing the node itself does not wait for its own KeepAlive.
	self := cachers[0]
	cacheRead(t, self, f)
	if err := self.Call(wire.MSetContents, wire.SetContentsArgs{Path: f, Data: []byte("mine")}, nil); err != nil {
		t.Fatalf("the cacher's own write: %v", err)
	}
}

// TestUncachableWhileInvalidating: reads admitted while an invalidation of
// the node is outstanding are marked not cacheable, for Open (stat and
// absence) and ReadDir as for GetContents; once the write committed, the
// node is cacheable again.
func TestUncachableWhileInvalidating(t *testing.T) {
	c := cell.Start(t, cell.WithManualClock(), cell.WithHTTP())
	w := c.Dial(t, client.Config{})
	d, f := c.Path("d"), c.Path("d", "f")
	if _, err := w.Open(ctxT(t), d, client.CreateDir()); err != nil {
		t.Fatal(err)
	}
	cacher := c.NewRawSession(t, 0)
	var lst wire.ReadDirReply
	rawCall(t, cacher, wire.MReadDir, wire.NodeArgs{Path: d, Cache: true}, &lst)
	var abs wire.StatReply
	rawCall(t, cacher, wire.MOpen, wire.OpenArgs{Path: f, Cache: true}, &abs)
	if !lst.Cacheable || !abs.Cacheable || !abs.Absent {
		t.Fatalf("listing %+v, absence %+v: want both cacheable, the file absent", lst, abs)
	}
	poll := parkKeepAlive(t, cacher)
	done := asyncWrite(w, f, "new") // creates f: invalidates f and its directory
	rep := keepAliveReply(t, cacher, poll, "the cacher's poll")
	if !slices.Contains(rep.Invalidations, f) || !slices.Contains(rep.Invalidations, d) {
		t.Fatalf("invalidations %v, want %s and %s", rep.Invalidations, f, d)
	}
	reader := c.NewRawSession(t, 0)
	lst, abs = wire.ReadDirReply{}, wire.StatReply{} // omitted fields keep what they held
	rawCall(t, reader, wire.MReadDir, wire.NodeArgs{Path: d, Cache: true}, &lst)
	rawCall(t, reader, wire.MOpen, wire.OpenArgs{Path: f, Cache: true}, &abs)
	var st wire.StatReply
	rawCall(t, reader, wire.MGetStat, wire.NodeArgs{Path: d, Cache: true}, &st)
	if lst.Cacheable || abs.Cacheable || st.Cacheable {
		t.Fatalf("during the invalidation: listing cacheable=%v, open cacheable=%v, stat cacheable=%v; want none", lst.Cacheable, abs.Cacheable, st.Cacheable)
	}
	cacher.Go(wire.MKeepAlive, wire.KeepAliveArgs{AckInval: rep.InvalSeq})
	wantReturned(t, done, "the create")
	lst = wire.ReadDirReply{}
	rawCall(t, reader, wire.MReadDir, wire.NodeArgs{Path: d, Cache: true}, &lst)
	if !lst.Cacheable || !slices.Equal(lst.Children, []string{"f"}) {
		t.Fatalf("after the create: %+v, want cacheable [f]", lst)
	}
}

// TestFailoverWaitsForSilentSessions: a new master knows nothing of what the
// sessions cached under the old one, and a client that has not heard of the
// failover may still answer from its cache. So until a session carried over
// has sent the new master a KeepAlive (its client flushed its cache when it
// saw the new epoch) or its lease — a full TTL from the takeover, the most
// the old master can have granted — has run out, writes wait for it
// (Chubby §2.9: the new master waits for every session to acknowledge the
// fail-over or expire).
func TestFailoverWaitsForSilentSessions(t *testing.T) {
	const ttl = 3 * time.Second
	c := cell.Start(t, cell.WithManualClock())
	mc := c.Manual(t)
	w := c.Dial(t, client.Config{})
	f := c.Path("f")
	if _, err := w.WriteFile(ctxT(t), f, []byte("v1")); err != nil {
		t.Fatal(err)
	}
	silent := c.NewRawSession(t, ttl)
	cacheRead(t, silent, f)
	talker := c.NewRawSession(t, ttl)
	cacheRead(t, talker, f)

	c.Restart(t)
	takeover := mc.Now() // the new master granted every session until takeover+ttl
	// The talker learns the new epoch and sends a KeepAlive: flushed.
	talker2 := c.DialRaw(t)
	if _, err := talker2.Hello(); err != nil {
		t.Fatal(err)
	}
	talker2.Session, talker2.Secret = talker.Session, talker.Secret
	parkKeepAlive(t, talker2)
	if got := contents(t, w, f); got != "v1" { // the writer is connected to the new master
		t.Fatalf("read on the new master: %q", got)
	}

	done := asyncWrite(w, f, "v2")
	wait.Never(t, 100*time.Millisecond, "a write on the new master returning while a session from the old one is silent", func() bool { return returned(done) })
	mc.Advance(ttl / 2)
	parkKeepAlive(t, talker2) // the talker keeps renewing; the silent session does not
	mc.Advance(takeover.Add(ttl).Sub(mc.Now()) - time.Millisecond)
	wait.Never(t, 100*time.Millisecond, "the write returning 1 ms before the silent session's lease ends", func() bool { return returned(done) })
	mc.Advance(time.Millisecond)
	wantReturned(t, done, "the write once the silent session's lease ended")

	// Once every session has talked to the master (or gone), writes are
	// prompt again.
	wait.For(t, 0, "the silent session to expire", func() bool { return c.Status().Sessions == 2 })
	wantReturned(t, asyncWrite(w, f, "v3"), "a write after the failover settled")
}

// TestConcurrentWritesWaitForOutstandingInvalidations: a second write of a
// node whose invalidation (for a first write) is still unacknowledged must
// wait for that acknowledgement too. The first write took the cachers; the
// second finds none left to invalidate — but if it committed at once, a
// cacher that has not yet dropped the old value would keep serving it after
// the second write returned (found by the porcupine coherence check).
func TestConcurrentWritesWaitForOutstandingInvalidations(t *testing.T) {
	c := cell.Start(t, cell.WithManualClock(), cell.WithHTTP())
	w1 := c.Dial(t, client.Config{})
	w2 := c.Dial(t, client.Config{})
	f := c.Path("f")
	if _, err := w1.WriteFile(ctxT(t), f, []byte("v0")); err != nil {
		t.Fatal(err)
	}
	cacher := c.NewRawSession(t, 0)
	cacheRead(t, cacher, f)
	poll := parkKeepAlive(t, cacher)

	first := asyncWrite(w1, f, "v1")
	rep := keepAliveReply(t, cacher, poll, "the cacher's poll")
	if !slices.Contains(rep.Invalidations, f) {
		t.Fatalf("reply %+v without the invalidation", rep)
	}
	second := asyncWrite(w2, f, "v2")
	wait.Never(t, 150*time.Millisecond, "a second write of the node returning while the cacher has not acknowledged the first's invalidation",
		func() bool { return returned(second) || returned(first) })
	cacher.Go(wire.MKeepAlive, wire.KeepAliveArgs{AckInval: rep.InvalSeq})
	wantReturned(t, first, "the first write")
	wantReturned(t, second, "the second write")
}

// TestFailoverDoesNotWaitForNoCacheSessions: a session created NoCache
// (its client has no cache) is never made a cacher — its reads are not
// cacheable, events bring it no contents — so a new master has nothing to
// wait for it to flush: writes go on at once, while it is silent, where a
// caching session's silence holds them for a TTL
// (TestFailoverWaitsForSilentSessions). Its lease is carried over as any
// other's.
func TestFailoverDoesNotWaitForNoCacheSessions(t *testing.T) {
	const ttl = 3 * time.Second
	c := cell.Start(t, cell.WithManualClock())
	w := c.Dial(t, client.Config{})
	f := c.Path("f")
	if _, err := w.WriteFile(ctxT(t), f, []byte("v1")); err != nil {
		t.Fatal(err)
	}
	silent := c.DialRaw(t)
	if _, err := silent.Hello(); err != nil {
		t.Fatal(err)
	}
	var created wire.CreateSessionReply
	rawCall(t, silent, wire.MCreateSession, wire.CreateSessionArgs{TTL: int64(ttl), NoCache: true}, &created)
	silent.Session, silent.Secret = created.Session, created.Secret
	if rep := cacheRead(t, silent, f); rep.Cacheable || string(rep.Data) != "v1" {
		t.Fatalf("a NoCache session's read: %+v; want v1, not cacheable", rep)
	}
	// Not a cacher: a write does not wait for it on this master either.
	wantReturned(t, asyncWrite(w, f, "v2"), "a write while a NoCache session read the file")

	c.Restart(t)
	if got := contents(t, w, f); got != "v2" { // the writer is connected to the new master
		t.Fatalf("read on the new master: %q", got)
	}
	wantReturned(t, asyncWrite(w, f, "v3"), "a write on the new master while a NoCache session is silent")
	if got := c.Status().Sessions; got != 2 {
		t.Fatalf("the new master has %d sessions, want 2 (the NoCache session carried over)", got)
	}
}
