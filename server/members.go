package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/memberlist"
	"github.com/hashicorp/raft"
	"github.com/vmihailenco/msgpack/v5"
)

// maxVoters: servers past this many join the raft configuration as
// non-voters (they replicate, and can be promoted by removing a voter).
const maxVoters = 5

// membership discovers the cell's servers with memberlist gossip, decides
// when a new cell bootstraps, and keeps the address book that maps a raft
// server id to its RPC address (so any server can say where the master is).
//
// Membership changes never expire sessions and never remove a raft server by
// themselves: a server that dies stays in the raft configuration until an
// operator runs remove-server (DESIGN hazard: Consul #6793).
type membership struct {
	cfg  Config
	self Peer // this server, with its bound addresses
	log  hclog.Logger
	ml   *memberlist.Memberlist
	raft raftMembers
	// isMaster says whether this server serves as master (only the master
	// adds servers); removed returns the servers an operator removed for
	// good; bootstrap forms the cell with exactly peers.
	isMaster  func() bool
	removed   func() map[string]bool
	bootstrap func(peers []Peer) error
	// admit, if set, vets a gossip member before the master adds it to
	// the raft configuration (with TLS: its raft transport must present
	// a server certificate of the cell); a member it refuses is left out
	// and tried again at the next reconcile.
	admit func(id, raftAddr string) error
	// refused are the members admit refused, with why (logged once).
	refused map[string]string
	// httpAddr is this server's status address, gossiped so any server's
	// status page can ask the others for theirs ("" if none); journal
	// records members' gossip state changes (may be nil).
	httpAddr string
	journal  *journal

	mu           sync.Mutex
	book         map[string]*memberInfo
	meta         nodeMeta
	bootstrapped bool
	// gossip is what memberlist's event callbacks reported of each node of
	// this cell (by node name). The loops read it, never memberlist's
	// Members: those are pointers to memberlist's live records, which its
	// goroutines keep rewriting under a lock of their own (a data race);
	// the callbacks run under that lock and this copy is under mu.
	gossip map[string]gossipNode

	wake chan struct{}
	stop chan struct{}
	wg   sync.WaitGroup
}

// memberInfo is what the address book knows of a server.
type memberInfo struct {
	Peer
	Gossip string `json:"gossip_addr"`
	HTTP   string `json:"http_addr,omitempty"`
	State  string `json:"-"` // alive, suspect, dead, left; "" unknown
}

// gossipNode is a node as memberlist last reported it.
type gossipNode struct {
	meta  nodeMeta
	alive bool // joined or updated since it was last declared dead
}

// nodeMeta is gossiped with each member.
type nodeMeta struct {
	Cell         string `msgpack:"c"`
	ID           string `msgpack:"id"`
	RPC          string `msgpack:"rpc"`
	Raft         string `msgpack:"raft"`
	Expect       int    `msgpack:"x"`
	Bootstrapped bool   `msgpack:"b"`           // part of a raft configuration already
	HTTP         string `msgpack:"h,omitempty"` // status page and /status ("" if none)
}

// raftMembers is what membership needs of raft (a *raft.Raft): the
// configuration, and adding servers to it.
type raftMembers interface {
	GetConfiguration() raft.ConfigurationFuture
	AddVoter(id raft.ServerID, address raft.ServerAddress, prevIndex uint64, timeout time.Duration) raft.IndexFuture
	AddNonvoter(id raft.ServerID, address raft.ServerAddress, prevIndex uint64, timeout time.Duration) raft.IndexFuture
}

// newMembership returns the membership of server self; the caller sets
// isMaster, removed and bootstrap before start.
func newMembership(cfg Config, self Peer, r raftMembers, log hclog.Logger) *membership {
	return &membership{cfg: cfg, self: self, raft: r, log: log, book: map[string]*memberInfo{}, gossip: map[string]gossipNode{},
		wake: make(chan struct{}, 1), stop: make(chan struct{})}
}

func (m *membership) bookFile() string { return filepath.Join(m.cfg.DataDir, "members.json") }

// start loads the saved address book, starts gossip (unless the cell is
// static) and begins joining.
func (m *membership) start(existing bool) error {
	cfg := m.cfg
	self := &memberInfo{Peer: m.self, Gossip: cfg.GossipAddr, HTTP: m.httpAddr, State: "alive"}
	m.book[cfg.NodeID] = self
	m.bootstrapped = existing
	for _, p := range cfg.StaticPeers {
		if p.ID != cfg.NodeID {
			m.book[p.ID] = &memberInfo{Peer: p}
		}
	}
	var saved []memberInfo
	if b, err := os.ReadFile(m.bookFile()); err == nil {
		if err := json.Unmarshal(b, &saved); err != nil {
			m.log.Warn("ignoring unreadable address book", "file", m.bookFile(), "err", err)
		}
	}
	for i := range saved {
		if saved[i].ID != cfg.NodeID {
			if _, ok := m.book[saved[i].ID]; !ok {
				info := saved[i]
				info.State = ""
				m.book[info.ID] = &info
			}
		}
	}
	if len(cfg.StaticPeers) > 0 {
		return nil
	}
	host, portStr, err := net.SplitHostPort(cfg.GossipAddr)
	if err != nil {
		return fmt.Errorf("gossip-addr %s: %w", cfg.GossipAddr, err)
	}
	port, err := strconv.Atoi(portStr)
	if err != nil {
		return fmt.Errorf("gossip-addr %s: %w", cfg.GossipAddr, err)
	}
	m.meta = nodeMeta{Cell: cfg.Cell, ID: cfg.NodeID, RPC: self.RPCAddr, Raft: self.RaftAddr, Expect: cfg.BootstrapExpect, Bootstrapped: existing, HTTP: m.httpAddr}
	mc := memberlist.DefaultLANConfig()
	mc.Name = cfg.NodeID
	mc.BindAddr, mc.BindPort = host, port
	mc.AdvertiseAddr, mc.AdvertisePort = host, port
	mc.Delegate = &gossipDelegate{m}
	mc.Events = &gossipEvents{m}
	mc.LogOutput = m.log.StandardWriter(&hclog.StandardLoggerOptions{InferLevels: true})
	if len(cfg.GossipKey) > 0 {
		// Encrypted and authenticated gossip: a server without the key is
		// not heard (GossipVerifyIncoming and -Outgoing default to true).
		mc.SecretKey = cfg.GossipKey
	}
	ml, err := memberlist.Create(mc)
	if err != nil {
		return fmt.Errorf("gossip-addr %s: %w", cfg.GossipAddr, err)
	}
	m.ml = ml
	m.wg.Add(1)
	go m.joinLoop()
	return nil
}

// joinLoop joins the -join addresses and the saved members' gossip
// addresses, retrying until one answers.
func (m *membership) joinLoop() {
	defer m.wg.Done()
	seen := map[string]bool{m.cfg.GossipAddr: true}
	var addrs []string
	add := func(a string) {
		if a != "" && !seen[a] {
			seen[a] = true
			addrs = append(addrs, a)
		}
	}
	for _, a := range m.cfg.Join {
		add(a)
	}
	m.mu.Lock()
	for _, info := range m.book {
		add(info.Gossip)
	}
	m.mu.Unlock()
	if len(addrs) == 0 {
		return
	}
	delay := 200 * time.Millisecond
	for {
		n, err := m.ml.Join(addrs)
		if n > 0 {
			m.log.Info("joined the cell's gossip", "contacted", n)
			return
		}
		m.log.Debug("join failed; retrying", "addrs", addrs, "err", err)
		select {
		case <-m.stop:
			return
		case <-time.After(delay):
		}
		if delay < 2*time.Second {
			delay *= 2
		}
	}
}

// bootstrapLoop waits for BootstrapExpect servers of this cell and then
// bootstraps raft with exactly them. Every server of the first start does the
// same with the same set, so they form one configuration. A server that sees
// a member already in a configuration does not bootstrap: the master adds it.
func (m *membership) bootstrapLoop() {
	m.every(200*time.Millisecond, nil, m.bootstrapRound)
}

// bootstrapRound is one look of bootstrapLoop; it reports whether the loop
// is over.
func (m *membership) bootstrapRound() bool {
	if m.isBootstrapped() {
		return true
	}
	var peers []Peer
	existing := false
	for _, meta := range m.aliveMembers() {
		if meta.Bootstrapped {
			existing = true
		}
		peers = append(peers, Peer{ID: meta.ID, RPCAddr: meta.RPC, RaftAddr: meta.Raft})
	}
	if existing {
		m.log.Info("found a running cell; waiting to be added by its master")
		return true
	}
	expect := m.cfg.BootstrapExpect
	if expect <= 1 || len(peers) < expect {
		return false
	}
	if err := m.bootstrap(peers); err != nil {
		m.log.Error("bootstrap failed", "err", err)
		return false
	}
	return true
}

// every runs round each period, and whenever wake has a value, until the
// membership stops or round reports it is over. It ends m.wg's count.
func (m *membership) every(period time.Duration, wake <-chan struct{}, round func() (over bool)) {
	defer m.wg.Done()
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		select {
		case <-m.stop:
			return
		case <-t.C:
		case <-wake:
		}
		if round() {
			return
		}
	}
}

func (m *membership) isBootstrapped() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.bootstrapped
}

// markBootstrapped records that this server is part of a raft configuration
// and gossips it, so late servers join instead of bootstrapping.
func (m *membership) markBootstrapped() {
	m.mu.Lock()
	first := !m.bootstrapped
	m.bootstrapped, m.meta.Bootstrapped = true, true
	m.mu.Unlock()
	if !first || m.ml == nil {
		return
	}
	if err := m.ml.UpdateNode(time.Second); err != nil {
		m.log.Debug("gossip meta update", "err", err)
	}
}

// reconcileLoop runs on every server; on the master it adds gossip members
// missing from the raft configuration (voters up to maxVoters, then
// non-voters), skipping servers removed by an operator.
func (m *membership) reconcileLoop() {
	m.every(time.Second, m.wake, func() bool {
		if cf := m.raft.GetConfiguration(); cf.Error() == nil && len(cf.Configuration().Servers) > 0 {
			m.markBootstrapped()
		}
		if m.isMaster() && m.ml != nil {
			m.reconcile()
		}
		return false
	})
}

func (m *membership) reconcile() {
	cf := m.raft.GetConfiguration()
	if err := cf.Error(); err != nil {
		return
	}
	inConfig := map[string]bool{}
	voters := 0
	for _, srv := range cf.Configuration().Servers {
		inConfig[string(srv.ID)] = true
		if srv.Suffrage == raft.Voter {
			voters++
		}
	}
	removed := m.removed()
	for _, meta := range m.aliveMembers() {
		if inConfig[meta.ID] || removed[meta.ID] {
			continue
		}
		if m.admit != nil {
			if err := m.admit(meta.ID, meta.Raft); err != nil {
				if m.refused == nil {
					m.refused = map[string]string{}
				}
				if m.refused[meta.ID] != err.Error() {
					m.log.Warn("not adding server: it did not prove to be a server of this cell", "node", meta.ID, "raft", meta.Raft, "err", err)
				}
				m.refused[meta.ID] = err.Error()
				continue
			}
			delete(m.refused, meta.ID)
		}
		var f raft.IndexFuture
		if voters < maxVoters {
			m.log.Info("adding server as voter", "node", meta.ID, "raft", meta.Raft)
			f = m.raft.AddVoter(raft.ServerID(meta.ID), raft.ServerAddress(meta.Raft), 0, 10*time.Second)
			voters++
		} else {
			m.log.Info("adding server as non-voter", "node", meta.ID, "raft", meta.Raft)
			f = m.raft.AddNonvoter(raft.ServerID(meta.ID), raft.ServerAddress(meta.Raft), 0, 10*time.Second)
		}
		if err := f.Error(); err != nil {
			m.log.Warn("adding server failed", "node", meta.ID, "err", err)
		}
	}
}

// aliveMembers are the nodes of this cell that gossip reports alive (or
// suspect), as its event callbacks last described them.
func (m *membership) aliveMembers() []nodeMeta {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]nodeMeta, 0, len(m.gossip))
	for _, g := range m.gossip {
		if g.alive {
			out = append(out, g.meta)
		}
	}
	return out
}

func (m *membership) poke() {
	select {
	case m.wake <- struct{}{}:
	default:
	}
}

// update records a member's gossip state and persists the address book.
func (m *membership) update(n *memberlist.Node, state string) {
	meta, ok := decodeMeta(n.Meta)
	if !ok || meta.Cell != m.cfg.Cell {
		return
	}
	m.mu.Lock()
	m.gossip[n.Name] = gossipNode{meta: meta, alive: state == "alive"}
	info := m.book[meta.ID]
	if info == nil {
		info = &memberInfo{}
		m.book[meta.ID] = info
	}
	info.Peer = Peer{ID: meta.ID, RPCAddr: meta.RPC, RaftAddr: meta.Raft}
	info.Gossip = net.JoinHostPort(n.Addr.String(), strconv.Itoa(int(n.Port)))
	info.HTTP = meta.HTTP
	changed := info.State != state
	info.State = state
	m.saveLocked()
	m.mu.Unlock()
	if changed && m.journal != nil && meta.ID != m.cfg.NodeID {
		m.journal.add("member", "%s is %s (gossip)", meta.ID, state)
	}
	m.poke()
}

func (m *membership) saveLocked() {
	list := make([]memberInfo, 0, len(m.book))
	for _, info := range m.book {
		list = append(list, *info)
	}
	sort.Slice(list, func(i, j int) bool { return list[i].ID < list[j].ID })
	b, err := json.MarshalIndent(list, "", "  ")
	if err != nil {
		return
	}
	tmp := m.bookFile() + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err == nil {
		os.Rename(tmp, m.bookFile())
	}
}

// rpcAddr returns the RPC address of a server id ("" if unknown).
func (m *membership) rpcAddr(id string) string {
	m.mu.Lock()
	defer m.mu.Unlock()
	if info, ok := m.book[id]; ok {
		return info.RPCAddr
	}
	return ""
}

// snapshot returns the address book.
func (m *membership) snapshot() map[string]memberInfo {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make(map[string]memberInfo, len(m.book))
	for id, info := range m.book {
		out[id] = *info
	}
	return out
}

func (m *membership) shutdown() {
	close(m.stop)
	if m.ml != nil {
		// Shutdown, not Leave: a stopped server stays a member of the cell.
		m.ml.Shutdown()
	}
	m.wg.Wait()
}

func decodeMeta(b []byte) (nodeMeta, bool) {
	var meta nodeMeta
	if len(b) == 0 || msgpack.Unmarshal(b, &meta) != nil || meta.ID == "" {
		return meta, false
	}
	return meta, true
}

type gossipDelegate struct{ m *membership }

func (d *gossipDelegate) NodeMeta(limit int) []byte {
	d.m.mu.Lock()
	meta := d.m.meta
	d.m.mu.Unlock()
	b, err := msgpack.Marshal(&meta)
	if err != nil || len(b) > limit {
		return nil
	}
	return b
}
func (d *gossipDelegate) NotifyMsg([]byte)                           {}
func (d *gossipDelegate) GetBroadcasts(overhead, limit int) [][]byte { return nil }
func (d *gossipDelegate) LocalState(join bool) []byte                { return nil }
func (d *gossipDelegate) MergeRemoteState(buf []byte, join bool)     {}

type gossipEvents struct{ m *membership }

// memberlist calls NotifyLeave for a node it has declared dead (or that
// left; chubbyd never leaves the gossip, it shuts it down) and NotifyUpdate
// for an alive node's new metadata. The Node it passes does not carry the
// state (memberlist v0.7 keeps it in its own nodeState and never sets
// Node.State, which reads as StateAlive), so the event names it.
func (e *gossipEvents) NotifyJoin(n *memberlist.Node)   { e.m.update(n, "alive") }
func (e *gossipEvents) NotifyLeave(n *memberlist.Node)  { e.m.update(n, "dead") }
func (e *gossipEvents) NotifyUpdate(n *memberlist.Node) { e.m.update(n, "alive") }

// errNotBootstrapped: the server is waiting to form or join a cell.
var errNotBootstrapped = errors.New("this server is not part of a cell yet")
