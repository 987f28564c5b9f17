package cell

import (
	"fmt"
	"sync"
)

// Pause stops server i as SIGSTOP would, as far as the rest of the cell and
// its clients can tell: every raft link of i is cut both ways, every client
// link made with Cluster.Proxy to i is held (connections stay open and are
// accepted; frames wait, as in a stopped process's socket buffers, and
// pass in order on resume), and its lease clock (WithSkewClocks) freezes, so none
// of its lease, KeepAlive or lock-delay timers fires. The returned resume
// thaws the clock first — it jumps by the pause and the timers that fell due
// fire at once, as a process resumed by SIGCONT sees — and then lets the
// links through again. resume is idempotent.
//
// In process the server's raft keeps running on real time meanwhile: a
// paused leader steps down when its leader lease runs out (a stopped one
// would only learn of the new term on waking). Clients dialled straight to
// the server's address, not through a Proxy, are not silenced.
func (c *Cluster) Pause(i int) (resume func()) {
	cut := c.Cut(AllLinks(c.N(), i)...)
	c.silenceClients(i, true)
	clk := c.SkewClock(i)
	if clk != nil {
		clk.Freeze()
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			if clk != nil {
				clk.Unfreeze()
			}
			c.silenceClients(i, false)
			cut.Mend()
		})
	}
}

// StallLeaseClock makes server i stall for its clients while its raft runs
// on: its lease clock freezes and its client links (proxies made with
// Cluster.Proxy) are held as by Pause, so it neither answers a KeepAlive
// nor fires a lease timer. The returned resume thaws the clock — it jumps forward by the
// stall and every lease timer that fell due meanwhile fires at once, late —
// and then lets clients through again: what the lease code of a master sees
// after a stall on fsync or CPU that did not cost it its raft leadership
// (DESIGN hazard etcd #15247). It needs WithSkewClocks. resume is
// idempotent.
func (c *Cluster) StallLeaseClock(i int) (resume func()) {
	clk := c.SkewClock(i)
	if clk == nil {
		panic(fmt.Sprintf("cell: StallLeaseClock(%d) needs a cluster started WithSkewClocks", i))
	}
	c.silenceClients(i, true)
	clk.Freeze()
	var once sync.Once
	return func() {
		once.Do(func() {
			clk.Unfreeze()
			c.silenceClients(i, false)
		})
	}
}

// SkewClock is server i's lease clock when the cluster was started
// WithSkewClocks (nil otherwise); it is the same across Kill and Restart.
func (c *Cluster) SkewClock(i int) *SkewClock { return c.nodes[i].clock }

// silenceClients silences (on) or un-silences server i's proxies.
func (c *Cluster) silenceClients(i int, on bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	nd := c.nodes[i]
	if on {
		nd.silenced++
	} else if nd.silenced > 0 {
		nd.silenced--
	}
	for _, p := range nd.proxies {
		p.hold(on)
	}
}
