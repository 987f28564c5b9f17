package server

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"

	"github.com/chubby-dev/chubby/fs"
	"github.com/chubby-dev/chubby/session"
	"github.com/chubby-dev/chubby/wire"
)

// Server is one chubbyd: a raft replica of the namespace and, when it is the
// raft leader, the master that serves clients.
type Server struct {
	cfg    Config
	log    hclog.Logger
	rpcLog hclog.Logger
	clock  session.Clock

	fsm       *fsm
	raft      *raft.Raft
	store     *raftboltdb.BoltStore
	transport raft.Transport
	members   *membership
	existing  bool // raft had state on disk at start
	notifyCh  chan bool

	ln       net.Listener
	httpSrv  *http.Server
	httpLn   net.Listener
	metrics  *metrics
	connsMu  sync.Mutex
	conns    map[*conn]struct{}
	shutdown chan struct{}
	wg       sync.WaitGroup
	closing  atomic.Bool

	// epoch is the master epoch while this server is the serving master,
	// 0 otherwise.
	epoch atomic.Uint64

	masterMu sync.Mutex // serialises becoming and ceasing to be master
	leases   *leaseTable

	waitMu sync.Mutex
	waits  map[waitKey]chan waitResult

	delayMu sync.Mutex
	delays  map[string]session.Timer

	// The master's components. Each gets its inputs (clock, logger,
	// metrics, small interfaces) from New or Start, never the Server.
	proposer *proposer     // set by startRaft
	verifier *readVerifier // set by startRaft
	tracker  *tracker
	watches  *watchTable
	stall    *stallMonitor
}

type waitKey struct {
	session uint64
	waitID  uint64
}

type waitResult struct {
	seq fs.Sequencer
	err error
}

// New validates cfg and opens the server's storage. Start begins serving.
func New(cfg Config) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Clock == nil {
		cfg.Clock = session.RealClock{}
	}
	if cfg.Logger == nil {
		cfg.Logger = hclog.New(&hclog.LoggerOptions{Name: "chubbyd", Level: hclog.Info, Output: os.Stderr})
	}
	if cfg.DefaultTTL == 0 {
		cfg.DefaultTTL = session.DefaultTTL
	}
	def := DefaultConfig()
	if cfg.SnapshotThreshold == 0 {
		cfg.SnapshotThreshold = def.SnapshotThreshold
	}
	if cfg.TrailingLogs == 0 {
		cfg.TrailingLogs = def.TrailingLogs
	}
	if cfg.SnapshotInterval == 0 {
		cfg.SnapshotInterval = def.SnapshotInterval
	}
	if cfg.HeartbeatTimeout == 0 {
		cfg.HeartbeatTimeout, cfg.ElectionTimeout, cfg.LeaderLeaseTimeout = def.HeartbeatTimeout, def.ElectionTimeout, def.LeaderLeaseTimeout
	}
	s := &Server{
		cfg:      cfg,
		log:      cfg.Logger,
		rpcLog:   cfg.Logger.Named("rpc"),
		clock:    cfg.Clock,
		fsm:      newFSM(cfg.Cell),
		conns:    map[*conn]struct{}{},
		shutdown: make(chan struct{}),
		waits:    map[waitKey]chan waitResult{},
		delays:   map[string]session.Timer{},
		metrics:  newMetrics(),
	}
	m := s.metrics
	s.stall = &stallMonitor{clock: cfg.Clock, log: cfg.Logger.Named("stall"), done: s.shutdown}
	s.leases = newLeaseTable(cfg.Clock, cfg.Logger.Named("leases"), s.stall,
		leaseMetrics{sessions: m.sessions, keepAlives: m.keepAlives, invalidations: m.invalidations})
	s.tracker = newTracker(s.leases, cfg.Clock, cfg.Logger.Named("invalidation"), m.invalWait, s.shutdown, cfg.NodeID)
	s.watches = newWatchTable(s.leases, m.events)
	s.fsm.onApply = s.onApply
	return s, nil
}

// Start opens the raft log, joins or bootstraps the cell and starts serving
// RPC and HTTP. It returns once the listeners are bound.
func (s *Server) Start() error {
	if err := os.MkdirAll(s.cfg.DataDir, 0o755); err != nil {
		return fmt.Errorf("data-dir %s: %w", s.cfg.DataDir, err)
	}
	if err := s.startRaft(); err != nil {
		return err
	}
	ln, err := net.Listen("tcp", s.cfg.RPCAddr)
	if err != nil {
		s.stopRaft()
		return fmt.Errorf("rpc-addr %s: %w", s.cfg.RPCAddr, err)
	}
	s.ln = ln
	s.members = newMembership(s.cfg, Peer{ID: s.cfg.NodeID, RPCAddr: s.RPCAddr(), RaftAddr: string(s.transport.LocalAddr())},
		s.raft, s.log.Named("members"))
	s.members.isMaster, s.members.removed, s.members.bootstrap = s.IsMaster, s.removedServers, s.bootstrap
	if err := s.members.start(s.existing); err != nil {
		ln.Close()
		s.stopRaft()
		return err
	}
	if s.cfg.HTTPAddr != "" {
		if err := s.startHTTP(); err != nil {
			ln.Close()
			s.members.shutdown()
			s.stopRaft()
			return err
		}
	}
	if err := s.maybeBootstrap(); err != nil {
		ln.Close()
		s.members.shutdown()
		s.stopRaft()
		return err
	}
	s.members.wg.Add(1)
	go s.members.reconcileLoop()
	s.stall.start()
	s.wg.Add(2)
	go s.acceptLoop()
	go s.leadershipLoop()
	s.log.Info("serving", "node", s.cfg.NodeID, "cell", s.cfg.Cell, "rpc", ln.Addr().String(), "raft", s.cfg.RaftAddr, "data", s.cfg.DataDir)
	return nil
}

func (s *Server) startRaft() error {
	rlog := s.log.Named("raft")
	rc := raft.DefaultConfig()
	rc.LocalID = raft.ServerID(s.cfg.NodeID)
	rc.Logger = rlog
	rc.HeartbeatTimeout = s.cfg.HeartbeatTimeout
	rc.ElectionTimeout = s.cfg.ElectionTimeout
	rc.LeaderLeaseTimeout = s.cfg.LeaderLeaseTimeout
	rc.CommitTimeout = 5 * time.Millisecond
	rc.MaxAppendEntries = 256
	// No BatchApplyCh: the proposer keeps at most two entries in flight
	// anyway, and with a buffered apply channel raft may accept an entry
	// after shutdown began and never answer it (a proposer stuck forever).
	rc.BatchApplyCh = false
	rc.SnapshotThreshold = s.cfg.SnapshotThreshold
	rc.TrailingLogs = s.cfg.TrailingLogs
	rc.SnapshotInterval = s.cfg.SnapshotInterval
	s.notifyCh = make(chan bool, 16)
	rc.NotifyCh = s.notifyCh

	store, err := raftboltdb.New(raftboltdb.Options{Path: filepath.Join(s.cfg.DataDir, "raft.db"), NoSync: s.cfg.NoSync})
	if err != nil {
		return fmt.Errorf("open raft log in %s: %w", s.cfg.DataDir, err)
	}
	s.store = store
	var logStore raft.LogStore = store
	if s.cfg.WrapLogStore != nil {
		logStore = s.cfg.WrapLogStore(store)
	}
	logs, err := raft.NewLogCache(1024, logStore)
	if err != nil {
		store.Close()
		return err
	}
	snaps, err := raft.NewFileSnapshotStoreWithLogger(s.cfg.DataDir, 2, rlog)
	if err != nil {
		store.Close()
		return fmt.Errorf("snapshot store in %s: %w", s.cfg.DataDir, err)
	}
	trans := s.cfg.RaftTransport
	if trans == nil {
		addr, err := net.ResolveTCPAddr("tcp", s.cfg.RaftAddr)
		if err != nil {
			store.Close()
			return fmt.Errorf("raft-addr %s: %w", s.cfg.RaftAddr, err)
		}
		tcp, err := raft.NewTCPTransportWithConfig(s.cfg.RaftAddr, addr, &raft.NetworkTransportConfig{
			ServerAddressProvider: routes(s.cfg.RaftRoutes, s.cfg.NodeID, addr.String()),
			Logger:                rlog,
			MaxPool:               3,
			Timeout:               10 * time.Second,
		})
		if err != nil {
			store.Close()
			return fmt.Errorf("raft-addr %s: %w", s.cfg.RaftAddr, err)
		}
		trans = tcp
	}
	s.transport = trans
	existing, err := raft.HasExistingState(logs, store, snaps)
	if err != nil {
		closeTransport(trans)
		store.Close()
		return err
	}
	s.existing = existing
	r, err := raft.NewRaft(rc, s.fsm, logs, store, snaps, trans)
	if err != nil {
		closeTransport(trans)
		store.Close()
		return fmt.Errorf("start raft: %w", err)
	}
	s.raft = r
	s.proposer = newProposer(r, s.clock, s.metrics.applyLatency, s.metrics.batchSize)
	s.verifier = &readVerifier{verifyLeader: func() error { return r.VerifyLeader().Error() }, serving: s.IsMaster}
	return nil
}

func closeTransport(t raft.Transport) {
	if c, ok := t.(interface{ Close() error }); ok {
		c.Close()
	}
}

// maybeBootstrap forms a new cell when this server has no raft state: at
// once for a lone server (bootstrap-expect 1, nothing to join) or with the
// static peers; otherwise once bootstrap-expect servers have met by gossip.
// A server with state, or one joining a running cell, never bootstraps.
func (s *Server) maybeBootstrap() error {
	switch {
	case s.existing:
		return nil
	case len(s.cfg.StaticPeers) > 0:
		return s.bootstrap(s.cfg.StaticPeers)
	case s.cfg.BootstrapExpect <= 1 && len(s.cfg.Join) == 0:
		return s.bootstrap([]Peer{{ID: s.cfg.NodeID, RPCAddr: s.RPCAddr(), RaftAddr: string(s.transport.LocalAddr())}})
	}
	s.log.Info("waiting for the cell to form", "bootstrap_expect", s.cfg.BootstrapExpect, "join", s.cfg.Join)
	s.members.wg.Add(1)
	go s.members.bootstrapLoop()
	return nil
}

// bootstrap writes the first raft configuration: exactly peers, as voters.
func (s *Server) bootstrap(peers []Peer) error {
	sort.Slice(peers, func(i, j int) bool { return peers[i].ID < peers[j].ID })
	var conf raft.Configuration
	for _, p := range peers {
		conf.Servers = append(conf.Servers, raft.Server{ID: raft.ServerID(p.ID), Address: raft.ServerAddress(p.RaftAddr), Suffrage: raft.Voter})
	}
	s.log.Info("bootstrapping the cell", "servers", len(peers))
	if err := s.raft.BootstrapCluster(conf).Error(); err != nil && !errors.Is(err, raft.ErrCantBootstrap) {
		return fmt.Errorf("bootstrap: %w", err)
	}
	s.members.markBootstrapped()
	return nil
}

// removedServers returns the servers an operator removed for good.
func (s *Server) removedServers() map[string]bool {
	var out map[string]bool
	s.fsm.read(func(st *fs.State) { out = st.RemovedServers() })
	return out
}

func (s *Server) stopRaft() {
	if s.raft != nil {
		if err := s.raft.Shutdown().Error(); err != nil {
			s.log.Warn("raft shutdown", "err", err)
		}
	}
	if s.transport != nil {
		closeTransport(s.transport)
	}
	if s.store != nil {
		s.store.Close()
	}
}

// RPCAddr is the bound client address.
func (s *Server) RPCAddr() string { return s.ln.Addr().String() }

// HTTPAddr is the bound HTTP address ("" when disabled).
func (s *Server) HTTPAddr() string {
	if s.httpLn == nil {
		return ""
	}
	return s.httpLn.Addr().String()
}

// IsMaster reports whether this server is serving as master.
func (s *Server) IsMaster() bool { return s.epoch.Load() != 0 }

// Epoch returns the master epoch while serving, 0 otherwise.
func (s *Server) Epoch() uint64 { return s.epoch.Load() }

// WaitMaster blocks until this server serves as master or ctx ends.
func (s *Server) WaitMaster(ctx context.Context) error {
	t := time.NewTicker(5 * time.Millisecond)
	defer t.Stop()
	for !s.IsMaster() {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
	return nil
}

// Close shuts the server down: it stops accepting calls, ends connections
// and shuts raft down. Sessions stay in the replicated state; a restarted
// master gives each of them a fresh TTL.
func (s *Server) Close() error {
	if !s.closing.CompareAndSwap(false, true) {
		return nil
	}
	s.transferLeadership()
	close(s.shutdown)
	if s.ln != nil {
		s.ln.Close()
	}
	if s.httpSrv != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		s.httpSrv.Shutdown(ctx)
		cancel()
	}
	s.connsMu.Lock()
	for c := range s.conns {
		c.close()
	}
	s.connsMu.Unlock()
	s.revokeMaster()
	if s.members != nil {
		s.members.shutdown()
	}
	s.stopRaft()
	s.wg.Wait()
	s.log.Info("stopped", "node", s.cfg.NodeID)
	return nil
}

// transferLeadership hands raft leadership to another voter before a master
// shuts down, so the cell does not wait out an election timeout.
func (s *Server) transferLeadership() {
	if s.raft == nil || s.raft.State() != raft.Leader {
		return
	}
	cf := s.raft.GetConfiguration()
	if cf.Error() != nil {
		return
	}
	voters := 0
	for _, srv := range cf.Configuration().Servers {
		if srv.Suffrage == raft.Voter {
			voters++
		}
	}
	if voters < 2 {
		return
	}
	s.log.Info("transferring leadership before shutdown")
	if err := s.raft.LeadershipTransfer().Error(); err != nil {
		s.log.Warn("leadership transfer failed", "err", err)
	}
}

func (s *Server) acceptLoop() {
	defer s.wg.Done()
	for {
		nc, err := s.ln.Accept()
		if err != nil {
			if s.closing.Load() {
				return
			}
			s.rpcLog.Warn("accept", "err", err)
			time.Sleep(50 * time.Millisecond)
			continue
		}
		if tc, ok := nc.(*net.TCPConn); ok {
			tc.SetNoDelay(true)
			tc.SetKeepAlive(true)
		}
		c := &conn{log: s.rpcLog, badFrames: s.metrics.badFrames, dispatch: s.dispatch, done: s.dropConn,
			nc: nc, br: bufio.NewReaderSize(nc, 16<<10), closed: make(chan struct{})}
		s.connsMu.Lock()
		if s.closing.Load() {
			s.connsMu.Unlock()
			nc.Close()
			return
		}
		s.conns[c] = struct{}{}
		s.connsMu.Unlock()
		s.metrics.conns.Inc()
		go c.serve()
	}
}

func (s *Server) dropConn(c *conn) {
	s.connsMu.Lock()
	delete(s.conns, c)
	s.connsMu.Unlock()
	s.metrics.conns.Dec()
}

// leadershipLoop turns raft leadership changes into becoming and ceasing to
// be master, and the lease table's expired sessions into expiries.
func (s *Server) leadershipLoop() {
	defer s.wg.Done()
	for {
		select {
		case <-s.shutdown:
			return
		case leader := <-s.notifyCh:
			if leader {
				go s.establishMaster()
			} else {
				s.revokeMaster()
			}
		case <-s.leases.Expired():
			for _, id := range s.leases.TakeExpired() {
				go s.expireSession(id)
			}
		}
	}
}

// expireSession ends a session whose lease ran out, once this server has
// confirmed with a quorum that it is still the leader and found it did not
// stall since the session's last renewal. An expiry that cannot be made is
// abandoned and the lease timer looks again later.
func (s *Server) expireSession(id uint64) {
	if err := s.raft.VerifyLeader().Error(); err != nil {
		s.log.Warn("not expiring session: leadership not confirmed", "session", id, "err", err)
		s.leases.retryExpiry(id)
		return
	}
	if s.leases.graceAfterStall(id) {
		s.log.Warn("not expiring session: the master stalled since its last renewal", "session", id)
		return
	}
	s.log.Info("session expired", "session", id)
	res, err := s.proposeWrite(&fs.Command{Op: fs.OpEndSession, Session: id, Expired: true})
	if err != nil {
		s.log.Warn("expiring session failed", "session", id, "err", err)
		s.leases.retryExpiry(id)
		return
	}
	if res.Err != nil {
		s.leases.remove(id)
	}
	s.metrics.expired.Inc()
}

// establishMaster runs when this server becomes raft leader: it waits until
// every earlier entry is applied, starts a new epoch through the log, gives
// every session a fresh lease of its TTL (the most an earlier master could
// have granted), re-arms lock-delay timers and starts serving.
func (s *Server) establishMaster() {
	s.masterMu.Lock()
	defer s.masterMu.Unlock()
	if s.raft.State() != raft.Leader || s.closing.Load() {
		return
	}
	if err := s.raft.Barrier(10 * time.Second).Error(); err != nil {
		s.log.Warn("barrier before serving failed", "err", err)
		return
	}
	res, err := s.proposer.propose(&fs.Command{Op: fs.OpNewEpoch})
	if err != nil {
		s.log.Warn("new epoch failed", "err", err)
		return
	}
	now := s.clock.Now()
	var sessions []fs.SessionInfo
	var delayed []fs.Delayed
	s.fsm.read(func(st *fs.State) {
		sessions = st.Sessions()
		delayed = st.DelayedLocks()
	})
	s.tracker.reset()
	s.watches.reset()
	s.leases.Promote(now, sessions)
	for _, d := range delayed {
		s.armDelay(d)
	}
	s.epoch.Store(res.Epoch)
	s.metrics.epoch.Set(float64(res.Epoch))
	s.log.Info("serving as master", "epoch", res.Epoch, "sessions", len(sessions))
}

// revokeMaster stops serving: KeepAlive polls and blocked calls are failed
// so clients look for the new master.
func (s *Server) revokeMaster() {
	s.masterMu.Lock()
	defer s.masterMu.Unlock()
	if s.epoch.Swap(0) == 0 {
		return
	}
	s.log.Info("no longer master")
	s.leases.Demote()
	s.tracker.reset()
	s.watches.reset()
	s.delayMu.Lock()
	for p, t := range s.delays {
		t.Stop()
		delete(s.delays, p)
	}
	s.delayMu.Unlock()
	s.waitMu.Lock()
	for k, ch := range s.waits {
		select {
		case ch <- waitResult{err: wire.FromCode("not_master", "not the master any more")}:
		default:
		}
		delete(s.waits, k)
	}
	s.waitMu.Unlock()
}

// onApply acts on a command's effects. It runs on raft's FSM goroutine on
// every replica; the maps it touches are empty except on the master.
func (s *Server) onApply(cmd *fs.Command, res *fs.Result) {
	for _, id := range res.Ended {
		s.leases.remove(id)
		s.tracker.forget(id)
		s.watches.forget(id)
	}
	if s.IsMaster() {
		s.watches.publish(res.Changes)
	}
	if len(res.Grants) > 0 || len(res.Cancelled) > 0 {
		ended := map[uint64]bool{}
		for _, id := range res.Ended {
			ended[id] = true
		}
		s.waitMu.Lock()
		for _, g := range res.Grants {
			s.wakeLocked(waitKey{g.Session, g.WaitID}, waitResult{seq: g.Seq})
		}
		for _, c := range res.Cancelled {
			var err error
			switch {
			case ended[c.Session]:
				err = fmt.Errorf("%w: session %d ended while waiting for %s", fs.ErrSessionExpired, c.Session, c.Path)
			case cmd.Op == fs.OpCancelWait:
				err = fmt.Errorf("%w: wait for %s cancelled", fs.ErrNotHeld, c.Path)
			default:
				err = fmt.Errorf("%w: %s was deleted while waiting for its lock", fs.ErrStaleHandle, c.Path)
			}
			s.wakeLocked(waitKey{c.Session, c.WaitID}, waitResult{err: err})
		}
		s.waitMu.Unlock()
	}
	if s.IsMaster() {
		for _, d := range res.Delayed {
			s.armDelay(d)
		}
	}
}

func (s *Server) wakeLocked(k waitKey, r waitResult) {
	if ch, ok := s.waits[k]; ok {
		select {
		case ch <- r:
		default:
		}
		delete(s.waits, k)
	}
}

// armDelay schedules the grant of a lock whose lock-delay ends at d.Until.
func (s *Server) armDelay(d fs.Delayed) {
	s.delayMu.Lock()
	defer s.delayMu.Unlock()
	if _, ok := s.delays[d.Path]; ok {
		return
	}
	wait := time.Duration(d.Until - s.clock.Now().UnixNano())
	if wait < 0 {
		wait = 0
	}
	path := d.Path
	s.delays[path] = s.clock.AfterFunc(wait, func() {
		s.delayMu.Lock()
		delete(s.delays, path)
		s.delayMu.Unlock()
		if !s.IsMaster() {
			return
		}
		if _, err := s.proposeWrite(&fs.Command{Op: fs.OpGrantDelayed, Path: path}); err != nil {
			s.log.Warn("grant after lock-delay failed", "path", path, "err", err)
		}
	})
}

func sprintf(format string, args ...any) string { return fmt.Sprintf(format, args...) }

// routeTable is a raft.ServerAddressProvider over Config.RaftRoutes.
type routeTable map[string]string

// routes returns nil (dial advertised addresses) when there are none.
// Otherwise the table also maps this server (self) to its own advertised
// raft address (selfAddr): raft asks the provider for it to stamp every RPC
// header it sends (NetworkTransport.EncodePeer), and without an entry it
// would log a warning for each one — a heartbeat, an AppendEntries — and
// use that same address anyway. A route given for self is ignored: the
// header names where this server listens, not how others reach it.
func routes(m map[string]string, self, selfAddr string) raft.ServerAddressProvider {
	if len(m) == 0 {
		return nil
	}
	t := routeTable{self: selfAddr}
	for id, a := range m {
		if id != self {
			t[id] = a
		}
	}
	return t
}

func (r routeTable) ServerAddr(id raft.ServerID) (raft.ServerAddress, error) {
	if a, ok := r[string(id)]; ok {
		return raft.ServerAddress(a), nil
	}
	return "", fmt.Errorf("no raft route for server %q", id)
}
