package server

import (
	"errors"
	"fmt"
	"net"
	"sort"
	"time"

	"github.com/hashicorp/raft"

	"github.com/chubby-dev/chubby/fs"
)

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

	store, snaps, err := openRaftStores(s.cfg.DataDir, s.cfg.RaftLog, s.cfg.NoSync, rlog)
	if err != nil {
		return err
	}
	s.store = store
	var logStore raft.LogStore = store
	if s.cfg.WrapLogStore != nil {
		logStore = s.cfg.WrapLogStore(store)
	}
	// The proposer exists before raft: the log store reports its writes
	// to it from raft's first append.
	s.proposer = newProposer(nil, s.clock, s.metrics.applyLatency, s.metrics.batchSize)
	s.proposer.pace()
	logStore = timedLogStore{LogStore: logStore, observe: s.metrics.logStore, monotonic: isMonotonic(store), stored: s.proposer.stored}
	logs, err := raft.NewLogCache(1024, logStore)
	if err != nil {
		store.Close()
		return err
	}
	trans := s.cfg.RaftTransport
	if trans == nil {
		addr, err := net.ResolveTCPAddr("tcp", s.cfg.RaftAddr)
		if err != nil {
			store.Close()
			return fmt.Errorf("raft-addr %s: %w", s.cfg.RaftAddr, err)
		}
		tcfg := &raft.NetworkTransportConfig{
			ServerAddressProvider: routes(s.cfg.RaftRoutes, s.cfg.NodeID, addr.String()),
			Logger:                rlog,
			MaxPool:               3,
			Timeout:               10 * time.Second,
		}
		var nt *raft.NetworkTransport
		if s.tls != nil {
			var layer *tlsStreamLayer
			layer, err = newTLSStreamLayer(s.cfg.RaftAddr, addr, s.tls)
			if err == nil {
				tcfg.Stream = layer
				nt = raft.NewNetworkTransportWithConfig(tcfg)
			}
		} else {
			nt, err = raft.NewTCPTransportWithConfig(s.cfg.RaftAddr, addr, tcfg)
		}
		if err != nil {
			store.Close()
			return fmt.Errorf("raft-addr %s: %w", s.cfg.RaftAddr, err)
		}
		trans = nt
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
	s.proposer.raft = r
	s.startObserver()
	s.verifier = &readVerifier{verifyLeader: func() error { return s.awaitRaft(r.VerifyLeader()) }, serving: s.IsMaster}
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
	transportClosed := false
	if s.raft != nil {
		s.stopObserver()
		done := make(chan error, 1)
		go func() { done <- s.raft.Shutdown().Error() }()
		var err error
		select {
		case err = <-done:
		case <-time.After(raftShutdownWait):
			// raft waits for an RPC to a peer that is shutting down too and
			// waits, in turn, for an answer from this server's raft, which
			// has stopped serving: only the transport's 10 s I/O timeout
			// would end it. Closing the transport ends the RPCs both ways.
			s.log.Info("raft shutdown is waiting on a peer; closing the raft transport", "after", raftShutdownWait)
			closeTransport(s.transport)
			transportClosed = true
			err = <-done
		}
		if err != nil {
			s.log.Warn("raft shutdown", "err", err)
		}
	}
	if s.transport != nil && !transportClosed {
		closeTransport(s.transport)
	}
	if s.store != nil {
		s.store.Close()
	}
}

// raftShutdownWait is how long raft may take to shut down before the raft
// transport is closed under it (see stopRaft).
const raftShutdownWait = time.Second

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

// awaitRaft waits for a raft future, or until this server shuts down.
// raft v1.8 can leave a future unanswered for ever when Shutdown races the
// call that made it: VerifyLeader and GetConfiguration put their futures on
// buffered channels, and one that lands after raft's main loop has exited is
// never read. A caller here stops waiting when the server shuts down; the
// goroutine in raftFutureWaiter then stays blocked in raft's Error until the
// process exits (tests that check for leaked goroutines ignore it by name).
func (s *Server) awaitRaft(f raft.Future) error {
	done := make(chan error, 1)
	go raftFutureWaiter(f, done)
	select {
	case err := <-done:
		return err
	case <-s.shutdown:
		return raft.ErrRaftShutdown
	}
}

func raftFutureWaiter(f raft.Future, done chan<- error) { done <- f.Error() }
