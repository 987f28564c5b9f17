package cell

import (
	"fmt"
	"sort"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/hashicorp/raft"
)

// Raft links of a Cluster.
//
// hashicorp/raft's InmemTransport is request/response: a.Disconnect(b)
// removes a's route to b (and closes a's pipelines to b), so a can no
// longer *start* an RPC to b, while b's RPCs to a still complete both ways —
// their replies travel on the request's own channel, not on a route. So
// Disconnect alone is not a one-way packet loss: with only a→b disconnected,
// a still answers b, and b still hears those answers.
//
// The Cluster therefore keeps a matrix of directed links and applies it in
// two places:
//   - a pair cut both ways is disconnected both ways (as Partition always
//     did): an RPC either way fails at once;
//   - a pair cut one way only stays connected, and the receiving server's
//     transport filters (linkTransport): a request from a sender whose link
//     to it is cut is dropped unanswered (the sender times out), and a
//     request from a sender that this server cannot reach is handled but
//     its reply is swallowed (the sender times out; the effect, say a vote
//     or an appended entry, stands — as when only the reply is lost).
//
// The filter also drops requests already queued when a link is cut.

// Link is the direction From → To between two servers of a Cluster.
type Link struct{ From, To int }

func (l Link) String() string { return fmt.Sprintf("node%d→node%d", l.From, l.To) }

// Cut is a set of cut links added by Cluster.Cut; Mend removes it. Cuts
// compose: a link is down while any Cut (or the Partition) cuts it.
type Cut struct {
	c      *Cluster
	links  []Link
	mended atomic.Bool
}

// Links are the links this cut cuts.
func (k *Cut) Links() []Link { return append([]Link(nil), k.links...) }

func (k *Cut) String() string {
	parts := make([]string, len(k.links))
	for i, l := range k.links {
		parts[i] = l.String()
	}
	return strings.Join(parts, " ")
}

// Mend removes the cut (idempotent). Links it shares with another active
// cut or the Partition stay down.
func (k *Cut) Mend() {
	if k.mended.Swap(true) {
		return
	}
	c := k.c
	c.mu.Lock()
	delete(c.cuts, k)
	c.relinkLocked()
	c.mu.Unlock()
}

// Cut cuts the given raft links (each in its direction only) until the
// returned Cut is mended or Heal is called. It composes with Partition,
// Isolate and other Cuts. Client↔server links are not affected.
func (c *Cluster) Cut(links ...Link) *Cut {
	k := &Cut{c: c, links: dedupLinks(links)}
	c.mu.Lock()
	c.cuts[k] = struct{}{}
	c.relinkLocked()
	c.mu.Unlock()
	return k
}

func dedupLinks(links []Link) []Link {
	seen := map[Link]bool{}
	var out []Link
	for _, l := range links {
		if l.From != l.To && !seen[l] {
			seen[l] = true
			out = append(out, l)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].From != out[j].From {
			return out[i].From < out[j].From
		}
		return out[i].To < out[j].To
	})
	return out
}

// PartitionLinks are the links, both ways, between servers of different
// groups among n servers; a server in no group is alone.
func PartitionLinks(n int, groups ...[]int) []Link {
	g := make([]int, n)
	for i := range g {
		g[i] = -1 - i
	}
	for k, members := range groups {
		for _, i := range members {
			g[i] = k
		}
	}
	var out []Link
	for i := 0; i < n; i++ {
		for j := 0; j < n; j++ {
			if i != j && g[i] != g[j] {
				out = append(out, Link{i, j})
			}
		}
	}
	return out
}

// OutLinks are the links from server i to every other of n servers.
func OutLinks(n, i int) []Link {
	var out []Link
	for j := 0; j < n; j++ {
		if j != i {
			out = append(out, Link{i, j})
		}
	}
	return out
}

// AllLinks are the links of server i with every other of n servers, both
// ways.
func AllLinks(n, i int) []Link {
	var out []Link
	for _, l := range OutLinks(n, i) {
		out = append(out, l, Link{l.To, l.From})
	}
	return out
}

// blockedLocked reports whether the link i→j is cut; c.mu is held.
func (c *Cluster) blockedLocked(i, j int) bool {
	if c.group[i] != c.group[j] {
		return true
	}
	for k := range c.cuts {
		for _, l := range k.links {
			if l.From == i && l.To == j {
				return true
			}
		}
	}
	return false
}

// relinkLocked applies the link matrix: it connects the transports of
// every pair of running servers not cut both ways, disconnects the others,
// and publishes the matrix to the transports' filters.
func (c *Cluster) relinkLocked() {
	n := len(c.nodes)
	m := make([][]bool, n)
	for i := range m {
		m[i] = make([]bool, n)
		for j := range m[i] {
			m[i][j] = i != j && c.blockedLocked(i, j)
		}
	}
	c.blocked.Store(&m)
	for i, a := range c.nodes {
		for j, b := range c.nodes {
			if i == j || a.trans == nil {
				continue
			}
			if b.trans != nil && !(m[i][j] && m[j][i]) {
				a.trans.Connect(b.addr, b.trans.InmemTransport)
			} else {
				a.trans.Disconnect(b.addr)
			}
		}
	}
}

// isBlocked reads the published matrix (no lock: the transports' filters
// call it for every RPC).
func (c *Cluster) isBlocked(i, j int) bool {
	m := c.blocked.Load()
	if m == nil || i >= len(*m) || j >= len((*m)[i]) {
		return false
	}
	return (*m)[i][j]
}

// linkTransport is a server's raft transport in a Cluster: the in-memory
// transport, whose incoming RPCs pass a filter that applies one-way cuts.
type linkTransport struct {
	*raft.InmemTransport
	c    *Cluster
	self int
	out  chan raft.RPC
	done chan struct{}
	once sync.Once
}

func newLinkTransport(c *Cluster, self int, addr raft.ServerAddress) *linkTransport {
	_, in := raft.NewInmemTransport(addr)
	l := &linkTransport{InmemTransport: in, c: c, self: self, out: make(chan raft.RPC), done: make(chan struct{})}
	go l.filter()
	return l
}

// Consumer is what raft reads incoming RPCs from: the filtered stream.
func (l *linkTransport) Consumer() <-chan raft.RPC { return l.out }

// Close stops the filter and closes the in-memory transport. raft calls it
// at shutdown; the Cluster calls it for transports it drops.
func (l *linkTransport) Close() error {
	l.once.Do(func() { close(l.done) })
	return l.InmemTransport.Close()
}

func (l *linkTransport) filter() {
	in := l.InmemTransport.Consumer()
	for {
		select {
		case rpc := <-in:
			if from := l.c.sender(rpc); from >= 0 {
				if l.c.isBlocked(from, l.self) {
					continue // lost on the way in: no reply, the sender times out
				}
				if l.c.isBlocked(l.self, from) {
					// Handled, but the reply is lost on the way out.
					rpc.RespChan = make(chan raft.RPCResponse, 1)
				}
			}
			select {
			case l.out <- rpc:
			case <-l.done:
				return
			}
		case <-l.done:
			return
		}
	}
}

// sender is the index of the server that sent rpc (-1 if unknown).
func (c *Cluster) sender(rpc raft.RPC) int {
	h, ok := rpc.Command.(raft.WithRPCHeader)
	if !ok {
		return -1
	}
	if i, ok := c.addrIndex[raft.ServerAddress(h.GetRPCHeader().Addr)]; ok {
		return i
	}
	return -1
}

// LinkCut reports whether the raft link i→j is cut now (by Partition,
// Isolate, a Cut or a Pause).
func (c *Cluster) LinkCut(i, j int) bool { return c.isBlocked(i, j) }
