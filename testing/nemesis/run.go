package nemesis

import (
	"fmt"
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

// masterTimeout bounds how long the cell may go without exactly one master
// among its running, connected servers once a fault is undone: far more
// than an election takes, so hitting it is a liveness bug.
const masterTimeout = 20 * time.Second

// Run plays s on c from the calling goroutine (the test's: it may fail t),
// pausing pausers[i] for PauseHolder steps, and returns when every step ran
// and was undone. Whatever happens, the cell is left healed with every
// server running. It returns how many steps of each kind ran.
func Run(t testing.TB, c *cell.Cluster, s Schedule, pausers []Pauser, rec Noter) map[Kind]int {
	t.Helper()
	counts := map[Kind]int{}
	var undo func()
	defer func() {
		if undo != nil {
			undo()
		}
		c.Heal()
		for i := 0; i < c.N(); i++ {
			if c.Server(i) == nil {
				c.Restart(t, i)
			}
		}
	}()
	for i, st := range s.Steps {
		time.Sleep(st.Gap)
		m, ok := singleMaster(c)
		if !ok {
			t.Fatalf("seed %d, before step %d (%s): no single master within %v (masters %v, running %v)",
				s.Seed, i+1, st, masterTimeout, c.Masters(), c.Running())
		}
		at := rec.Now()
		var what string
		switch st.Kind {
		case KillRestart:
			victim := st.Target
			if victim >= c.N() {
				victim = m
			}
			what = fmt.Sprintf("kill node%d (master node%d)", victim, m)
			c.Kill(t, victim)
			undo = func() { c.Restart(t, victim) }
		case IsolateFollower:
			var followers []int
			for j := 0; j < c.N(); j++ {
				if j != m {
					followers = append(followers, j)
				}
			}
			victim := followers[st.Target%len(followers)]
			what = fmt.Sprintf("isolate follower node%d (master node%d)", victim, m)
			c.Isolate(victim)
			undo = c.Heal
		case IsolateMaster:
			what = fmt.Sprintf("isolate master node%d", m)
			c.Isolate(m)
			undo = c.Heal
		case PauseHolder:
			if len(pausers) == 0 {
				continue
			}
			p := pausers[st.Target%len(pausers)]
			what = fmt.Sprintf("pause lock client %d", st.Target%len(pausers))
			p.Pause()
			undo = p.Resume
		}
		t.Logf("nemesis seed %d step %d at %.3fs: %s for %v", s.Seed, i+1, float64(at)/1e9, what, st.Hold.Round(time.Millisecond))
		time.Sleep(st.Hold)
		undo()
		undo = nil
		counts[st.Kind]++
		rec.Note("nemesis", what, at, rec.Now())
	}
	return counts
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
