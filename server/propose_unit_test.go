package server

import (
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/chubby-dev/chubby/fs"
	"github.com/chubby-dev/chubby/session"
	"github.com/chubby-dev/chubby/testing/wait"
)

// gatedRaft is a raftApplier whose entries wait for the test to let each
// through, recording the commands of each entry.
type gatedRaft struct {
	mu      sync.Mutex
	entries [][]*fs.Command
	gate    chan struct{}
}

type doneFuture struct{ n int }

func (doneFuture) Error() error    { return nil }
func (doneFuture) Index() uint64   { return 0 }
func (f doneFuture) Response() any { return make([]*fs.Result, f.n) }

func (g *gatedRaft) Apply(b []byte, _ time.Duration) raft.ApplyFuture {
	cmds, err := fs.DecodeCommands(b)
	if err != nil {
		panic(err)
	}
	g.mu.Lock()
	g.entries = append(g.entries, cmds)
	g.mu.Unlock()
	<-g.gate
	return doneFuture{len(cmds)}
}

func (g *gatedRaft) entry(i int) []*fs.Command {
	g.mu.Lock()
	defer g.mu.Unlock()
	if i >= len(g.entries) {
		return nil
	}
	return g.entries[i]
}

// TestProposerIsFairBetweenSessions (issue 17, finding 1): with one session's
// thousand writes queued, another session's write goes out in the next
// entry, not after the backlog; each session's commands keep their order.
func TestProposerIsFairBetweenSessions(t *testing.T) {
	g := &gatedRaft{gate: make(chan struct{})}
	h := prometheus.NewHistogram(prometheus.HistogramOpts{Name: "x"})
	q := newProposer(g, session.NewManualClock(unitStart), h, h)
	var pending []*proposal
	submit := func(sess uint64, n int) { // in order, without waiting for the result
		cmd := fs.NewCommand(&fs.Release{Path: "/ls/local/f", LockGen: uint64(n)})
		cmd.Session = sess
		enc, err := cmd.Encode()
		if err != nil {
			t.Fatal(err)
		}
		p := &proposal{queue: queueKey{session: sess}, enc: enc, done: make(chan struct{})}
		pending = append(pending, p)
		q.submit(p)
	}
	submit(1, 0)
	wait.For(t, 0, "the first entry in flight", func() bool { return g.entry(0) != nil })
	submit(1, 1)
	wait.For(t, 0, "the second entry in flight", func() bool { return g.entry(1) != nil })
	for i := 2; i < 1002; i++ { // both entries in flight: these queue
		submit(1, i)
	}
	submit(2, 0)
	g.gate <- struct{}{} // the first entry applies; the next batch goes out
	wait.For(t, 0, "the third entry", func() bool { return g.entry(2) != nil })
	third := g.entry(2)
	found := false
	for _, c := range third {
		found = found || c.Session == 2
	}
	if !found {
		t.Fatalf("session 2's write is not in the next entry (%d commands, all session 1's)", len(third))
	}
	close(g.gate)
	for _, p := range pending {
		<-p.done
	}
	last := map[uint64]uint64{}
	for i := range 10 {
		for _, c := range g.entry(i) {
			gen := c.Body.(*fs.Release).LockGen
			if prev, ok := last[c.Session]; ok && gen <= prev {
				t.Fatalf("session 1's commands out of order: %d after %d", gen, prev)
			}
			last[c.Session] = gen
		}
	}
}

// TestProposerPacedByLogStore (issue 13): paced, an entry is not formed
// while another sent waits to be written; once the log store reports the
// write, the next entry takes every command that queued meanwhile (not
// just the first, as unpaced). An entry that is never written (its Apply
// failed: leadership lost) does not stop the queue.
func TestProposerPacedByLogStore(t *testing.T) {
	h := prometheus.NewHistogram(prometheus.HistogramOpts{Name: "x"})
	submitter := func(t *testing.T, q *proposer) func(sess uint64) {
		return func(sess uint64) {
			cmd := fs.NewCommand(&fs.Release{Path: "/ls/local/f"})
			cmd.Session = sess
			enc, err := cmd.Encode()
			if err != nil {
				t.Fatal(err)
			}
			q.submit(&proposal{queue: queueKey{session: sess}, enc: enc, done: make(chan struct{})})
		}
	}
	inflight := func(q *proposer) int { q.mu.Lock(); defer q.mu.Unlock(); return q.inflight }
	sessions := func(cmds []*fs.Command) (out []uint64) {
		for _, c := range cmds {
			out = append(out, c.Session)
		}
		return out
	}

	// start has a proposer (paced or not) send session 1's entry, which
	// waits in raft (gated) for the test.
	start := func(t *testing.T, paced bool) (*gatedRaft, *proposer, func(uint64)) {
		g := &gatedRaft{gate: make(chan struct{})}
		q := newProposer(g, session.NewManualClock(unitStart), h, h)
		if paced {
			q.pace()
		}
		submit := submitter(t, q)
		submit(1)
		wait.For(t, 0, "the first entry sent", func() bool { return g.entry(0) != nil })
		return g, q, submit
	}

	t.Run("paced", func(t *testing.T) {
		g, q, submit := start(t, true)
		for s := uint64(2); s <= 4; s++ {
			submit(s) // the decision to send is made in submit: none is
		}
		if n := inflight(q); n != 1 {
			t.Fatalf("%d entries in flight before the first was written, want 1", n)
		}
		q.stored(1) // the first entry is on disk
		wait.For(t, 0, "the second entry sent", func() bool { return g.entry(1) != nil })
		if got := sessions(g.entry(1)); len(got) != 3 {
			t.Fatalf("second entry holds sessions %v, want the 3 that queued during the write", got)
		}
		close(g.gate)
	})

	t.Run("unpaced", func(t *testing.T) {
		g, _, submit := start(t, false)
		submit(2)
		wait.For(t, 0, "the second entry sent", func() bool { return g.entry(1) != nil })
		submit(3)
		submit(4)
		if got := sessions(g.entry(1)); len(got) != 1 {
			t.Fatalf("unpaced second entry holds sessions %v, want only the first to queue", got)
		}
		close(g.gate)
	})

	t.Run("never written", func(t *testing.T) {
		g, _, submit := start(t, true)
		submit(2)
		g.gate <- struct{}{} // the first Apply returns without a write reported
		wait.For(t, 0, "the queued command sent all the same", func() bool { return g.entry(1) != nil })
		close(g.gate)
	})

	// An entry never written with nothing queued behind it (leadership lost
	// while the master was idle), then a command on the next term: it goes
	// out, though no write came to report the lost entry (a long nemesis
	// run wedged the new master's first command here).
	t.Run("never written, then idle", func(t *testing.T) {
		g, q, submit := start(t, true)
		g.gate <- struct{}{} // its Apply returns; no write reported
		wait.For(t, 0, "the proposer idle", func() bool { return inflight(q) == 0 })
		submit(2)
		wait.For(t, 0, "the next term's first command sent", func() bool { return g.entry(1) != nil })
		close(g.gate)
	})
}
