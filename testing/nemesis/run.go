package nemesis

import (
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/chubby-dev/chubby/testing/cell"
)

// Pauser is a client the nemesis can pause (PauseHolder).
type Pauser interface {
	Pause()
	Resume()
}

// Noter records what the nemesis did, for the history's visualization.
type Noter interface {
	Now() int64
	Note(tag, what string, start, end int64)
}

// Env is what Run acts on.
type Env struct {
	// Cluster is the cell; clock faults on servers need it started with
	// cell.WithSkewClocks, and ServerPause/ServerClockJump hold the client
	// links made with Cluster.Proxy.
	Cluster *cell.Cluster
	// Holders are the lock clients PauseHolder picks from.
	Holders []Pauser
	// Clocks are the clients' lease clocks ClientClockJump and ClientDrift
	// pick from: the lock clients' first, then the register clients'.
	Clocks []*cell.SkewClock
	Rec    Noter
}

// Tally counts the steps Run injected and those it skipped (a target in
// conflict with an active fault: say, the master to pause is the server
// already killed).
type Tally struct {
	Ran, Skipped map[Kind]int
}

func (t Tally) String() string {
	return "ran " + countString(t.Ran) + "; skipped " + countString(t.Skipped)
}

func countString(m map[Kind]int) string {
	var ks []Kind
	for k := range m {
		ks = append(ks, k)
	}
	sort.Slice(ks, func(i, j int) bool { return ks[i] < ks[j] })
	parts := make([]string, len(ks))
	for i, k := range ks {
		parts[i] = fmt.Sprintf("%s=%d", k, m[k])
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, " ")
}

// masterTimeout bounds how long the cell may go without exactly one master
// among its running servers once every server fault is undone: far more
// than an election takes, so hitting it is a liveness bug.
const masterTimeout = 20 * time.Second

// Run plays s on env from the calling goroutine (the test's: it may fail
// t) and returns when every step ran and was undone. Steps start at their
// At, counted from the call, shifted by the time spent waiting for a
// master: before a server fault that starts while no other server fault is
// active, Run waits until the cell has exactly one master (a liveness
// check; t fails after masterTimeout). Whatever happens, the cell is left
// healed, with every server running, every client resumed and every clock
// at real speed.
func Run(t testing.TB, env Env, s Schedule) Tally {
	t.Helper()
	r := &runner{t: t, env: env, c: env.Cluster, seed: s.Seed,
		undo: map[int]func(){}, down: map[int]string{}, stalled: map[int]bool{},
		drift: map[int]bool{}, slow: map[int]bool{}, paused: map[int]bool{}, cdrift: map[int]bool{},
		tally: Tally{Ran: map[Kind]int{}, Skipped: map[Kind]int{}}}
	defer r.cleanup()

	type event struct {
		at   time.Duration
		step int
		end  bool
	}
	var events []event
	for i, st := range s.Steps {
		events = append(events, event{st.At, i, false}, event{st.End(), i, true})
	}
	sort.SliceStable(events, func(i, j int) bool {
		if events[i].at != events[j].at {
			return events[i].at < events[j].at
		}
		return events[i].end && !events[j].end // undo before inject
	})
	start := time.Now()
	var shift time.Duration
	serverActive := 0
	for _, e := range events {
		time.Sleep(time.Until(start.Add(e.at + shift)))
		st := s.Steps[e.step]
		if e.end {
			if u, ok := r.undo[e.step]; ok {
				u()
				delete(r.undo, e.step)
			}
			if !st.Kind.clientKind() {
				serverActive--
			}
			continue
		}
		if !st.Kind.clientKind() {
			if serverActive == 0 {
				w := time.Now()
				if _, ok := singleMaster(r.c); !ok {
					t.Fatalf("seed %d, before step %d (%s): no single master within %v (masters %v, running %v)",
						s.Seed, e.step+1, st, masterTimeout, r.c.Masters(), r.c.Running())
				}
				shift += time.Since(w)
			}
			serverActive++
		}
		at := env.Rec.Now()
		what, undo := r.inject(st)
		if what == "" {
			r.tally.Skipped[st.Kind]++
			t.Logf("nemesis seed %d step %d at %.3fs: %s skipped: %s", s.Seed, e.step+1, float64(at)/1e9, st.Kind, r.why)
			continue
		}
		r.tally.Ran[st.Kind]++
		t.Logf("nemesis seed %d step %d at %.3fs: %s for %v", s.Seed, e.step+1, float64(at)/1e9, what, st.Hold.Round(time.Millisecond))
		r.undo[e.step] = func() {
			if undo != nil {
				undo()
			}
			env.Rec.Note("nemesis", what, at, env.Rec.Now())
		}
	}
	return r.tally
}

type runner struct {
	t    testing.TB
	env  Env
	c    *cell.Cluster
	seed uint64
	why  string // why the last inject skipped its step

	undo    map[int]func() // by step index, while active
	down    map[int]string // server → "killed"/"paused"
	stalled map[int]bool   // server clock stalled (ServerClockJump)
	drift   map[int]bool   // server clock drifting
	slow    map[int]bool   // server disk slow
	paused  map[int]bool   // holder paused
	cdrift  map[int]bool   // client clock drifting
	tally   Tally
}

// cleanup undoes what is still active (after a failure), heals the cell,
// restarts killed servers and puts every clock back to real speed.
func (r *runner) cleanup() {
	var steps []int
	for i := range r.undo {
		steps = append(steps, i)
	}
	sort.Sort(sort.Reverse(sort.IntSlice(steps)))
	for _, i := range steps {
		r.undo[i]()
	}
	r.c.Heal()
	for i := 0; i < r.c.N(); i++ {
		if r.c.Server(i) == nil {
			r.c.Restart(r.t, i)
		}
		if clk := r.c.SkewClock(i); clk != nil && clk.Rate() != 1 {
			clk.SetRate(1)
		}
		r.c.SetDiskDelay(i, 0)
	}
	for _, clk := range r.env.Clocks {
		if clk.Rate() != 1 {
			clk.SetRate(1)
		}
	}
}

// master is the single master of the moment, if there is one.
func (r *runner) master() (int, bool) {
	ms := r.c.Masters()
	if len(ms) == 1 {
		return ms[0], true
	}
	return -1, false
}

// server resolves a server target (0..n-1 that server, n..2n-1 the master
// or else server target-n) and, if it fails ok, the next server that
// passes. It returns -1 when none does.
func (r *runner) server(target int, ok func(int) bool) (int, string) {
	n := r.c.N()
	v, how := target, ""
	if target >= n {
		v, how = target-n, " (no single master)"
		if m, found := r.master(); found {
			v, how = m, " (the master)"
		}
	}
	for k := 0; k < n; k++ {
		if i := (v + k) % n; ok(i) {
			if k > 0 {
				how = fmt.Sprintf(" (node%d busy)", v)
			}
			return i, how
		}
	}
	return -1, ""
}

func (r *runner) up(i int) bool { return r.down[i] == "" && r.c.Server(i) != nil }

func (r *runner) clientTarget(target, n int, busy map[int]bool) int {
	for k := 0; k < n; k++ {
		if i := (target + k) % n; !busy[i] {
			return i
		}
	}
	return -1
}

// inject starts st's fault and returns what it did and how to undo it; ""
// if it skipped the step (r.why says why).
func (r *runner) inject(st Step) (string, func()) {
	c, n := r.c, r.c.N()
	skip := func(why string) (string, func()) { r.why = why; return "", nil }
	cut := func(what string, links []cell.Link) (string, func()) {
		k := c.Cut(links...)
		return fmt.Sprintf("%s [cut %s]", what, k), k.Mend
	}
	switch st.Kind {
	case KillRestart:
		v, how := r.server(st.Target, func(i int) bool { return r.up(i) && !r.stalled[i] })
		if v < 0 {
			return skip("no running server to kill")
		}
		c.Kill(r.t, v)
		r.down[v] = "killed"
		return fmt.Sprintf("kill node%d%s", v, how), func() {
			c.Restart(r.t, v)
			delete(r.down, v)
		}
	case IsolateFollower:
		m, ok := r.master()
		if !ok {
			m = st.Target // any server stands for the master
		}
		var followers []int
		for j := 0; j < n; j++ {
			if j != m {
				followers = append(followers, j)
			}
		}
		v := followers[st.Target%len(followers)]
		return cut(fmt.Sprintf("isolate follower node%d (master node%d)", v, m), cell.AllLinks(n, v))
	case IsolateMaster, MasterOneWay:
		m, ok := r.master()
		how := ""
		if !ok {
			m, how = st.Target, " (no single master)"
		}
		if st.Kind == IsolateMaster {
			return cut(fmt.Sprintf("isolate master node%d%s", m, how), cell.AllLinks(n, m))
		}
		return cut(fmt.Sprintf("master node%d%s cannot send", m, how), cell.OutLinks(n, m))
	case SplitRandom:
		groups := map[int][]int{}
		for i, g := range st.Groups {
			groups[g] = append(groups[g], i)
		}
		var lists [][]int
		for g := 0; g < len(st.Groups); g++ {
			if len(groups[g]) > 0 {
				lists = append(lists, groups[g])
			}
		}
		return cut(fmt.Sprintf("split %v", lists), cell.PartitionLinks(n, lists...))
	case OneWayLink:
		return cut(fmt.Sprintf("cut node%d→node%d", st.Target, st.Peer), []cell.Link{{From: st.Target, To: st.Peer}})
	case ServerPause:
		v, how := r.server(st.Target, func(i int) bool { return r.up(i) && !r.stalled[i] })
		if v < 0 {
			return skip("no running server to pause")
		}
		resume := c.Pause(v)
		r.down[v] = "paused"
		return fmt.Sprintf("pause node%d%s", v, how), func() {
			resume()
			delete(r.down, v)
		}
	case ServerClockJump:
		v, how := r.server(st.Target, func(i int) bool { return r.up(i) && !r.stalled[i] })
		if v < 0 {
			return skip("no running server to stall")
		}
		if c.SkewClock(v) == nil {
			return skip("the servers have no SkewClock")
		}
		resume := c.StallLeaseClock(v)
		r.stalled[v] = true
		return fmt.Sprintf("stall node%d%s's lease clock, then jump it", v, how), func() {
			resume()
			delete(r.stalled, v)
		}
	case ServerDrift:
		v, how := r.server(st.Target, func(i int) bool { return !r.drift[i] })
		if v < 0 {
			return skip("every server clock drifts already")
		}
		clk := c.SkewClock(v)
		if clk == nil {
			return skip("the servers have no SkewClock")
		}
		clk.SetRate(st.Rate)
		r.drift[v] = true
		return fmt.Sprintf("node%d%s's clock at rate %.4f", v, how, st.Rate), func() {
			clk.SetRate(1)
			delete(r.drift, v)
		}
	case SlowDisk:
		v, how := r.server(st.Target, func(i int) bool { return !r.slow[i] })
		if v < 0 {
			return skip("every disk is slow already")
		}
		c.SetDiskDelay(v, st.Delay)
		r.slow[v] = true
		return fmt.Sprintf("node%d%s's disk +%v per write", v, how, st.Delay.Round(time.Millisecond)), func() {
			c.SetDiskDelay(v, 0)
			delete(r.slow, v)
		}
	case PauseHolder:
		h := r.clientTarget(st.Target, len(r.env.Holders), r.paused)
		if h < 0 {
			return skip("no lock client to pause")
		}
		p := r.env.Holders[h]
		p.Pause()
		r.paused[h] = true
		return fmt.Sprintf("pause lock client %d", h), func() {
			p.Resume()
			delete(r.paused, h)
		}
	case ClientClockJump:
		if len(r.env.Clocks) == 0 {
			return skip("no client clocks")
		}
		i := st.Target % len(r.env.Clocks)
		r.env.Clocks[i].Jump(st.Jump)
		return fmt.Sprintf("client clock %d jumps +%v", i, st.Jump.Round(time.Millisecond)), nil
	case ClientDrift:
		i := r.clientTarget(st.Target, len(r.env.Clocks), r.cdrift)
		if i < 0 {
			return skip("no client clock to drift")
		}
		clk := r.env.Clocks[i]
		clk.SetRate(st.Rate)
		r.cdrift[i] = true
		return fmt.Sprintf("client clock %d at rate %.4f", i, st.Rate), func() {
			clk.SetRate(1)
			delete(r.cdrift, i)
		}
	}
	return skip("unknown kind")
}

// singleMaster waits until exactly one running server reports master and
// returns it.
func singleMaster(c *cell.Cluster) (int, bool) {
	m := -1
	ok := cell.Eventually(masterTimeout, func() bool {
		ms := c.Masters()
		if len(ms) != 1 {
			return false
		}
		m = ms[0]
		return true
	})
	return m, ok
}
