package server

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	"golang.org/x/sync/semaphore"

	"github.com/chubby-dev/chubby/fs"
	"github.com/chubby-dev/chubby/session"
)

// setDefault sets *v to def if it is the zero value.
func setDefault[T comparable](v *T, def T) {
	var zero T
	if *v == zero {
		*v = def
	}
}

// Server is one chubbyd: a raft replica of the namespace and, when it is the
// raft leader, the master that serves clients.
type Server struct {
	cfg    Config
	log    hclog.Logger
	rpcLog hclog.Logger
	clock  session.Clock
	// frames bounds the memory of large frames being read (Config.MaxFrameMemory).
	frames *semaphore.Weighted
	// expiryLog summarises expiries per interval (one line per session
	// only at debug level).
	expiryLog *logSummary

	fsm       *fsm
	raft      *raft.Raft
	store     raftStore
	transport raft.Transport
	members   *membership
	existing  bool // raft had state on disk at start
	notifyCh  chan bool

	ln  net.Listener
	tls *tlsMaterial // nil: a dev cell without TLS
	// createRate bounds the CreateSessions this master admits a second.
	createRate *tokenBucket
	httpSrv    *http.Server
	httpLn     net.Listener
	metrics    *metrics
	// load counts calls for CallLoad.
	load callLoad
	// journal keeps recent cell events for the status page; watch turns
	// raft observations into journal entries, metrics and follower health.
	journal *journal
	watch   *raftWatch
	// connSeq numbers accepted connections (conn.id).
	connSeq  atomic.Uint64
	workers  *workerPool // runs the connections' calls
	connsMu  sync.Mutex
	conns    map[*conn]struct{}
	shutdown chan struct{}
	wg       sync.WaitGroup
	closing  atomic.Bool

	// epoch is the master epoch while this server is the serving master,
	// 0 otherwise.
	epoch atomic.Uint64

	masterMu sync.Mutex // serialises becoming and ceasing to be master

	// The master's components. Each gets its inputs (clock, logger,
	// metrics, small interfaces, funcs) from New or Start, never the
	// Server.
	leases   *leaseTable
	tracker  *tracker
	watches  *watchTable
	waits    *lockWaits
	delays   *lockDelays
	stall    *stallMonitor
	backups  *backups
	proposer *proposer     // set by startRaft
	verifier *readVerifier // set by startRaft
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
	def := DefaultConfig()
	setDefault(&cfg.DefaultTTL, def.DefaultTTL)
	setDefault(&cfg.SnapshotThreshold, def.SnapshotThreshold)
	setDefault(&cfg.TrailingLogs, def.TrailingLogs)
	setDefault(&cfg.SnapshotInterval, def.SnapshotInterval)
	setDefault(&cfg.MaxConns, def.MaxConns)
	setDefault(&cfg.MaxSessions, def.MaxSessions)
	setDefault(&cfg.MaxFrameMemory, def.MaxFrameMemory)
	setDefault(&cfg.MaxWaitsPerSession, def.MaxWaitsPerSession)
	setDefault(&cfg.MaxWatchesPerSession, def.MaxWatchesPerSession)
	setDefault(&cfg.MaxSessionsPerPrincipal, def.MaxSessionsPerPrincipal)
	setDefault(&cfg.CreateSessionRate, def.CreateSessionRate)
	if cfg.HeartbeatTimeout == 0 {
		cfg.HeartbeatTimeout, cfg.ElectionTimeout, cfg.LeaderLeaseTimeout = def.HeartbeatTimeout, def.ElectionTimeout, def.LeaderLeaseTimeout
	}
	s := &Server{
		createRate: newTokenBucket(cfg.CreateSessionRate),
		cfg:        cfg,
		log:        cfg.Logger,
		rpcLog:     cfg.Logger.Named("rpc"),
		clock:      cfg.Clock,
		fsm:        newFSM(cfg.Cell),
		conns:      map[*conn]struct{}{},
		shutdown:   make(chan struct{}),
		metrics:    newMetrics(),
	}
	m := s.metrics
	s.workers = newWorkerPool(s.shutdown)
	s.frames = semaphore.NewWeighted(cfg.MaxFrameMemory)
	s.waits = newLockWaits(cfg.Clock, m.lockWait)
	s.journal = newJournal(cfg.Clock)
	s.expiryLog = newLogSummary(cfg.Logger.Named("leases"), cfg.Clock, summaryInterval)
	s.stall = &stallMonitor{clock: cfg.Clock, log: cfg.Logger.Named("stall"), done: s.shutdown}
	s.leases = newLeaseTable(cfg.Clock, cfg.Logger.Named("leases"), s.stall,
		m.lease())
	s.leases.sendOn = func(f func()) {
		// An event's sends to its sessions go out together: CallLoad
		// counts each from its start, so a fan-out overlaps.
		leave := s.load.enter()
		s.workers.run(func() {
			defer leave()
			f()
		})
	}
	s.tracker = newTracker(s.leases, cfg.Clock, cfg.Logger.Named("invalidation"), m.invalWait, m.invalWaiting, s.shutdown, cfg.NodeID)
	s.watches = newWatchTable(s.leases, m.events)
	s.watches.fills = s.admitFills
	s.delays = newLockDelays(cfg.Clock, s.grantDelayed)
	s.backups = newBackups(cfg.Clock)
	s.fsm.onApply = s.onApply
	m.reg.MustRegister(newStateCollector(func() (sum fs.LockSummary) {
		now := s.clock.Now().UnixNano()
		s.fsm.read(func(st *fs.State) { sum = st.Locks(now, 0) })
		return sum
	}, func() leaseStates { return s.leases.states(s.clock.Now()) }))
	return s, nil
}

// Start opens the raft log, joins or bootstraps the cell and starts serving
// RPC and HTTP. It returns once the listeners are bound.
func (s *Server) Start() error {
	if err := os.MkdirAll(s.cfg.DataDir, 0o755); err != nil {
		return fmt.Errorf("data-dir %s: %w", s.cfg.DataDir, err)
	}
	if s.cfg.TLS != nil {
		m, err := loadTLS(*s.cfg.TLS, s.cfg.Cell)
		if err != nil {
			return err
		}
		s.tls = m
	} else if s.cfg.Insecure {
		s.log.Warn("serving without TLS (-insecure): anyone who reaches these ports can act as any client and read everything",
			"rpc", s.cfg.RPCAddr, "raft", s.cfg.RaftAddr)
	}
	if err := s.startRaft(); err != nil {
		return err
	}
	ln, err := net.Listen("tcp", s.cfg.RPCAddr)
	if err != nil {
		s.stopRaft()
		return fmt.Errorf("rpc-addr %s: %w", s.cfg.RPCAddr, err)
	}
	if s.tls != nil {
		ln = tls.NewListener(ln, s.tls.serverConfig(false))
	}
	s.ln = ln
	if s.cfg.HTTPAddr != "" {
		if s.httpLn, err = net.Listen("tcp", s.cfg.HTTPAddr); err != nil {
			ln.Close()
			s.stopRaft()
			return fmt.Errorf("http-addr %s: %w", s.cfg.HTTPAddr, err)
		}
	}
	s.members = newMembership(s.cfg, Peer{ID: s.cfg.NodeID, RPCAddr: s.RPCAddr(), RaftAddr: string(s.transport.LocalAddr())},
		s.raft, s.log.Named("members"))
	s.members.isMaster, s.members.removed, s.members.bootstrap = s.IsMaster, s.removedServers, s.bootstrap
	s.members.httpAddr, s.members.journal = s.HTTPAddr(), s.journal
	if s.tls != nil {
		s.members.admit = s.verifyRaftPeer
	}
	if err := s.members.start(s.existing); err != nil {
		ln.Close()
		if s.httpLn != nil {
			s.httpLn.Close()
		}
		s.stopRaft()
		return err
	}
	if s.httpLn != nil {
		s.serveHTTP()
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
	if s.tls != nil && s.cfg.TLSPollInterval > 0 {
		s.wg.Add(1)
		go s.watchTLSFiles(s.cfg.TLSPollInterval)
	}
	s.log.Info("serving", "node", s.cfg.NodeID, "cell", s.cfg.Cell, "rpc", ln.Addr().String(), "raft", s.cfg.RaftAddr, "data", s.cfg.DataDir)
	return nil
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
