package nemesis

import (
	"fmt"
	"testing"
	"time"

	"github.com/chubby-dev/chubby/testing/cell"
	"github.com/chubby-dev/chubby/testing/nemesis/core"
	"github.com/chubby-dev/chubby/testing/wait"
)

// Pauser is a client the nemesis can pause (PauseClient).
type Pauser interface {
	Pause()
	Resume()
}

// Target is the in-process cell as a core.Target: a cell.Cluster, its
// lock clients and the clients' lease clocks.
type Target struct {
	T testing.TB
	// Cluster is the cell; clock faults on servers need it started with
	// cell.WithSkewClocks, and PauseServer/ServerClockJump hold the client
	// links made with Cluster.Proxy.
	Cluster *cell.Cluster
	// Holders are the lock clients PauseClient picks from.
	Holders []Pauser
	// Clocks are the clients' lease clocks ClientClockJump and ClientDrift
	// pick from: the lock clients' first, then the register clients'.
	Clocks []*cell.SkewClock

	down    map[int]string // server → "killed"/"paused"
	stalled map[int]bool   // server clock stalled (ServerClockJump)
	drift   map[int]bool   // server clock drifting
	slow    map[int]bool   // server disk slow
	paused  map[int]bool   // holder paused
	cdrift  map[int]bool   // client clock drifting
}

// masterTimeout bounds how long the cell may go without exactly one master
// among its running servers once every server fault is undone: far more
// than an election takes, so hitting it is a liveness bug.
const masterTimeout = 20 * time.Second

// Run plays s on the cell (core.Run) and returns what it injected.
func (r *Target) Run(s core.Schedule, notes core.Noter) core.Tally {
	r.down, r.stalled, r.drift, r.slow, r.paused, r.cdrift = map[int]string{}, map[int]bool{}, map[int]bool{}, map[int]bool{}, map[int]bool{}, map[int]bool{}
	return core.Run(r.T, r, s, notes)
}

// Servers is the cell's size.
func (r *Target) Servers() int { return r.Cluster.N() }

// Settle waits until the cell has exactly one master among its running
// servers (a liveness check).
func (r *Target) Settle() error {
	if _, ok := singleMaster(r.Cluster); !ok {
		return fmt.Errorf("no single master within %v (masters %v, running %v)", masterTimeout, r.Cluster.Masters(), r.Cluster.Running())
	}
	return nil
}

// Heal undoes what is still active (after a failure too), heals the cell,
// restarts killed servers and puts every clock back to real speed.
func (r *Target) Heal(pending []func()) {
	for _, u := range pending {
		u()
	}
	c := r.Cluster
	c.Heal()
	for i := 0; i < c.N(); i++ {
		if c.Server(i) == nil {
			c.Restart(r.T, i)
		}
		if clk := c.SkewClock(i); clk != nil && clk.Rate() != 1 {
			clk.SetRate(1)
		}
		c.SetDiskDelay(i, 0)
	}
	for _, clk := range r.Clocks {
		if clk.Rate() != 1 {
			clk.SetRate(1)
		}
	}
}

// master is the single master of the moment, if there is one.
func (r *Target) master() (int, bool) {
	ms := r.Cluster.Masters()
	if len(ms) == 1 {
		return ms[0], true
	}
	return -1, false
}

// server resolves a server target (0..n-1 that server, n..2n-1 the master
// or else server target-n) and, if it fails ok, the next server that
// passes. It returns -1 when none does.
func (r *Target) server(target int, ok func(int) bool) (int, string) {
	n := r.Cluster.N()
	v, how := target, ""
	if target >= n {
		v, how = target-n, " (no single master)"
		if m, found := r.master(); found {
			v, how = m, " (the master)"
		}
	}
	i, moved := core.NextFree(v, n, ok)
	if i < 0 {
		return -1, ""
	}
	if moved > 0 {
		how = fmt.Sprintf(" (node%d busy)", v)
	}
	return i, how
}

func (r *Target) up(i int) bool { return r.down[i] == "" && r.Cluster.Server(i) != nil }

func (r *Target) clientTarget(target, n int, busy map[int]bool) int {
	i, _ := core.NextFree(target, n, func(i int) bool { return !busy[i] })
	return i
}

// Inject starts st's fault.
func (r *Target) Inject(st core.Step) (core.Fault, string) {
	c, n := r.Cluster, r.Cluster.N()
	skip := func(why string) (core.Fault, string) { return core.Fault{}, why }
	ran := func(what string, undo func()) (core.Fault, string) { return core.Fault{What: what, Undo: undo}, "" }
	cut := func(what string, links []cell.Link) (core.Fault, string) {
		k := c.Cut(links...)
		return ran(fmt.Sprintf("%s [cut %s]", what, k), k.Mend)
	}
	switch st.Kind {
	case core.KillServer:
		v, how := r.server(st.Target, func(i int) bool { return r.up(i) && !r.stalled[i] })
		if v < 0 {
			return skip("no running server to kill")
		}
		c.Kill(r.T, v)
		r.down[v] = "killed"
		return ran(fmt.Sprintf("kill node%d%s", v, how), func() {
			c.Restart(r.T, v)
			delete(r.down, v)
		})
	case core.IsolateFollower:
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
	case core.IsolateMaster, core.MasterOneWay:
		m, ok := r.master()
		how := ""
		if !ok {
			m, how = st.Target, " (no single master)"
		}
		if st.Kind == core.IsolateMaster {
			return cut(fmt.Sprintf("isolate master node%d%s", m, how), cell.AllLinks(n, m))
		}
		return cut(fmt.Sprintf("master node%d%s cannot send", m, how), cell.OutLinks(n, m))
	case core.SplitRandom:
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
	case core.OneWay:
		return cut(fmt.Sprintf("cut node%d→node%d", st.Target, st.Peer), []cell.Link{{From: st.Target, To: st.Peer}})
	case core.PauseServer:
		v, how := r.server(st.Target, func(i int) bool { return r.up(i) && !r.stalled[i] })
		if v < 0 {
			return skip("no running server to pause")
		}
		resume := c.Pause(v)
		r.down[v] = "paused"
		return ran(fmt.Sprintf("pause node%d%s", v, how), func() {
			resume()
			delete(r.down, v)
		})
	case core.ServerClockJump:
		v, how := r.server(st.Target, func(i int) bool { return r.up(i) && !r.stalled[i] })
		if v < 0 {
			return skip("no running server to stall")
		}
		if c.SkewClock(v) == nil {
			return skip("the servers have no SkewClock")
		}
		resume := c.StallLeaseClock(v)
		r.stalled[v] = true
		return ran(fmt.Sprintf("stall node%d%s's lease clock, then jump it", v, how), func() {
			resume()
			delete(r.stalled, v)
		})
	case core.ServerDrift:
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
		return ran(fmt.Sprintf("node%d%s's clock at rate %.4f", v, how, st.Rate), func() {
			clk.SetRate(1)
			delete(r.drift, v)
		})
	case core.SlowDisk:
		v, how := r.server(st.Target, func(i int) bool { return !r.slow[i] })
		if v < 0 {
			return skip("every disk is slow already")
		}
		c.SetDiskDelay(v, st.Delay)
		r.slow[v] = true
		return ran(fmt.Sprintf("node%d%s's disk +%v per write", v, how, st.Delay.Round(time.Millisecond)), func() {
			c.SetDiskDelay(v, 0)
			delete(r.slow, v)
		})
	case core.PauseClient:
		h := r.clientTarget(st.Target, len(r.Holders), r.paused)
		if h < 0 {
			return skip("no lock client to pause")
		}
		p := r.Holders[h]
		p.Pause()
		r.paused[h] = true
		return ran(fmt.Sprintf("pause lock client %d", h), func() {
			p.Resume()
			delete(r.paused, h)
		})
	case core.ClientClockJump:
		if len(r.Clocks) == 0 {
			return skip("no client clocks")
		}
		i := st.Target % len(r.Clocks)
		r.Clocks[i].Jump(st.Jump)
		return ran(fmt.Sprintf("client clock %d jumps +%v", i, st.Jump.Round(time.Millisecond)), nil)
	case core.ClientDrift:
		i := r.clientTarget(st.Target, len(r.Clocks), r.cdrift)
		if i < 0 {
			return skip("no client clock to drift")
		}
		clk := r.Clocks[i]
		clk.SetRate(st.Rate)
		r.cdrift[i] = true
		return ran(fmt.Sprintf("client clock %d at rate %.4f", i, st.Rate), func() {
			clk.SetRate(1)
			delete(r.cdrift, i)
		})
	}
	return skip("unknown kind")
}

// singleMaster waits until exactly one running server reports master and
// returns it.
func singleMaster(c *cell.Cluster) (int, bool) {
	m := -1
	ok := wait.Until(masterTimeout, func() bool {
		ms := c.Masters()
		if len(ms) != 1 {
			return false
		}
		m = ms[0]
		return true
	})
	return m, ok
}
