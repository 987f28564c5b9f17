package election_test

// Tests of the election recipe on an in-process cell: one leader at a time
// with increasing sequencers, Leader and Observe following every change
// (resign, a leader's session ending, Proclaim), the record fenced against
// a deposed leader, and a term's Done closed at jeopardy, before the lock
// can move.

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/chubby-dev/chubby/client"
	"github.com/chubby-dev/chubby/client/election"
	"github.com/chubby-dev/chubby/session"
	"github.com/chubby-dev/chubby/testing/cell"
	"github.com/chubby-dev/chubby/testing/wait"
	"github.com/chubby-dev/chubby/wire"
)

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), wait.Timeout)
	t.Cleanup(cancel)
	return ctx
}

// campaign runs Campaign in the background.
func campaign(e *election.Election, value string) <-chan result {
	ch := make(chan result, 1)
	go func() {
		t, err := e.Campaign(context.Background(), []byte(value))
		ch <- result{t, err}
	}()
	return ch
}

type result struct {
	term *election.Term
	err  error
}

func won(t *testing.T, ch <-chan result, who string) *election.Term {
	t.Helper()
	select {
	case r := <-ch:
		if r.err != nil {
			t.Fatalf("%s: Campaign: %v", who, r.err)
		}
		return r.term
	case <-time.After(wait.Timeout):
		t.Fatalf("%s did not win within %v", who, wait.Timeout)
	}
	return nil
}

func notYet(t *testing.T, ch <-chan result, who string) {
	t.Helper()
	wait.Never(t, 100*time.Millisecond, who+" won while another leads", func() bool { return len(ch) > 0 })
}

// next reads the next leader an observer reports.
func next(t *testing.T, ch <-chan election.Leader, what string) election.Leader {
	t.Helper()
	select {
	case l, ok := <-ch:
		if !ok {
			t.Fatalf("%s: Observe's channel closed", what)
		}
		return l
	case <-time.After(wait.Timeout):
		t.Fatalf("%s: no leader change within %v", what, wait.Timeout)
	}
	return election.Leader{}
}

// expectLeader reads the next leader an observer reports, skipping "no
// leader" (seen between one leader's resignation and the next's record).
func expectLeader(t *testing.T, ch <-chan election.Leader, what, value string, seq client.Sequencer) {
	t.Helper()
	l := next(t, ch, what)
	for l.Sequencer.Gen == 0 {
		l = next(t, ch, what)
	}
	if string(l.Value) != value || l.Sequencer != seq {
		t.Fatalf("%s: observed leader %q %v, want %q %v", what, l.Value, l.Sequencer, value, seq)
	}
}

// TestOneLeaderInTurn: three sessions campaign; one leads; the others wait
// in line and lead in turn as each resigns or its session ends, each term
// with a greater sequencer; Leader and an observer name each leader with
// its value and sequencer, and "no leader" once nobody leads.
func TestOneLeaderInTurn(t *testing.T) {
	c := cell.Start(t)
	dir := c.Path("svc")
	cfg := client.Config{LockDelay: client.NoLockDelay}
	clA, clB, clC, watcher := c.Dial(t, cfg), c.Dial(t, cfg), c.Dial(t, cfg), c.Dial(t, cfg)
	obs := election.New(watcher, dir)
	if _, err := obs.Leader(ctxT(t)); !errors.Is(err, election.ErrNoLeader) {
		t.Fatalf("Leader before any campaign: %v, want ErrNoLeader", err)
	}
	ch := obs.Observe(ctxT(t))
	if l := next(t, ch, "before any campaign"); l.Sequencer.Gen != 0 {
		t.Fatalf("observed %v before any campaign, want no leader", l)
	}

	a, b, cc := election.New(clA, dir), election.New(clB, dir), election.New(clC, dir)
	ta := won(t, campaign(a, "A"), "A")
	rb := campaign(b, "B")
	notYet(t, rb, "B")
	if _, err := b.Campaign(ctxT(t), []byte("B twice")); !errors.Is(err, election.ErrLeading) {
		t.Fatalf("a second Campaign while one waits: %v, want ErrLeading", err)
	}
	rc := campaign(cc, "C")
	notYet(t, rc, "C")
	expectLeader(t, ch, "A leads", "A", ta.Sequencer())
	if l, err := obs.Leader(ctxT(t)); err != nil || string(l.Value) != "A" || l.Sequencer != ta.Sequencer() {
		t.Fatalf("Leader = %q %v, %v; want A %v", l.Value, l.Sequencer, err, ta.Sequencer())
	}
	if ok, err := watcher.CheckSequencer(ctxT(t), ta.Sequencer()); err != nil || !ok {
		t.Fatalf("A's term sequencer is not valid: %v %v", ok, err)
	}
	if _, err := a.Campaign(ctxT(t), []byte("again")); !errors.Is(err, election.ErrLeading) {
		t.Fatalf("Campaign while leading: %v, want ErrLeading", err)
	}

	if err := a.Resign(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ta.Done():
	default:
		t.Fatal("A's term is not done after Resign")
	}
	tb := won(t, rb, "B (first in line)")
	if tb.Sequencer().Gen <= ta.Sequencer().Gen {
		t.Fatalf("B's sequencer %v is not after A's %v", tb.Sequencer(), ta.Sequencer())
	}
	expectLeader(t, ch, "B leads after A resigned", "B", tb.Sequencer())
	notYet(t, rc, "C")

	// B's session ends: its record goes with it, and C leads.
	clB.Close()
	tc := won(t, rc, "C")
	if tc.Sequencer().Gen <= tb.Sequencer().Gen {
		t.Fatalf("C's sequencer %v is not after B's %v", tc.Sequencer(), tb.Sequencer())
	}
	expectLeader(t, ch, "C leads after B's session ended", "C", tc.Sequencer())
	if err := cc.Resign(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	if l := next(t, ch, "after the last leader resigned"); l.Sequencer.Gen != 0 {
		t.Fatalf("observed %q %v after everyone resigned, want no leader", l.Value, l.Sequencer)
	}
	if _, err := obs.Leader(ctxT(t)); !errors.Is(err, election.ErrNoLeader) {
		t.Fatalf("Leader after everyone resigned: %v, want ErrNoLeader", err)
	}
}

// TestProclaimFencedAndObserved: the leader's Proclaim reaches Leader and
// observers; after leadership moved, the old term's Proclaim fails and a
// write fenced by its sequencer is refused.
func TestProclaimFencedAndObserved(t *testing.T) {
	c := cell.Start(t)
	dir := c.Path("svc")
	cfg := client.Config{LockDelay: client.NoLockDelay}
	clA, clB, watcher := c.Dial(t, cfg), c.Dial(t, cfg), c.Dial(t, cfg)
	a, b, obs := election.New(clA, dir), election.New(clB, dir), election.New(watcher, dir)
	ta := won(t, campaign(a, "v1"), "A")
	ch := obs.Observe(ctxT(t))
	expectLeader(t, ch, "A", "v1", ta.Sequencer())
	if err := a.Proclaim(ctxT(t), []byte("v2")); err != nil {
		t.Fatal(err)
	}
	expectLeader(t, ch, "after Proclaim", "v2", ta.Sequencer())
	if string(ta.Value()) != "v2" {
		t.Fatalf("term value %q after Proclaim, want v2", ta.Value())
	}
	if err := b.Proclaim(ctxT(t), []byte("x")); !errors.Is(err, election.ErrNotLeader) {
		t.Fatalf("Proclaim without a term: %v, want ErrNotLeader", err)
	}
	rb := campaign(b, "B")
	if err := a.Resign(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	tb := won(t, rb, "B")
	if err := a.Proclaim(ctxT(t), []byte("stale")); !errors.Is(err, election.ErrNotLeader) {
		t.Fatalf("Proclaim after resigning: %v, want ErrNotLeader", err)
	}
	// A deposed leader that still has its sequencer cannot write with it.
	if _, err := clA.WriteFile(ctxT(t), c.Path("data"), []byte("stale"), client.WithSequencer(ta.Sequencer())); !errors.Is(err, client.ErrBadSequencer) {
		t.Fatalf("write fenced by the old term: %v, want ErrBadSequencer", err)
	}
	if _, err := clB.WriteFile(ctxT(t), c.Path("data"), []byte("fresh"), client.WithSequencer(tb.Sequencer())); err != nil {
		t.Fatalf("write fenced by the leading term: %v", err)
	}
	if l, err := obs.Leader(ctxT(t)); err != nil || string(l.Value) != "B" {
		t.Fatalf("Leader = %q, %v; want B", l.Value, err)
	}
	if _, err := a.Campaign(ctxT(t), bytes.Repeat([]byte("x"), election.MaxValue+1)); !errors.Is(err, client.ErrTooLarge) {
		t.Fatalf("Campaign with an oversize value: %v, want ErrTooLarge", err)
	}
}

// TestLeaderReadFromCache: once read, the leader is answered from the
// session's cache (no call reaches the master) until it changes.
func TestLeaderReadFromCache(t *testing.T) {
	c := cell.Start(t)
	dir := c.Path("svc")
	clA := c.Dial(t, client.Config{})
	p := c.NewProxy(t)
	reader := c.Dial(t, client.Config{Servers: []string{p.Addr()}, FixedServers: true})
	a, obs := election.New(clA, dir), election.New(reader, dir)
	ta := won(t, campaign(a, "A"), "A")
	reads := func() int { return p.Count(wire.MOpen) + p.Count(wire.MGetContents) + p.Count(wire.MGetStat) }
	// The first read fills the cache unless the master declined to admit
	// it (it does while a write of the path is in flight; seen once in CI
	// under load): read until one is answered without the master.
	wait.For(t, 0, "the leader record cached", func() bool {
		n := reads()
		if _, err := obs.Leader(ctxT(t)); err != nil {
			t.Fatal(err)
		}
		return reads() == n
	})
	before := reads()
	for range 100 {
		l, err := obs.Leader(ctxT(t))
		if err != nil || l.Sequencer != ta.Sequencer() {
			t.Fatalf("Leader = %v, %v", l.Sequencer, err)
		}
	}
	if n := reads() - before; n != 0 {
		t.Fatalf("100 Leader calls made %d reads on the master, want 0 (cached)", n)
	}
	if err := a.Proclaim(ctxT(t), []byte("A2")); err != nil {
		t.Fatal(err)
	}
	if l, err := obs.Leader(ctxT(t)); err != nil || string(l.Value) != "A2" {
		t.Fatalf("Leader after Proclaim = %q, %v; want A2 (the cache was invalidated first)", l.Value, err)
	}
}

// TestTermDoneAtJeopardy: the term's Done closes the moment the leader's
// local lease runs out — while the master still holds the lock for it, so
// before anybody else can lead — with a LockLostError whose StopBy lies
// before the master's lease ends. Back to safe, the lock is still the
// session's (only Resign gives it up), and a new Campaign resigns the lost
// term and leads again with a newer sequencer.
func TestTermDoneAtJeopardy(t *testing.T) {
	const ttl = 12 * time.Second
	c := cell.Start(t, cell.WithManualClock())
	cc := session.NewManualClock(cell.Epoch)
	p := c.NewProxy(t)
	cl := c.Dial(t, client.Config{Servers: []string{p.Addr()}, FixedServers: true, Clock: cc, SessionTTL: ttl, LockDelay: client.NoLockDelay})
	wait.For(t, 0, "the first KeepAlive", func() bool { return p.Count(wire.MKeepAlive) >= 1 })
	watcher := c.Dial(t, client.Config{})
	e := election.New(cl, c.Path("svc"))
	term := won(t, campaign(e, "A"), "A")

	p.Break()
	end := cc.Now().Add(cl.Session().LeaseLeft)
	cc.Advance(end.Sub(cc.Now()) - time.Millisecond)
	wait.Never(t, 50*time.Millisecond, "term done while the local lease is valid", func() bool { return term.Err() != nil })
	cc.Advance(time.Millisecond)
	select {
	case <-term.Done():
	case <-time.After(wait.Timeout):
		t.Fatal("term not done at jeopardy")
	}
	var lost *client.LockLostError
	if !errors.As(term.Err(), &lost) || lost.Reason != client.LostJeopardy {
		t.Fatalf("term.Err() = %v, want a jeopardy LockLostError", term.Err())
	}
	if masterEnd := end.Add(session.DriftMargin(ttl)); lost.StopBy.Before(end) || !lost.StopBy.Before(masterEnd) {
		t.Fatalf("StopBy %v, want within [%v, %v)", lost.StopBy, end, masterEnd)
	}
	if ok, err := watcher.CheckSequencer(ctxT(t), term.Sequencer()); err != nil || !ok {
		t.Fatalf("at jeopardy the master no longer has the lock: %v %v", ok, err)
	}
	if err := e.Proclaim(ctxT(t), []byte("x")); !errors.Is(err, election.ErrNotLeader) {
		t.Fatalf("Proclaim after the term was lost: %v, want ErrNotLeader", err)
	}

	// Safe again: the lost term still holds the lock (nobody else could
	// lead meanwhile) until this session resigns it; a new Campaign does
	// that first and leads again with a newer sequencer.
	n := p.Count(wire.MKeepAlive)
	p.Heal()
	for i := 0; p.Count(wire.MKeepAlive) == n; i++ {
		if i == 400 {
			t.Fatal("no reconnect")
		}
		cc.Advance(100 * time.Millisecond)
		time.Sleep(time.Millisecond) // let the client's timers fire on the advanced clock
	}
	wait.For(t, 0, "the session safe again", func() bool {
		c.Manual(t).Advance(time.Second) // the master answers the parked KeepAlive
		return cl.State() == client.SessionSafe
	})
	obs := election.New(watcher, c.Path("svc"))
	if ok, err := watcher.CheckSequencer(ctxT(t), term.Sequencer()); err != nil || !ok {
		t.Fatalf("the lost term's lock was given up without a Resign: %v %v", ok, err)
	}
	t2 := won(t, campaign(e, "A2"), "A again")
	if l, err := obs.Leader(ctxT(t)); err != nil || string(l.Value) != "A2" || l.Sequencer != t2.Sequencer() {
		t.Fatalf("Leader after leading again = %q %v, %v", l.Value, l.Sequencer, err)
	}
	if t2.Sequencer().Gen <= term.Sequencer().Gen {
		t.Fatalf("the new term's sequencer %v is not after the lost one's %v", t2.Sequencer(), term.Sequencer())
	}
}
