package failover_test

import (
	"errors"
	"testing"
	"time"

	"github.com/chubby-dev/chubby/client"
	"github.com/chubby-dev/chubby/testing/cell"
	"github.com/chubby-dev/chubby/wire"
)

// openExclusive matches a creating, exclusive Open of path.
func openExclusive(path string) func(*wire.Request) bool {
	return func(r *wire.Request) bool {
		var a wire.OpenArgs
		return r.Method == wire.MOpen && wire.Unmarshal(r.Body, &a) == nil && a.Path == path && a.Create && a.Exclusive
	}
}

// TestExactlyOnceLostReplies checks issue 3's "retries are exactly-once"
// and DESIGN's hazard etcd #22082 (a retried Unlock freed a newer lock): a
// client's call reaches the master and is applied, but the reply is lost and
// the connection reset; the client retries the call, with the same call
// number, on the same master. The retry must get the first result and the
// state must show the call applied once:
//   - Open(Create, FailIfExists) is not turned into exists, and the handle
//     names the one instance created;
//   - SetContents advances the content generation once;
//   - SetContentsIf (CAS) is not turned into a CAS mismatch;
//   - TryAcquire returns the lock generation the lock has (one grant);
//   - Release is not turned into not_held, and the lock is free;
//   - Delete is not turned into no_such_node.
func TestExactlyOnceLostReplies(t *testing.T) {
	c := cell.StartCluster(t, 3)
	ps := c.Proxies(t)
	cl := c.Dial(t, client.Config{Servers: cell.ProxyAddrs(ps), FixedServers: true, LockDelay: client.NoLockDelay})
	other := c.Dial(t, client.Config{LockDelay: client.NoLockDelay})
	m := c.Master(t)
	p := ps[m]
	path := c.Path("once")

	// lose runs call with the reply of its first request matching match
	// lost, and checks that the request reached the master twice (the call
	// and its retry).
	lose := func(what string, mth wire.Method, match func(*wire.Request) bool, call func() error) error {
		t.Helper()
		before := p.Count(mth)
		d := p.DropReply(match, cell.LoseAndReset)
		err := call()
		select {
		case <-d.Done():
		default:
			t.Fatalf("%s: no reply was lost (did the master move? master now node%d)", what, c.Master(t))
		}
		if n := p.Count(mth) - before; n < 2 {
			t.Fatalf("%s: %d requests reached the master, want the call and its retry", what, n)
		}
		return err
	}

	var h *client.Handle
	err := lose("exclusive create", wire.MOpen, openExclusive(path), func() (err error) {
		h, err = cl.Open(ctxT(t), path, client.Create(), client.FailIfExists())
		return err
	})
	if err != nil {
		t.Fatalf("Open(Create, FailIfExists) retried after a lost reply: %v; want the first result (created)", err)
	}
	if st := stat(t, open(t, other, path)); st.Instance != h.Instance() {
		t.Fatalf("handle names instance %d, the node is instance %d", h.Instance(), st.Instance)
	}

	var st client.Stat
	err = lose("write", wire.MSetContents, method(wire.MSetContents, path), func() (err error) {
		st, err = h.SetContents(ctxT(t), []byte("one"))
		return err
	})
	if err != nil {
		t.Fatalf("SetContents retried after a lost reply: %v", err)
	}
	if now := stat(t, h); now.ContentGen != st.ContentGen {
		t.Fatalf("content generation is %d, the write returned %d: applied more than once", now.ContentGen, st.ContentGen)
	}

	var st2 client.Stat
	err = lose("CAS", wire.MSetContents, method(wire.MSetContents, path), func() (err error) {
		st2, err = h.SetContentsIf(ctxT(t), []byte("two"), st.ContentGen)
		return err
	})
	if err != nil {
		t.Fatalf("SetContentsIf retried after a lost reply: %v; want the first result (success), not a mismatch", err)
	}
	if got := contents(t, h); got != "two" || stat(t, h).ContentGen != st2.ContentGen {
		t.Fatalf("after CAS: %q at generation %d, want \"two\" at %d", got, stat(t, h).ContentGen, st2.ContentGen)
	}

	err = lose("TryAcquire", wire.MAcquire, method(wire.MAcquire, path), func() error {
		return h.TryAcquire(ctxT(t), client.Exclusive)
	})
	if err != nil {
		t.Fatalf("TryAcquire retried after a lost reply: %v", err)
	}
	seq, err := h.Sequencer()
	if err != nil {
		t.Fatal(err)
	}
	if lg := stat(t, h).LockGen; lg != seq.Gen || !checkSeq(t, other, seq) {
		t.Fatalf("lock generation %d, sequencer %s: want one grant at the sequencer's generation", lg, seq)
	}

	err = lose("Release", wire.MRelease, method(wire.MRelease, path), func() error {
		return h.Release(ctxT(t))
	})
	if err != nil {
		t.Fatalf("Release retried after a lost reply: %v; want the first result, not not_held", err)
	}
	if checkSeq(t, other, seq) {
		t.Fatalf("sequencer %s still valid after Release", seq)
	}
	oh := open(t, other, path)
	if err := oh.TryAcquire(ctxT(t), client.Exclusive); err != nil {
		t.Fatalf("lock not free after the retried Release: %v", err)
	}
	if oseq, _ := oh.Sequencer(); oseq.Gen <= seq.Gen {
		t.Fatalf("next holder's sequencer %s not greater than %s", oseq, seq)
	}
	if err := oh.Release(ctxT(t)); err != nil {
		t.Fatal(err)
	}

	err = lose("Delete", wire.MDelete, method(wire.MDelete, path), func() error {
		return h.Delete(ctxT(t))
	})
	if err != nil {
		t.Fatalf("Delete retried after a lost reply: %v; want the first result, not no_such_node", err)
	}
	if _, err := other.Open(ctxT(t), path); !errors.Is(err, client.ErrNoSuchNode) {
		t.Fatalf("open after delete: %v, want no_such_node", err)
	}
}

// TestExactlyOnceAcrossFailover is TestExactlyOnceLostReplies across a
// failover (issue 3: "a call retried after a failover (the reply was lost)
// is not applied twice"): five calls reach the master and are applied,
// their replies are lost, and the master crashes before the client hears
// anything. The client retries each call, with its call number, on the new
// master, which must answer from the results remembered in the replicated
// state: CAS success, Delete success, exclusive create success, Release
// success, TryAcquire's sequencer — and the state shows each applied once.
func TestExactlyOnceAcrossFailover(t *testing.T) {
	c := cell.StartCluster(t, 3)
	ps := c.Proxies(t)
	cl := c.Dial(t, client.Config{Servers: cell.ProxyAddrs(ps), FixedServers: true, LockDelay: client.NoLockDelay})
	other := c.Dial(t, client.Config{LockDelay: client.NoLockDelay})
	m := c.Master(t)
	casPath, delPath, newPath, heldPath, freePath := c.Path("cas"), c.Path("del"), c.Path("new"), c.Path("held"), c.Path("free")

	ch := open(t, cl, casPath, client.Create())
	st0, err := ch.SetContents(ctxT(t), []byte("before"))
	if err != nil {
		t.Fatal(err)
	}
	dh := open(t, cl, delPath, client.Create())
	hh := open(t, cl, heldPath, client.Create())
	if err := hh.TryAcquire(ctxT(t), client.Exclusive); err != nil {
		t.Fatal(err)
	}
	heldSeq, _ := hh.Sequencer()
	fh := open(t, cl, freePath, client.Create())

	p := ps[m]
	drops := []*cell.ReplyDrop{
		p.DropReply(method(wire.MSetContents, casPath), cell.LoseAndHang),
		p.DropReply(method(wire.MDelete, delPath), cell.LoseAndHang),
		p.DropReply(openExclusive(newPath), cell.LoseAndHang),
		p.DropReply(method(wire.MRelease, heldPath), cell.LoseAndHang),
		p.DropReply(method(wire.MAcquire, freePath), cell.LoseAndHang),
	}
	type result struct {
		what string
		err  error
	}
	results := make(chan result, len(drops))
	var casStat client.Stat
	var created *client.Handle
	go func() {
		var err error
		casStat, err = ch.SetContentsIf(ctxT(t), []byte("after"), st0.ContentGen)
		results <- result{"CAS", err}
	}()
	go func() { results <- result{"Delete", dh.Delete(ctxT(t))} }()
	go func() {
		var err error
		created, err = cl.Open(ctxT(t), newPath, client.Create(), client.FailIfExists())
		results <- result{"Open(Create, FailIfExists)", err}
	}()
	go func() { results <- result{"Release", hh.Release(ctxT(t))} }()
	go func() { results <- result{"TryAcquire", fh.TryAcquire(ctxT(t), client.Exclusive)} }()
	for i, d := range drops {
		select {
		case <-d.Done():
		case <-time.After(callTimeout):
			t.Fatalf("reply %d was never lost: the call did not reach the master", i)
		}
	}
	select {
	case r := <-results:
		t.Fatalf("%s returned %v although its reply was lost", r.what, r.err)
	default:
	}

	c.Kill(t, m)
	nm := c.WaitMaster(t, others(c, m))
	t.Logf("node%d crashed with 5 replies lost; node%d is master", m, nm)
	for range drops {
		r := <-results
		if r.err != nil {
			t.Errorf("%s retried on the new master: %v; want the first result (success)", r.what, r.err)
		}
	}
	if t.Failed() {
		t.FailNow()
	}
	if cl.Session().Master != ps[nm].Addr() {
		t.Fatalf("client's master is %s, want node%d's proxy %s", cl.Session().Master, nm, ps[nm].Addr())
	}

	// CAS applied once: "after", at the generation the retry returned.
	oc := open(t, other, casPath)
	if got, st := contents(t, oc), stat(t, oc); got != "after" || st.ContentGen != casStat.ContentGen {
		t.Fatalf("cas file: %q at generation %d; want \"after\" at %d", got, st.ContentGen, casStat.ContentGen)
	}
	if _, err := other.Open(ctxT(t), delPath); !errors.Is(err, client.ErrNoSuchNode) {
		t.Fatalf("deleted file: open gives %v, want no_such_node", err)
	}
	if st := stat(t, open(t, other, newPath)); created == nil || st.Instance != created.Instance() {
		t.Fatalf("created file: instance %d, the client's handle names %v", st.Instance, created)
	}
	if checkSeq(t, other, heldSeq) {
		t.Fatalf("released lock's sequencer %s still valid", heldSeq)
	}
	oh := open(t, other, heldPath)
	if err := oh.TryAcquire(ctxT(t), client.Exclusive); err != nil {
		t.Fatalf("released lock not free: %v", err)
	}
	fseq, err := fh.Sequencer()
	if err != nil {
		t.Fatal(err)
	}
	if lg := stat(t, fh).LockGen; lg != fseq.Gen || !checkSeq(t, other, fseq) {
		t.Fatalf("free lock: generation %d, sequencer %s; want one grant", lg, fseq)
	}
}
