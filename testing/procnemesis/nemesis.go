package procnemesis

import (
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/chubby-dev/chubby/testing/netproxy"
	"github.com/chubby-dev/chubby/testing/proc"
)

// Runner plays a Schedule on a cell of chubbyd processes, their proxied
// links and the lock-client processes. It runs on the test's goroutine (it
// may fail the test) and always leaves everything healed: every link up
// and undelayed, every process running and continued.
type Runner struct {
	T       testing.TB
	Servers []*proc.Server // index i is server n<i+1>, as in Net
	Net     *Net
	Workers []*WorkerProc
	Hist    *History

	// Injected and Skipped count the steps of each kind that ran, and
	// those that found no target (every candidate busy with another fault).
	Injected, Skipped map[Kind]int

	busy    []string // per server: the fault holding it ("" free)
	wbusy   []bool   // per worker: paused
	undos   map[int]func()
	started time.Time
	seed    uint64
}

// masterWait bounds how long the runner waits to see a master before a
// step that targets it falls back to its Pick.
const masterWait = 2 * time.Second

// Run plays s. Steps start at their At after the call (later if the
// injection before them took time: a pause that waits for its worker's
// read, a restart).
func (r *Runner) Run(s Schedule) {
	t := r.T
	t.Helper()
	r.Injected, r.Skipped = map[Kind]int{}, map[Kind]int{}
	r.busy = make([]string, len(r.Servers))
	r.wbusy = make([]bool, len(r.Workers))
	r.undos = map[int]func(){}
	r.started, r.seed = time.Now(), s.Seed
	type event struct {
		at   time.Duration
		step int
		undo bool
	}
	var evs []event
	for i, st := range s.Steps {
		evs = append(evs, event{st.At, i, false}, event{st.At + st.Hold, i, true})
	}
	sort.SliceStable(evs, func(i, j int) bool {
		if evs[i].at != evs[j].at {
			return evs[i].at < evs[j].at
		}
		return evs[i].undo && !evs[j].undo
	})
	defer r.healAll()
	for _, ev := range evs {
		time.Sleep(time.Until(r.started.Add(ev.at)))
		st := s.Steps[ev.step]
		if ev.undo {
			if u := r.undos[ev.step]; u != nil {
				delete(r.undos, ev.step)
				u()
			}
			continue
		}
		at := r.Hist.Now()
		what, undo := r.inject(st)
		if undo == nil {
			r.Skipped[st.Kind]++
			t.Logf("nemesis seed %d step %d at %.2fs: %s skipped: %s", s.Seed, ev.step+1, time.Since(r.started).Seconds(), st.Kind, what)
			continue
		}
		r.Injected[st.Kind]++
		t.Logf("nemesis seed %d step %d at %.2fs: %s for %.2fs", s.Seed, ev.step+1, time.Since(r.started).Seconds(), what, st.Hold.Seconds())
		r.undos[ev.step] = func() {
			undo()
			r.Hist.Note("nemesis: "+st.Kind.String(), what, at, r.Hist.Now())
		}
	}
}

// healAll undoes every step still in force and then makes sure of it:
// every server running and continued, every worker continued, every link
// healed. After a failure (the test is ending) it only continues and heals:
// t.Cleanup kills the processes.
func (r *Runner) healAll() {
	t := r.T
	var pending []int
	for i := range r.undos {
		pending = append(pending, i)
	}
	sort.Sort(sort.Reverse(sort.IntSlice(pending)))
	failed := t.Failed()
	for _, i := range pending {
		u := r.undos[i]
		delete(r.undos, i)
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
	for _, s := range r.Servers {
		if s.Paused() {
			s.Resume(t)
		}
	}
	if failed {
		return
	}
	for _, s := range r.Servers {
		if !s.Running(t) {
			s.Launch(t)
		}
	}
}

// inject starts st and returns what it did and how to undo it; a nil undo
// means it was skipped (what says why).
func (r *Runner) inject(st Step) (string, func()) {
	t := r.T
	n := len(r.Servers)
	switch st.Kind {
	case KillServer, PauseServer:
		i, m, why := r.pickServer(st.Pick)
		if i < 0 {
			return why, nil
		}
		s := r.Servers[i]
		what := fmt.Sprintf("%s %s%s", st.Kind, s.NodeID, masterTag(i, m))
		r.busy[i] = st.Kind.String()
		if st.Kind == KillServer {
			s.Kill(t)
			return what, func() {
				s.Launch(t)
				r.busy[i] = ""
			}
		}
		s.Pause(t)
		return what, func() {
			s.Resume(t)
			r.busy[i] = ""
		}
	case PauseClient:
		if len(r.Workers) == 0 {
			return "no lock workers", nil
		}
		k := -1
		for d := range len(r.Workers) {
			if c := (st.Pick + d) % len(r.Workers); !r.wbusy[c] {
				k = c
				break
			}
		}
		if k < 0 {
			return "every lock worker is paused", nil
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
		return fmt.Sprintf("pause-client lockworker%d%s", k, aim), func() {
			w.Resume(t)
			r.wbusy[k] = false
		}
	case IsolateFollower, IsolateMaster:
		m := r.master()
		victim := m
		if st.Kind == IsolateFollower || m < 0 {
			var others []int
			for i := range n {
				if i != m {
					others = append(others, i)
				}
			}
			victim = others[st.Pick%len(others)]
		}
		id := r.Net.Contribute(r.Net.RaftLinksOf(victim), st.Mode, 0)
		return fmt.Sprintf("%s n%d%s (%s)", st.Kind, victim+1, masterTag(victim, m), st.Mode), func() { r.Net.Withdraw(id) }
	case Bridge:
		var pairs [][2]int
		for a := range n {
			for b := a + 1; b < n; b++ {
				pairs = append(pairs, [2]int{a, b})
			}
		}
		p := pairs[st.Pick%len(pairs)]
		bridge := 3 - p[0] - p[1] // n == 3
		m := r.master()
		id := r.Net.Contribute([]*netproxy.Link{r.Net.Raft[p[0]][p[1]], r.Net.Raft[p[1]][p[0]]}, st.Mode, 0)
		return fmt.Sprintf("bridge: n%d ✕ n%d, both through n%d (master %s, %s)", p[0]+1, p[1]+1, bridge+1, nodeName(m), st.Mode), func() { r.Net.Withdraw(id) }
	case OneWay:
		m := r.master()
		pairs := n * (n - 1)
		var from, to int
		if p := st.Pick % (pairs + 1); p < pairs || m < 0 {
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
		return fmt.Sprintf("one-way: n%d → n%d cut, n%d → n%d up (master %s, %s)", from+1, to+1, to+1, from+1, nodeName(m), st.Mode), func() { r.Net.Withdraw(id) }
	case DelayRaft:
		var links []*netproxy.Link
		var what string
		if p := st.Pick % (n + 1); p == n {
			links, what = r.Net.AllRaft(), "every raft link"
		} else {
			links, what = r.Net.RaftLinksOf(p), fmt.Sprintf("n%d's raft links", p+1)
		}
		id := r.Net.Contribute(links, netproxy.Pass, st.Delay)
		return fmt.Sprintf("delay-raft: %s by %v", what, st.Delay), func() { r.Net.Withdraw(id) }
	case CutClient, DelayClient:
		names := r.Net.ClientNames()
		if len(names) == 0 {
			return "no clients", nil
		}
		name := names[st.Pick%len(names)]
		links := r.Net.ClientLinks(name)
		what := "every server"
		if st.Kind == CutClient && st.Pick2%2 == 1 {
			if m := r.master(); m >= 0 {
				links, what = []*netproxy.Link{links[m]}, fmt.Sprintf("the master n%d", m+1)
			}
		}
		if st.Kind == DelayClient {
			id := r.Net.Contribute(links, netproxy.Pass, st.Delay)
			return fmt.Sprintf("delay-client: %s's links by %v", name, st.Delay), func() { r.Net.Withdraw(id) }
		}
		id := r.Net.Contribute(links, st.Mode, 0)
		return fmt.Sprintf("cut-client: %s from %s (%s)", name, what, st.Mode), func() { r.Net.Withdraw(id) }
	}
	return fmt.Sprintf("unknown kind %d", int(st.Kind)), nil
}

// pickServer resolves a server target: pick%(n+1) == n is the master of the
// moment. A server held by another process fault is passed over for the
// next free one. It returns the server, the master seen (-1: none), or -1
// and why.
func (r *Runner) pickServer(pick int) (int, int, string) {
	n := len(r.Servers)
	m := r.master()
	want := pick % (n + 1)
	if want == n {
		want = m
		if m < 0 {
			want = pick % n
		}
	}
	for d := range n {
		if i := (want + d) % n; r.busy[i] == "" {
			return i, m, ""
		}
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
func (r *Runner) master() int {
	deadline := time.Now().Add(masterWait)
	for {
		if m := r.masterNow(); m >= 0 || time.Now().After(deadline) {
			return m
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (r *Runner) masterNow() int {
	type status struct {
		Master bool   `json:"master"`
		Epoch  uint64 `json:"epoch"`
	}
	hc := &http.Client{Timeout: 500 * time.Millisecond}
	sts := make([]status, len(r.Servers))
	var wg sync.WaitGroup
	for i, s := range r.Servers {
		if r.busy[i] != "" {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := hc.Get("http://" + s.HTTPAddr + "/status")
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
