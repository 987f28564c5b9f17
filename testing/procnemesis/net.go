package procnemesis

import (
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/chubby-dev/chubby/testing/netproxy"
)

// Net is every proxied link of a run: Raft[i][j] carries the raft
// connections server i dials to server j (i's RPCs to j and j's answers),
// Clients[name][j] the connections client name dials to server j's RPC
// address. Faults are contributions (a cut mode, a delay) to sets of links,
// held by the nemesis step that made them; a link's state is the combination
// of every contribution active on it — the most severe cut (Refuse, then
// Blackhole, then Stall) and the longest delay — so overlapping faults
// compose and undoing one leaves the others in force.
type Net struct {
	N       int
	Raft    [][]*netproxy.Link
	Clients map[string][]*netproxy.Link

	mu      sync.Mutex
	nextID  int
	active  map[int]contribution
	applied map[*netproxy.Link]linkState
}

type linkState struct {
	mode  netproxy.Mode
	delay time.Duration
}

type contribution struct {
	links []*netproxy.Link
	state linkState
}

// NewNet starts the raft links of n servers (targets set later with
// SetRaftTargets) and no client links.
func NewNet(n int) (*Net, error) {
	nt := &Net{N: n, Clients: map[string][]*netproxy.Link{}, active: map[int]contribution{}, applied: map[*netproxy.Link]linkState{}}
	nt.Raft = make([][]*netproxy.Link, n)
	for i := range n {
		nt.Raft[i] = make([]*netproxy.Link, n)
		for j := range n {
			if i == j {
				continue
			}
			l, err := netproxy.Listen(fmt.Sprintf("raft n%d→n%d", i+1, j+1), "")
			if err != nil {
				nt.Close()
				return nil, err
			}
			nt.Raft[i][j] = l
		}
	}
	return nt, nil
}

// SetRaftTargets points the links into each server j at its raft address.
func (nt *Net) SetRaftTargets(raftAddrs []string) {
	for i := range nt.N {
		for j := range nt.N {
			if i != j {
				nt.Raft[i][j].SetTarget(raftAddrs[j])
			}
		}
	}
}

// AddClient starts client name's links, one to each RPC address, and
// returns the addresses the client dials.
func (nt *Net) AddClient(name string, rpcAddrs []string) ([]string, error) {
	var ls []*netproxy.Link
	var addrs []string
	for j, a := range rpcAddrs {
		l, err := netproxy.Listen(fmt.Sprintf("%s→n%d", name, j+1), a)
		if err != nil {
			for _, l := range ls {
				l.Close()
			}
			return nil, err
		}
		ls = append(ls, l)
		addrs = append(addrs, l.Addr())
	}
	nt.mu.Lock()
	nt.Clients[name] = ls
	nt.mu.Unlock()
	return addrs, nil
}

// ClientNames are the clients with links, sorted.
func (nt *Net) ClientNames() []string {
	nt.mu.Lock()
	defer nt.mu.Unlock()
	var out []string
	for name := range nt.Clients {
		out = append(out, name)
	}
	sort.Strings(out)
	return out
}

// ClientLinks are client name's links by server.
func (nt *Net) ClientLinks(name string) []*netproxy.Link {
	nt.mu.Lock()
	defer nt.mu.Unlock()
	return nt.Clients[name]
}

// RaftLinksOf are every raft link from or to server i.
func (nt *Net) RaftLinksOf(i int) []*netproxy.Link {
	var out []*netproxy.Link
	for j := range nt.N {
		if j != i {
			out = append(out, nt.Raft[i][j], nt.Raft[j][i])
		}
	}
	return out
}

// AllRaft are every raft link.
func (nt *Net) AllRaft() []*netproxy.Link {
	var out []*netproxy.Link
	for i := range nt.N {
		for j := range nt.N {
			if i != j {
				out = append(out, nt.Raft[i][j])
			}
		}
	}
	return out
}

// Contribute adds a fault on links (a cut in mode, Pass for none, and a
// delay) and returns its id for Withdraw.
func (nt *Net) Contribute(links []*netproxy.Link, mode netproxy.Mode, delay time.Duration) int {
	nt.mu.Lock()
	defer nt.mu.Unlock()
	nt.nextID++
	nt.active[nt.nextID] = contribution{links: links, state: linkState{mode, delay}}
	nt.applyLocked()
	return nt.nextID
}

// Withdraw removes a contribution; the links it touched return to what
// the others still make them.
func (nt *Net) Withdraw(id int) {
	nt.mu.Lock()
	defer nt.mu.Unlock()
	delete(nt.active, id)
	nt.applyLocked()
}

// HealAll withdraws every contribution.
func (nt *Net) HealAll() {
	nt.mu.Lock()
	defer nt.mu.Unlock()
	nt.active = map[int]contribution{}
	nt.applyLocked()
}

// severity orders the cut modes: the most severe one active on a link wins.
func severity(m netproxy.Mode) int {
	switch m {
	case netproxy.Refuse:
		return 3
	case netproxy.Blackhole:
		return 2
	case netproxy.Stall:
		return 1
	}
	return 0
}

func (nt *Net) applyLocked() {
	want := map[*netproxy.Link]linkState{}
	for _, c := range nt.active {
		for _, l := range c.links {
			s := want[l]
			if severity(c.state.mode) > severity(s.mode) {
				s.mode = c.state.mode
			}
			s.delay = max(s.delay, c.state.delay)
			want[l] = s
		}
	}
	for l := range nt.applied {
		if _, ok := want[l]; !ok {
			want[l] = linkState{}
		}
	}
	for l, s := range want {
		if nt.applied[l] != s {
			l.Set(s.mode, s.delay)
		}
		if s == (linkState{}) {
			delete(nt.applied, l)
		} else {
			nt.applied[l] = s
		}
	}
}

// Close closes every link.
func (nt *Net) Close() {
	for _, row := range nt.Raft {
		for _, l := range row {
			if l != nil {
				l.Close()
			}
		}
	}
	nt.mu.Lock()
	defer nt.mu.Unlock()
	for _, ls := range nt.Clients {
		for _, l := range ls {
			l.Close()
		}
	}
}
