package cell

import (
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"

	"github.com/chubby-dev/chubby/client"
	"github.com/chubby-dev/chubby/fs"
	"github.com/chubby-dev/chubby/server"
	"github.com/chubby-dev/chubby/testing/wait"
)

// WithRaftTiming sets the raft timing of every server of a Cluster (see
// server.Config: a follower campaigns after heartbeat, randomised up to 2x,
// without hearing from the leader; a leader steps down after leaderLease
// without a quorum). The default is server.DefaultConfig's.
func WithRaftTiming(heartbeat, election, leaderLease time.Duration) Option {
	return func(o *options) { o.hb, o.election, o.leaderLease = heartbeat, election, leaderLease }
}

// WithServerConfig lets a test adjust each server's configuration of a
// Cluster (or of Start's one server, index 0) before it starts (fn gets the
// server's index): for example one
// server with raft timing unlike the others'. The harness's own fields
// (addresses, data dir, peers, transport) are set again after fn runs.
func WithServerConfig(fn func(i int, cfg *server.Config)) Option {
	return func(o *options) { o.serverConfig = fn }
}

// WithSkewClocks gives every server of a Cluster its own SkewClock (see
// Cluster.SkewClock), kept across Kill and Restart, for its leases,
// KeepAlive holds and lock-delays: a test can then make one server's clock
// drift, jump or stall. Raft keeps the real clock. It replaces WithClock's
// clock (a WithServerConfig function may still set another).
func WithSkewClocks() Option { return func(o *options) { o.skew = true } }

// Cluster is a replicated cell in one process: n real server.Server
// instances, each with its own raft log (raft-boltdb on a t.TempDir(), fsync
// on) and RPC listener on a free 127.0.0.1 port, replicating over
// hashicorp/raft's in-memory transport. The servers are listed to each other
// as static peers (no gossip) and bootstrap together.
//
// The raft links between servers can be cut and healed (Partition, Isolate,
// Heal), also one way (Cut: see links.go for what InmemTransport's
// Disconnect does and does not do); a server can be killed and restarted on
// its data dir and addresses (Kill, Restart), paused as by SIGSTOP (Pause),
// have its lease clock stall (StallLeaseClock) or its disk slowed
// (SetDiskDelay). Client↔server links are cut with a Proxy per server
// (Proxy). Servers are named by their index 0..n-1.
//
// Unless WithClock or WithSkewClocks is given, every server runs on the
// real clock: leases, KeepAlive holds and lock-delays take real time.
type Cluster struct {
	t    testing.TB
	name string
	log  hclog.Logger
	opts options

	// addrIndex maps a raft address to its server's index (immutable).
	addrIndex map[raft.ServerAddress]int
	// blocked is the published link matrix: blocked[i][j] when i→j is cut.
	blocked atomic.Pointer[[][]bool]

	mu    sync.Mutex
	nodes []*clusterNode
	group []int // partition group of each server; equal groups are connected
	cuts  map[*Cut]struct{}
}

type clusterNode struct {
	cfg   server.Config
	addr  raft.ServerAddress // in-memory raft address (== cfg.RaftAddr)
	trans *linkTransport     // nil while killed
	srv   *server.Server     // nil while killed
	clock *SkewClock         // WithSkewClocks, else nil
	// diskDelay delays every raft log write (SetDiskDelay).
	diskDelay atomic.Int64
	// proxies made by Cluster.Proxy to this server, and how many pauses or
	// stalls hold them silent.
	proxies  []*Proxy
	silenced int
}

func raftAddr(i int) string {
	// The in-memory address has a host:port shape because Config.Validate
	// checks RaftAddr's syntax.
	return fmt.Sprintf("node%d.raft:%d", i, 7101)
}

// StartCluster starts an n-server cell and waits until one server serves as
// master. Everything is torn down when the test ends.
func StartCluster(t testing.TB, n int, opts ...Option) *Cluster {
	t.Helper()
	if n < 1 || n > 5 {
		t.Fatalf("cell: a cluster has 1 to 5 servers, not %d", n)
	}
	o := options{cellName: "local", level: levelFromEnv()}
	for _, f := range opts {
		f(&o)
	}
	out := newTestWriter(t)
	logger := hclog.New(&hclog.LoggerOptions{
		Name:       "chubbyd",
		Level:      o.level,
		Output:     out,
		TimeFormat: "15:04:05.000",
	})
	c := &Cluster{t: t, name: o.cellName, log: logger, opts: o, group: make([]int, n),
		cuts: map[*Cut]struct{}{}, addrIndex: map[raft.ServerAddress]int{}}
	for i := 0; i < n; i++ {
		c.addrIndex[raft.ServerAddress(raftAddr(i))] = i
	}
	// The test's temporary directory is made before closeAll is
	// registered, so its removal (registered by the first t.TempDir)
	// runs after the servers are closed: cleanups run last-registered
	// first, and a removal while servers still write their logs and
	// snapshots failed with "directory not empty" or took the segment
	// files from under a running follower, which then panicked with
	// "log not found".
	_ = t.TempDir()
	t.Cleanup(c.closeAll)

	var lastErr error
	for attempt := 0; attempt < 5; attempt++ {
		err := c.startAll(t, n)
		if err == nil {
			c.WaitMaster(t, nil)
			return c
		}
		c.closeAll()
		lastErr = err
		if !isBindError(err) {
			t.Fatalf("cell: start cluster: %v", err)
		}
		t.Logf("cell: cluster start attempt %d: %v; trying other ports", attempt+1, err)
	}
	t.Fatalf("cell: could not bind free ports: %v", lastErr)
	return nil
}

// startAll creates the servers' configurations (fresh data dirs and ports),
// connects their transports and starts them.
func (c *Cluster) startAll(t testing.TB, n int) error {
	addrs, err := freeAddrs(2 * n)
	if err != nil {
		return err
	}
	nodes := make([]*clusterNode, n)
	peers := make([]server.Peer, n)
	for i := range nodes {
		id := fmt.Sprintf("node%d", i)
		raftAddr := raftAddr(i)
		peers[i] = server.Peer{ID: id, RPCAddr: addrs[i], RaftAddr: raftAddr}
		cfg := server.Config{
			NodeID:             id,
			Cell:               c.opts.cellName,
			DataDir:            t.TempDir(),
			RPCAddr:            addrs[i],
			RaftAddr:           raftAddr,
			GossipAddr:         "127.0.0.1:0", // unused: static peers
			BootstrapExpect:    n,
			DefaultTTL:         c.opts.ttl,
			HeartbeatTimeout:   c.opts.hb,
			ElectionTimeout:    c.opts.election,
			LeaderLeaseTimeout: c.opts.leaderLease,
			Clock:              c.opts.clock,
			Logger:             c.log.Named(id),
		}
		nd := &clusterNode{addr: raft.ServerAddress(raftAddr)}
		if c.opts.skew {
			nd.clock = NewSkewClock(time.Now())
			cfg.Clock = nd.clock
		}
		if c.opts.serverConfig != nil {
			dir := cfg.DataDir
			c.opts.serverConfig(i, &cfg)
			cfg.NodeID, cfg.DataDir, cfg.RPCAddr, cfg.RaftAddr = id, dir, addrs[i], raftAddr
		}
		if c.opts.http {
			cfg.HTTPAddr = addrs[n+i]
		}
		wrap := cfg.WrapLogStore
		cfg.WrapLogStore = func(s raft.LogStore) raft.LogStore {
			if wrap != nil {
				s = wrap(s)
			}
			return &slowLogStore{LogStore: s, delay: &nd.diskDelay}
		}
		nd.cfg = cfg
		nodes[i] = nd
	}
	for _, nd := range nodes {
		nd.cfg.StaticPeers = append([]server.Peer(nil), peers...)
	}
	c.mu.Lock()
	c.nodes = nodes
	for i := range c.group {
		c.group[i] = 0
	}
	for i, nd := range nodes {
		nd.trans = newLinkTransport(c, i, nd.addr)
	}
	c.relinkLocked()
	c.mu.Unlock()
	for i, nd := range nodes {
		srv, err := c.newServer(nd)
		if err != nil {
			return fmt.Errorf("node%d: %w", i, err)
		}
		c.mu.Lock()
		nd.srv = srv
		c.mu.Unlock()
	}
	return nil
}

func (c *Cluster) newServer(nd *clusterNode) (*server.Server, error) {
	cfg := nd.cfg
	cfg.RaftTransport = nd.trans
	srv, err := server.New(cfg)
	if err != nil {
		return nil, err
	}
	if err := srv.Start(); err != nil {
		return nil, err
	}
	return srv, nil
}

// closeAll tears the cluster down. The raft links are cut first, so no
// server spends its shutdown handing leadership to a peer that is closing
// too (a TimeoutNow to a closed in-memory transport waits seconds, and its
// goroutine would outlive the test).
func (c *Cluster) closeAll() {
	c.mu.Lock()
	nodes := c.nodes
	for i := range c.group {
		c.group[i] = -1 - i
	}
	c.relinkLocked()
	c.mu.Unlock()
	var wg sync.WaitGroup
	for _, nd := range nodes {
		c.mu.Lock()
		srv := nd.srv
		nd.srv = nil
		c.mu.Unlock()
		if srv != nil {
			wg.Add(1)
			go func() {
				defer wg.Done()
				srv.Close()
			}()
		}
	}
	wg.Wait()
	// Transports no server closed (a failed start, or never used).
	c.mu.Lock()
	for _, nd := range nodes {
		if nd.trans != nil {
			nd.trans.Close()
		}
	}
	c.mu.Unlock()
}

// N is the number of servers.
func (c *Cluster) N() int { return len(c.nodes) }

// Server returns server i (nil while it is killed).
func (c *Cluster) Server(i int) *server.Server {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.nodes[i].srv
}

// ID is server i's node id (node0, node1, ...).
func (c *Cluster) ID(i int) string { return c.nodes[i].cfg.NodeID }

// Addr is server i's RPC address; it stays the same across Kill and Restart.
func (c *Cluster) Addr(i int) string { return c.nodes[i].cfg.RPCAddr }

// Addrs are the RPC addresses of every server, in index order.
func (c *Cluster) Addrs() []string {
	out := make([]string, len(c.nodes))
	for i := range c.nodes {
		out[i] = c.Addr(i)
	}
	return out
}

// HTTPAddr is server i's HTTP address ("" unless WithHTTP).
func (c *Cluster) HTTPAddr(i int) string { return c.nodes[i].cfg.HTTPAddr }

// DataDir is server i's data directory.
func (c *Cluster) DataDir(i int) string { return c.nodes[i].cfg.DataDir }

// Logger is the cluster's logger (servers log as chubbyd.node<i>).
func (c *Cluster) Logger() hclog.Logger { return c.log }

// Name is the cell name.
func (c *Cluster) Name() string { return c.name }

// Root is the cell's namespace root, /ls/<name>.
func (c *Cluster) Root() string { return fs.Root(c.name) }

// Path joins elems under the cell's root.
func (c *Cluster) Path(elems ...string) string {
	return c.Root() + "/" + strings.Join(elems, "/")
}

// Running lists the servers that are not killed.
func (c *Cluster) Running() []int {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []int
	for i, nd := range c.nodes {
		if nd.srv != nil {
			out = append(out, i)
		}
	}
	return out
}

// Masters lists the running servers that report IsMaster now. During a
// partition an isolated old master may still report it for a moment (until
// its raft leader lease runs out); it can serve nothing meanwhile.
func (c *Cluster) Masters() []int {
	var out []int
	for _, i := range c.Running() {
		if srv := c.Server(i); srv != nil && srv.IsMaster() {
			out = append(out, i)
		}
	}
	return out
}

// Master waits until exactly one running server serves as master and
// returns its index (WaitMaster among all servers).
func (c *Cluster) Master(t testing.TB) int {
	t.Helper()
	return c.WaitMaster(t, nil)
}

// WaitMaster waits until exactly one running server of among (nil: every
// server) serves as master, and returns its index. Servers outside among
// are not looked at: an isolated old master may still believe it is master.
func (c *Cluster) WaitMaster(t testing.TB, among []int) int {
	t.Helper()
	if among == nil {
		for i := range c.nodes {
			among = append(among, i)
		}
	}
	master := -1
	wait.For(t, startTimeout, fmt.Sprintf("exactly one master among %v", among), func() bool {
		master = -1
		for _, i := range among {
			srv := c.Server(i)
			if srv == nil || !srv.IsMaster() {
				continue
			}
			if master >= 0 {
				return false
			}
			master = i
		}
		return master >= 0
	})
	return master
}

// Partition cuts the raft links between servers of different groups, both
// ways, and connects servers of the same group. A server named in no group
// is isolated on its own. Client↔server links are not affected (use a
// Proxy per server for those).
func (c *Cluster) Partition(groups ...[]int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i := range c.group {
		c.group[i] = -1 - i // alone
	}
	for g, members := range groups {
		for _, i := range members {
			c.group[i] = g
		}
	}
	c.relinkLocked()
}

// Isolate cuts server i off from every other server (the others stay
// connected to each other).
func (c *Cluster) Isolate(i int) {
	var rest []int
	for j := range c.nodes {
		if j != i {
			rest = append(rest, j)
		}
	}
	c.Partition([]int{i}, rest)
}

// Heal reconnects every pair of running servers, both ways: it undoes
// Partition and mends every Cut (those of paused servers too; their clocks
// and client links stay as they are until resumed).
func (c *Cluster) Heal() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i := range c.group {
		c.group[i] = 0
	}
	for k := range c.cuts {
		k.mended.Store(true) // a later Mend does nothing
		delete(c.cuts, k)
	}
	c.relinkLocked()
}

// Kill crashes server i: its raft links are cut first (so it cannot hand its
// leadership over, as a SIGKILLed process cannot), then it is closed — its
// client connections drop. Its data dir is kept for Restart.
func (c *Cluster) Kill(t testing.TB, i int) {
	t.Helper()
	c.mu.Lock()
	c.unlinkLocked(i, true)
	c.mu.Unlock()
	c.takeServer(t, "Kill", i).Close()
}

// Stop shuts server i down gracefully (a master hands its leadership over
// first, as on SIGTERM). Its data dir is kept for Restart.
func (c *Cluster) Stop(t testing.TB, i int) {
	t.Helper()
	c.takeServer(t, "Stop", i).Close()
	c.mu.Lock()
	c.unlinkLocked(i, false)
	c.mu.Unlock()
}

// takeServer detaches running server i from the cluster for Kill or Stop
// (op) to close.
func (c *Cluster) takeServer(t testing.TB, op string, i int) *server.Server {
	t.Helper()
	c.mu.Lock()
	nd := c.nodes[i]
	srv := nd.srv
	nd.srv = nil
	c.mu.Unlock()
	if srv == nil {
		t.Fatalf("cell: %s(%d): not running", op, i)
	}
	return srv
}

// unlinkLocked drops node i's raft transport and the others' links to it;
// both: its own links to them too (a crash, not a shutdown that already
// closed them). c.mu is held.
func (c *Cluster) unlinkLocked(i int, both bool) {
	nd := c.nodes[i]
	if nd.trans == nil {
		return
	}
	for j, o := range c.nodes {
		if j != i && o.trans != nil {
			o.trans.Disconnect(nd.addr)
			if both {
				nd.trans.Disconnect(o.addr)
			}
		}
	}
	nd.trans = nil
}

// Restart starts a killed or stopped server again on its data dir, RPC
// address and raft address, with a fresh in-memory transport linked as the
// current partition says. It returns once the server is serving RPC (not
// necessarily as master).
func (c *Cluster) Restart(t testing.TB, i int) {
	t.Helper()
	c.mu.Lock()
	nd := c.nodes[i]
	running := nd.srv != nil
	c.mu.Unlock()
	if running {
		t.Fatalf("cell: Restart(%d) while it is running", i)
	}
	// The RPC port was ours a moment ago; the kernel may hold it briefly.
	// A failed start closed the transport: each attempt makes a new one.
	srv, err := retryBind(func() (*server.Server, error) {
		c.mu.Lock()
		nd.trans = newLinkTransport(c, i, nd.addr)
		c.relinkLocked()
		c.mu.Unlock()
		return c.newServer(nd)
	})
	if err != nil {
		t.Fatalf("cell: restart node%d: %v", i, err)
	}
	c.mu.Lock()
	nd.srv = srv
	c.mu.Unlock()
}

// Reconfigure changes server i's configuration for its next Restart (for
// example its raft log store); it must not be running. The harness's own
// fields (id, data dir, addresses, peers, transport) stay its own.
func (c *Cluster) Reconfigure(t testing.TB, i int, fn func(cfg *server.Config)) {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	nd := c.nodes[i]
	if nd.srv != nil {
		t.Fatalf("cell: Reconfigure(%d) while it is running", i)
	}
	cfg := nd.cfg
	fn(&cfg)
	cfg.NodeID, cfg.DataDir, cfg.RPCAddr, cfg.RaftAddr = nd.cfg.NodeID, nd.cfg.DataDir, nd.cfg.RPCAddr, nd.cfg.RaftAddr
	cfg.StaticPeers, cfg.WrapLogStore, cfg.RaftTransport = nd.cfg.StaticPeers, nd.cfg.WrapLogStore, nd.cfg.RaftTransport
	nd.cfg = cfg
}

// Applied is server i's applied raft index (0 while it is killed).
func (c *Cluster) Applied(i int) uint64 {
	srv := c.Server(i)
	if srv == nil {
		return 0
	}
	return srv.Status().Applied
}

// WaitCaughtUp waits until every running server has applied at least what
// server ref (typically the master) has applied now.
func (c *Cluster) WaitCaughtUp(t testing.TB, ref int) {
	t.Helper()
	want := c.Applied(ref)
	for _, i := range c.Running() {
		wait.For(t, startTimeout, fmt.Sprintf("node%d to apply index %d", i, want), func() bool {
			return c.Applied(i) >= want
		})
	}
}

// Dial returns a client of the cell. cfg.Servers defaults to every server's
// RPC address and cfg.Logger to the cluster's logger; the client is closed
// when the test ends.
func (c *Cluster) Dial(t testing.TB, cfg client.Config) *client.Client {
	t.Helper()
	return dial(t, cfg, c.Addrs(), c.log)
}

// Proxy starts a fault-injecting proxy to server i's RPC address (it keeps
// pointing there across Kill and Restart). The cluster remembers it as one
// of server i's client links: Pause and StallLeaseClock hold it.
func (c *Cluster) Proxy(t testing.TB, i int) *Proxy {
	t.Helper()
	return c.link(i, ProxyTo(t, c.Addr(i)))
}

// link remembers p as one of server i's client links.
func (c *Cluster) link(i int, p *Proxy) *Proxy {
	c.mu.Lock()
	nd := c.nodes[i]
	nd.proxies = append(nd.proxies, p)
	if nd.silenced > 0 {
		p.hold(true)
	}
	c.mu.Unlock()
	return p
}

// Proxies starts one proxy per server, in index order.
func (c *Cluster) Proxies(t testing.TB) []*Proxy {
	t.Helper()
	out := make([]*Proxy, len(c.nodes))
	for i := range c.nodes {
		out[i] = c.Proxy(t, i)
	}
	return out
}

// ProxyAddrs are the addresses of ps, for client.Config.Servers (with
// FixedServers, so the client never goes around them).
func ProxyAddrs(ps []*Proxy) []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = p.Addr()
	}
	return out
}

// DialRaw connects a RawConn to server i.
func (c *Cluster) DialRaw(t testing.TB, i int) *RawConn {
	t.Helper()
	return DialRawTo(t, c.Addr(i))
}

// NewRawSession creates a session of ttl on server i (which must be the
// master) over a RawConn that sends no KeepAlive unless told to.
func (c *Cluster) NewRawSession(t testing.TB, i int, ttl time.Duration) *RawConn {
	t.Helper()
	return newRawSession(t, c.Addr(i), ttl)
}
