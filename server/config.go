package server

import (
	"errors"
	"fmt"
	"net"
	"os"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"

	"github.com/chubby-dev/chubby/fs"
	"github.com/chubby-dev/chubby/session"
	"github.com/chubby-dev/chubby/wire"
)

// Config configures one chubbyd server.
type Config struct {
	NodeID     string
	Cell       string
	DataDir    string
	RPCAddr    string
	RaftAddr   string
	GossipAddr string
	HTTPAddr   string // "" disables the HTTP endpoint
	// Pprof serves net/http/pprof under /debug/pprof/ on HTTPAddr (off by
	// default: profiles reveal internals and cost CPU while taken).
	Pprof           bool
	Join            []string
	BootstrapExpect int

	// TLS, when set, puts mutual TLS on the client RPC port and the raft
	// transport (see TLSFiles). Without it the cell is a dev cell: every
	// caller is AnonymousPrincipal, and it listens only on loopback
	// addresses unless Insecure.
	TLS *TLSFiles
	// TLSPollInterval is how often the TLS files are checked for changes:
	// changed contents (written in place or renamed into place) are
	// reloaded as Server.ReloadTLS does (0: not watched; DefaultConfig:
	// DefaultTLSPollInterval).
	TLSPollInterval time.Duration
	// Insecure lets a cell without TLS listen on other than loopback
	// addresses (logged as a warning at every start).
	Insecure bool
	// Admins are the principals allowed the operator calls (backups,
	// RemoveServer) and the status page, metrics and profiles when TLS is
	// on (nil: DefaultAdmins). Without TLS every caller is anonymous and
	// may do everything.
	Admins []string
	// GossipKey, when set (16, 24 or 32 bytes), encrypts gossip
	// (memberlist); a server without the key is not admitted.
	GossipKey []byte

	// DefaultTTL is granted to sessions that ask for none.
	DefaultTTL time.Duration
	// MaxConns caps the client connections served at once (0:
	// DefaultMaxConns). A connection past it is answered
	// resource_exhausted and closed.
	MaxConns int
	// MaxSessions caps the live sessions of the cell as the master sees
	// them (0: DefaultMaxSessions). CreateSession past it fails with
	// resource_exhausted.
	MaxSessions int
	// MaxFrameMemory bounds the bytes of large frames (over 64 KiB) being
	// read from all connections at once (0: DefaultMaxFrameMemory). A
	// connection whose frame finds no room within the body timeout is
	// answered resource_exhausted and closed; smaller frames never wait.
	MaxFrameMemory int64
	// Per-session and per-principal bounds (0: the Default value): blocked
	// Acquires a session has waiting, nodes it watches, sessions one
	// principal holds (only with TLS: without it everybody is anonymous),
	// and CreateSessions per second this master admits (bursts up to as
	// many). Past one, the call fails with resource_exhausted.
	MaxWaitsPerSession      int
	MaxWatchesPerSession    int
	MaxSessionsPerPrincipal int
	CreateSessionRate       int
	// SnapshotThreshold is how many log entries trigger a snapshot (and log
	// compaction); TrailingLogs is how many entries are kept behind it so a
	// lagging follower can catch up without a snapshot.
	SnapshotThreshold uint64
	TrailingLogs      uint64
	// SnapshotInterval is how often raft checks the threshold (randomised
	// up to 2x).
	SnapshotInterval time.Duration
	// RaftLog is the raft log and stable store: RaftLogWAL (DATA/wal/, the
	// default; "" means it too) or RaftLogBolt (DATA/raft.db). A data
	// directory with a bolt log (made by a build before wal was the
	// default, or by restore) started with wal is migrated at start and its
	// raft.db kept as raft.db.migrated; one with a wal log is refused with
	// bolt.
	RaftLog string
	// NoSync turns fsync of the raft log off. Only for tests that measure
	// something else; never set by chubbyd.
	NoSync bool

	// Raft timing. A follower starts an election after HeartbeatTimeout
	// (randomised up to 2x) without hearing from the leader; the leader steps
	// down after LeaderLeaseTimeout without a quorum.
	HeartbeatTimeout   time.Duration
	ElectionTimeout    time.Duration
	LeaderLeaseTimeout time.Duration

	// StaticPeers, when set, replaces gossip: the cell is exactly these
	// servers (this one included), bootstrapped together on first start.
	// For in-process tests with an injected RaftTransport.
	StaticPeers []Peer
	// RaftTransport, when set, is used instead of TCP on RaftAddr (tests).
	RaftTransport raft.Transport
	// RaftRoutes maps a server's name to the address this server dials to
	// reach its raft transport, instead of the raft address that server
	// advertises: for a path through NAT, a tunnel or a proxy (the
	// process-level fault tests put a proxy on every link). List every
	// other server when it is used; one missing is dialled at its
	// advertised address (and raft logs a warning).
	RaftRoutes map[string]string
	// WrapLogStore, when set, wraps the raft log store (tests: a slow
	// disk). It never changes what is stored.
	WrapLogStore func(raft.LogStore) raft.LogStore

	// Clock drives leases, lock-delay and KeepAlive holds (RealClock if nil).
	Clock session.Clock
	// Logger receives the server's hclog lines (stderr if nil).
	Logger hclog.Logger
}

// DefaultAdmins are Config.Admins when none are given.
var DefaultAdmins = []string{"admin"}

// Default limits: far above what one master serves well (issue 12 aims at
// 100k sessions), far below what exhausts its memory.
const (
	DefaultMaxConns    = 20_000
	DefaultMaxSessions = 250_000

	DefaultMaxWaitsPerSession      = 1_000
	DefaultMaxWatchesPerSession    = 10_000
	DefaultMaxSessionsPerPrincipal = 20_000
	DefaultCreateSessionRate       = 20_000
	// DefaultMaxFrameMemory: 256 large frames of a megabyte in flight.
	DefaultMaxFrameMemory = 256 << 20
)

// DefaultTLSPollInterval is how often chubbyd checks its TLS files for
// changes.
const DefaultTLSPollInterval = 2 * time.Second

// Peer names a server of the cell.
type Peer struct {
	ID       string `msgpack:"id" json:"id"`
	RPCAddr  string `msgpack:"rpc" json:"rpc_addr"`
	RaftAddr string `msgpack:"raft" json:"raft_addr"`
}

// DefaultConfig returns the configuration of a bare `chubbyd`: a one-server
// cell "local" on the default loopback ports with data in ./chubby-data.
func DefaultConfig() Config {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "chubbyd"
	}
	return Config{
		NodeID:          host,
		Cell:            "local",
		DataDir:         "chubby-data",
		RPCAddr:         "127.0.0.1:7100",
		RaftAddr:        "127.0.0.1:7101",
		GossipAddr:      "127.0.0.1:7102",
		HTTPAddr:        "127.0.0.1:7180",
		BootstrapExpect: 1,
		TLSPollInterval: DefaultTLSPollInterval,
		DefaultTTL:      session.DefaultTTL,
		MaxConns:        DefaultMaxConns,
		MaxSessions:     DefaultMaxSessions,

		MaxWaitsPerSession:      DefaultMaxWaitsPerSession,
		MaxWatchesPerSession:    DefaultMaxWatchesPerSession,
		MaxSessionsPerPrincipal: DefaultMaxSessionsPerPrincipal,
		CreateSessionRate:       DefaultCreateSessionRate,
		MaxFrameMemory:          DefaultMaxFrameMemory,
		RaftLog:                 RaftLogWAL,
		SnapshotThreshold:       8192,
		TrailingLogs:            10240,
		SnapshotInterval:        30 * time.Second,
		HeartbeatTimeout:        300 * time.Millisecond,
		ElectionTimeout:         300 * time.Millisecond,
		LeaderLeaseTimeout:      150 * time.Millisecond,
	}
}

// Validate checks the configuration; its messages name the offending values.
func (c *Config) Validate() error {
	var errs []error
	if c.NodeID == "" {
		errs = append(errs, errors.New("node-id must not be empty"))
	}
	if !fs.ValidCellName(c.Cell) {
		errs = append(errs, fmt.Errorf("cell %q: use letters, digits, '-', '_' or '.'", c.Cell))
	}
	if c.DataDir == "" {
		errs = append(errs, errors.New("data-dir must not be empty"))
	}
	for _, a := range []struct{ name, v string }{{"rpc-addr", c.RPCAddr}, {"raft-addr", c.RaftAddr}, {"gossip-addr", c.GossipAddr}} {
		if _, _, err := net.SplitHostPort(a.v); err != nil {
			errs = append(errs, fmt.Errorf("%s %q: %v", a.name, a.v, err))
		}
	}
	for name, a := range c.RaftRoutes {
		if _, _, err := net.SplitHostPort(a); err != nil {
			errs = append(errs, fmt.Errorf("raft-route %s=%q: %v", name, a, err))
		}
	}
	if c.HTTPAddr != "" {
		if _, _, err := net.SplitHostPort(c.HTTPAddr); err != nil {
			errs = append(errs, fmt.Errorf("http-addr %q: %v", c.HTTPAddr, err))
		}
	}
	if c.MaxConns < 0 || c.MaxSessions < 0 {
		errs = append(errs, fmt.Errorf("max-conns %d, max-sessions %d: must not be negative (0: the default)", c.MaxConns, c.MaxSessions))
	}
	if c.MaxFrameMemory != 0 && c.MaxFrameMemory < wire.MaxFrame {
		errs = append(errs, fmt.Errorf("max-frame-memory %d: must hold one frame (%d bytes) at least", c.MaxFrameMemory, wire.MaxFrame))
	}
	if c.TLSPollInterval < 0 {
		errs = append(errs, fmt.Errorf("tls-poll-interval %v: must not be negative (0: the files are not watched)", c.TLSPollInterval))
	}
	if c.RaftLog != "" && c.RaftLog != RaftLogBolt && c.RaftLog != RaftLogWAL {
		errs = append(errs, fmt.Errorf("raft-log %q: want %q or %q", c.RaftLog, RaftLogBolt, RaftLogWAL))
	}
	if c.BootstrapExpect < 1 {
		errs = append(errs, fmt.Errorf("bootstrap-expect %d: must be at least 1", c.BootstrapExpect))
	}
	if c.BootstrapExpect > 5 {
		errs = append(errs, fmt.Errorf("bootstrap-expect %d: a cell has at most 5 voters", c.BootstrapExpect))
	}
	if c.HeartbeatTimeout != 0 && c.LeaderLeaseTimeout >= c.HeartbeatTimeout {
		errs = append(errs, fmt.Errorf("leader lease timeout %v must be shorter than the heartbeat timeout %v", c.LeaderLeaseTimeout, c.HeartbeatTimeout))
	}
	if c.TLS == nil && !c.Insecure {
		listens := []struct{ name, v string }{{"rpc-addr", c.RPCAddr}, {"http-addr", c.HTTPAddr}}
		if c.RaftTransport == nil { // an injected transport (tests) listens nowhere
			listens = append(listens, struct{ name, v string }{"raft-addr", c.RaftAddr})
		}
		if len(c.StaticPeers) == 0 { // no gossip with static peers
			listens = append(listens, struct{ name, v string }{"gossip-addr", c.GossipAddr})
		}
		for _, a := range listens {
			if a.v != "" && !isLoopback(a.v) {
				errs = append(errs, fmt.Errorf("%s %s is not a loopback address: without TLS (-tls-ca, -tls-cert, -tls-key) anyone who reaches it could act as any client; give TLS, or -insecure to serve it anyway", a.name, a.v))
			}
		}
	}
	if c.TLS != nil && (c.TLS.CA == "" || c.TLS.Cert == "" || c.TLS.Key == "") {
		errs = append(errs, errors.New("tls: give the CA, the certificate and the key (-tls-ca, -tls-cert, -tls-key) together"))
	}
	if n := len(c.GossipKey); n != 0 && n != 16 && n != 24 && n != 32 {
		errs = append(errs, fmt.Errorf("gossip key of %d bytes: must be 16, 24 or 32 (chubbyd keygen)", n))
	}
	if c.DefaultTTL != 0 && (c.DefaultTTL < session.MinTTL || c.DefaultTTL > session.MaxTTL) {
		errs = append(errs, fmt.Errorf("default TTL %v: must be within [%v, %v]", c.DefaultTTL, session.MinTTL, session.MaxTTL))
	}
	return errors.Join(errs...)
}
