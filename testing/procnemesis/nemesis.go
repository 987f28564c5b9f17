package procnemesis

import (
	"crypto/tls"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/chubby-dev/chubby/testing/nemesis/core"
	"github.com/chubby-dev/chubby/testing/netproxy"
	"github.com/chubby-dev/chubby/testing/proc"
	"github.com/chubby-dev/chubby/testing/wait"
)

// Target is the cell of chubbyd processes as a core.Target: the servers,
// their proxied links (Net) and the lock-client processes. It never fails
// the test by itself except through testing/proc, and always leaves
// everything healed: every link up and undelayed, every process running
// and continued.
type Target struct {
	T       testing.TB
	Nodes   []*proc.Server // index i is server n<i+1>, as in Net
	Net     *Net
	Workers []*WorkerProc
	// TLS, on a cell with TLS, is the certificate the target asks the
	// servers' HTTPS /status with (nil: plain HTTP).
	TLS *tls.Config

	busy  []string // per server: the fault holding it ("" free)
	wbusy []bool   // per worker: paused
	http  *http.Client
}

// masterWait bounds how long the target waits to see a master before a
// step that targets it falls back to its Pick.
const masterWait = 2 * time.Second

// Run plays s (core.Run). Steps start at their At after the call (later if
// the injection before them took time: a pause that waits for its worker's
// read, a restart).
func (r *Target) Run(s core.Schedule, notes core.Noter) core.Tally {
	r.busy = make([]string, len(r.Nodes))
	r.wbusy = make([]bool, len(r.Workers))
	r.http = &http.Client{Timeout: 500 * time.Millisecond}
	if r.TLS != nil {
		r.http.Transport = &http.Transport{TLSClientConfig: r.TLS}
		defer r.http.CloseIdleConnections()
	}
	return core.Run(r.T, r, s, notes)
}

// Servers is the cell's size.
func (r *Target) Servers() int { return len(r.Nodes) }

// Settle does not wait: the process nemesis draws no healthy gaps, and its
// steps resolve "the master" themselves (masterWait).
func (r *Target) Settle() error { return nil }

// Heal undoes every step still in force and then makes sure of it: every
// server running and continued, every worker continued, every link
// healed. After a failure (the test is ending) it only continues and heals:
// t.Cleanup kills the processes.
func (r *Target) Heal(pending []func()) {
	t := r.T
	failed := t.Failed()
	for _, u := range pending {
		if !failed {
			u()
		}
	}
	r.Net.HealAll()
	for _, w := range r.Workers {
		if w.Child.Paused() {
			w.Resume(t)
		}
	}
	for _, s := range r.Nodes {
		if s.Paused() {
			s.Resume(t)
		}
	}
	if failed {
		return
	}
	for _, s := range r.Nodes {
		if !s.Running(t) {
			s.Launch(t)
		}
	}
}

// Inject starts st. Pick is st.Target.
func (r *Target) Inject(st core.Step) (core.Fault, string) {
	t := r.T
	n := len(r.Nodes)
	skip := func(why string) (core.Fault, string) { return core.Fault{}, why }
	ran := func(what string, undo func()) (core.Fault, string) { return core.Fault{What: what, Undo: undo}, "" }
	switch st.Kind {
	case core.KillServer, core.PauseServer:
		i, m, why := r.pickServer(st.Target)
		if i < 0 {
			return skip(why)
		}
		s := r.Nodes[i]
		what := fmt.Sprintf("%s %s%s", st.Kind, s.NodeID, masterTag(i, m))
		r.busy[i] = st.Kind.String()
		if st.Kind == core.KillServer {
			s.Kill(t)
			return ran(what, func() {
				s.Launch(t)
				r.busy[i] = ""
			})
		}
		s.Pause(t)
		return ran(what, func() {
			s.Resume(t)
			r.busy[i] = ""
		})
	case core.PauseClient:
		if len(r.Workers) == 0 {
			return skip("no lock workers")
		}
		k, _ := core.NextFree(st.Target%len(r.Workers), len(r.Workers), func(c int) bool { return !r.wbusy[c] })
		if k < 0 {
			return skip("every lock worker is paused")
		}
		w := r.Workers[k]
		aim := ""
		if st.Pick2%2 == 0 {
			if w.WaitRead(min(3*time.Second, st.Hold/2)) {
				aim = " right after it read the counter"
			} else {
				aim = " (no read seen to aim at)"
			}
		}
		r.wbusy[k] = true
		w.Pause(t)
		return ran(fmt.Sprintf("pause-client lockworker%d%s", k, aim), func() {
			w.Resume(t)
			r.wbusy[k] = false
		})
	case core.IsolateFollower, core.IsolateMaster:
		m := r.master()
		victim := m
		if st.Kind == core.IsolateFollower || m < 0 {
			var others []int
			for i := range n {
				if i != m {
					others = append(others, i)
				}
			}
			victim = others[st.Target%len(others)]
		}
		id := r.Net.Contribute(r.Net.RaftLinksOf(victim), st.Mode, 0)
		return ran(fmt.Sprintf("%s n%d%s (%s)", st.Kind, victim+1, masterTag(victim, m), st.Mode), func() { r.Net.Withdraw(id) })
	case core.Bridge:
		var pairs [][2]int
		for a := range n {
			for b := a + 1; b < n; b++ {
				pairs = append(pairs, [2]int{a, b})
			}
		}
		p := pairs[st.Target%len(pairs)]
		bridge := 3 - p[0] - p[1] // n == 3
		m := r.master()
		id := r.Net.Contribute([]*netproxy.Link{r.Net.Raft[p[0]][p[1]], r.Net.Raft[p[1]][p[0]]}, st.Mode, 0)
		return ran(fmt.Sprintf("bridge: n%d ✕ n%d, both through n%d (master %s, %s)", p[0]+1, p[1]+1, bridge+1, nodeName(m), st.Mode), func() { r.Net.Withdraw(id) })
	case core.OneWay:
		m := r.master()
		pairs := n * (n - 1)
		var from, to int
		if p := st.Target % (pairs + 1); p < pairs || m < 0 {
			p %= pairs
			from, to = p/(n-1), p%(n-1)
			if to >= from {
				to++
			}
		} else {
			from = m
			to = (m + 1 + st.Pick2%(n-1)) % n
		}
		id := r.Net.Contribute([]*netproxy.Link{r.Net.Raft[from][to]}, st.Mode, 0)
		return ran(fmt.Sprintf("one-way: n%d → n%d cut, n%d → n%d up (master %s, %s)", from+1, to+1, to+1, from+1, nodeName(m), st.Mode), func() { r.Net.Withdraw(id) })
	case core.DelayRaft:
		var links []*netproxy.Link
		var what string
		if p := st.Target % (n + 1); p == n {
			links, what = r.Net.AllRaft(), "every raft link"
		} else {
			links, what = r.Net.RaftLinksOf(p), fmt.Sprintf("n%d's raft links", p+1)
		}
		id := r.Net.Contribute(links, netproxy.Pass, st.Delay)
		return ran(fmt.Sprintf("delay-raft: %s by %v", what, st.Delay), func() { r.Net.Withdraw(id) })
	case core.CutClient, core.DelayClient:
		names := r.Net.ClientNames()
		if len(names) == 0 {
			return skip("no clients")
		}
		name := names[st.Target%len(names)]
		links := r.Net.ClientLinks(name)
		what := "every server"
		if st.Kind == core.CutClient && st.Pick2%2 == 1 {
			if m := r.master(); m >= 0 {
				links, what = []*netproxy.Link{links[m]}, fmt.Sprintf("the master n%d", m+1)
			}
		}
		if st.Kind == core.DelayClient {
			id := r.Net.Contribute(links, netproxy.Pass, st.Delay)
			return ran(fmt.Sprintf("delay-client: %s's links by %v", name, st.Delay), func() { r.Net.Withdraw(id) })
		}
		id := r.Net.Contribute(links, st.Mode, 0)
		return ran(fmt.Sprintf("cut-client: %s from %s (%s)", name, what, st.Mode), func() { r.Net.Withdraw(id) })
	}
	return skip(fmt.Sprintf("unknown kind %d", int(st.Kind)))
}

// pickServer resolves a server target: pick%(n+1) == n is the master of the
// moment. A server held by another process fault is passed over for the
// next free one. It returns the server, the master seen (-1: none), or -1
// and why.
func (r *Target) pickServer(pick int) (int, int, string) {
	n := len(r.Nodes)
	m := r.master()
	want := pick % (n + 1)
	if want == n {
		want = m
		if m < 0 {
			want = pick % n
		}
	}
	if i, _ := core.NextFree(want, n, func(i int) bool { return r.busy[i] == "" }); i >= 0 {
		return i, m, ""
	}
	return -1, m, fmt.Sprintf("every server is held by another fault (%v)", r.busy)
}

func masterTag(i, m int) string {
	if i == m {
		return " (the master)"
	}
	return fmt.Sprintf(" (master %s)", nodeName(m))
}

func nodeName(i int) string {
	if i < 0 {
		return "unknown"
	}
	return fmt.Sprintf("n%d", i+1)
}

// master is the index of the server that says, in /status, that it serves
// as master (the greatest epoch if several do: an old master may not know
// yet), asking every server that runs and is not paused; it waits up to
// masterWait for one, and returns -1 if none.
func (r *Target) master() int {
	m := -1
	wait.Until(masterWait, func() bool {
		m = r.masterNow()
		return m >= 0
	})
	return m
}

func (r *Target) masterNow() int {
	type status struct {
		Master bool   `json:"master"`
		Epoch  uint64 `json:"epoch"`
	}
	hc := r.http
	sts := make([]status, len(r.Nodes))
	var wg sync.WaitGroup
	for i, s := range r.Nodes {
		if r.busy[i] != "" {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := hc.Get(s.URL("/status"))
			if err != nil {
				return
			}
			defer resp.Body.Close()
			json.NewDecoder(resp.Body).Decode(&sts[i])
		}()
	}
	wg.Wait()
	best := -1
	for i, st := range sts {
		if st.Master && (best < 0 || st.Epoch > sts[best].Epoch) {
			best = i
		}
	}
	return best
}
