package client

import (
	"crypto/tls"
	"errors"
	"fmt"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/chubby-dev/chubby/cache"
	"github.com/chubby-dev/chubby/session"
)

// Config configures a Client. Start from DefaultConfig, or leave fields
// zero: Dial gives every zero field DefaultConfig's value, then checks the
// result with Validate.
type Config struct {
	// Servers are RPC addresses of any servers of the cell.
	Servers []string
	// FixedServers: connect only to Servers, never to the servers the cell
	// advertises (for clients that reach the cell through proxies).
	FixedServers bool
	// TLS, for a cell with TLS: the client's certificate (its principal is
	// the certificate's common name) and RootCAs, the cell's CA. The
	// server is verified as a server of the cell: its certificate must
	// carry the role name server.CELL.chubby — of the cell named by
	// ServerName if it is set, of any cell otherwise. Nil: plain TCP.
	TLS *tls.Config
	// SessionTTL is the lease TTL to ask for (0: the cell's default; the
	// cell clamps it to its bounds).
	SessionTTL time.Duration
	// Grace is how long to keep trying after the local lease ran out
	// before giving the session up (0: DefaultGrace).
	Grace time.Duration
	// LockDelay is the lock-delay of the locks this client takes, unless
	// an acquisition names its own: if the session expires while holding a
	// lock, nobody else gets it for that long. 0 means DefaultLockDelay;
	// NoLockDelay means none. At most MaxLockDelay.
	LockDelay time.Duration
	// Cache bounds the client cache; DisableCache turns it off (every read
	// is a call to the master). A session without a cache is created so
	// (CreateSessionArgs.NoCache): the master never makes it a cacher, so
	// no write waits to invalidate it, and after a failover writes resume
	// without waiting for it to reach the new master.
	Cache        CacheConfig
	DisableCache bool
	// EventBuffer is the capacity of the Events channel (0: 256).
	EventBuffer int
	// Backoff paces every retry of the client: dialling the cell,
	// reconnecting to find a new master, and calls the master refused as
	// unavailable (0: DefaultBackoff).
	Backoff Backoff
	// Clock drives the local lease and the backoff (RealClock if nil).
	Clock session.Clock
	// Logger receives debug lines (discarded if nil).
	Logger hclog.Logger
	// Pool, if set, shares connections among the Clients dialled with it,
	// and renews their sessions together (see Pool). Nil: the Client
	// shares the process's connections (see OwnConnection).
	Pool *Pool
	// OwnConnection gives the Client connections of its own. By default
	// (false, and no Pool) the Clients of one process reach each server
	// over one connection per TLS configuration, as the sessions of one
	// etcd client share its connection: their calls and replies then
	// travel together, many to a read or write of the socket. Each Client
	// still renews its own session with a KeepAlive of its own (events
	// streamed on it), and a connection closes with the last Client using
	// it.
	OwnConnection bool
}

// Lock-delay values (Chubby §2.4). Everywhere in this package — Config.LockDelay
// and the LockDelay option — a lock-delay of 0 means "the default" and
// NoLockDelay means "none".
const (
	// NoLockDelay asks for locks without lock-delay.
	NoLockDelay time.Duration = -1
	// DefaultLockDelay is the lock-delay when none is configured.
	DefaultLockDelay = 15 * time.Second
	// MaxLockDelay is the longest lock-delay the cell grants.
	MaxLockDelay = 60 * time.Second
)

// DefaultGrace is how long a session in jeopardy keeps trying to reach the
// cell before it is given up.
const DefaultGrace = 45 * time.Second

// CacheConfig bounds the client cache.
type CacheConfig struct {
	MaxEntries int // 0: 10,000
	MaxBytes   int // 0: 64 MiB
}

// Backoff is jittered exponential backoff: attempt n waits a uniformly
// random time in [d/2, d], where d = min(Max, Base·2ⁿ); a success starts it
// over. Short, so a client finds a new master soon after it is elected;
// jittered, so a cell's clients do not arrive together.
type Backoff struct {
	Base time.Duration
	Max  time.Duration
}

// DefaultBackoff is the backoff of DefaultConfig.
var DefaultBackoff = Backoff{Base: 25 * time.Millisecond, Max: 250 * time.Millisecond}

// DefaultConfig returns the configuration Dial completes a Config with:
// every field but Servers (and SessionTTL, which is the cell's to choose).
func DefaultConfig() Config {
	return Config{
		Grace:       DefaultGrace,
		LockDelay:   DefaultLockDelay,
		Cache:       CacheConfig{MaxEntries: 10_000, MaxBytes: 64 << 20},
		EventBuffer: 256,
		Backoff:     DefaultBackoff,
		Clock:       session.RealClock{},
		Logger:      hclog.NewNullLogger(),
	}
}

// withDefaults returns cfg with every zero field taken from DefaultConfig.
func (cfg Config) withDefaults() Config {
	def := DefaultConfig()
	if cfg.Grace == 0 {
		cfg.Grace = def.Grace
	}
	if cfg.LockDelay == 0 {
		cfg.LockDelay = def.LockDelay
	}
	if cfg.Cache.MaxEntries == 0 {
		cfg.Cache.MaxEntries = def.Cache.MaxEntries
	}
	if cfg.Cache.MaxBytes == 0 {
		cfg.Cache.MaxBytes = def.Cache.MaxBytes
	}
	if cfg.EventBuffer == 0 {
		cfg.EventBuffer = def.EventBuffer
	}
	if cfg.Backoff == (Backoff{}) {
		cfg.Backoff = def.Backoff
	}
	if cfg.Clock == nil {
		cfg.Clock = def.Clock
	}
	if cfg.Logger == nil {
		cfg.Logger = def.Logger
	}
	return cfg
}

// Validate reports the first setting of cfg that Dial cannot use, naming
// it and its value. Zero values are valid: they stand for the defaults.
func (cfg Config) Validate() error {
	if len(cfg.Servers) == 0 {
		return errors.New("client: Config.Servers is empty: name at least one server of the cell")
	}
	for i, s := range cfg.Servers {
		if s == "" {
			return fmt.Errorf("client: Config.Servers[%d] is empty", i)
		}
	}
	switch {
	case cfg.SessionTTL < 0:
		return fmt.Errorf("client: Config.SessionTTL %v is negative (0: the cell's default)", cfg.SessionTTL)
	case cfg.Grace < 0:
		return fmt.Errorf("client: Config.Grace %v is negative (0: %v)", cfg.Grace, DefaultGrace)
	case cfg.LockDelay > MaxLockDelay:
		return fmt.Errorf("client: Config.LockDelay %v exceeds the maximum %v", cfg.LockDelay, MaxLockDelay)
	case cfg.LockDelay < 0 && cfg.LockDelay != NoLockDelay:
		return fmt.Errorf("client: Config.LockDelay %v is negative: use NoLockDelay for none, 0 for the default", cfg.LockDelay)
	case cfg.Cache.MaxEntries < 0:
		return fmt.Errorf("client: Config.Cache.MaxEntries %d is negative", cfg.Cache.MaxEntries)
	case cfg.Cache.MaxBytes < 0:
		return fmt.Errorf("client: Config.Cache.MaxBytes %d is negative", cfg.Cache.MaxBytes)
	case cfg.EventBuffer < 0:
		return fmt.Errorf("client: Config.EventBuffer %d is negative", cfg.EventBuffer)
	}
	return cfg.Backoff.validate()
}

func (b Backoff) validate() error {
	switch {
	case b == Backoff{}:
		return nil
	case b.Base <= 0:
		return fmt.Errorf("client: Config.Backoff.Base %v must be positive", b.Base)
	case b.Max < b.Base:
		return fmt.Errorf("client: Config.Backoff.Max %v is below Backoff.Base %v", b.Max, b.Base)
	}
	return nil
}

// cacheConfig is the cache package's form of CacheConfig.
func (c CacheConfig) cacheConfig() cache.Config {
	return cache.Config{MaxEntries: c.MaxEntries, MaxBytes: c.MaxBytes}
}

// retrier is one sequence of attempts paced by the client's Backoff.
type retrier struct {
	c  *Client
	bo session.Backoff
}

func (c *Client) newRetrier() *retrier {
	return &retrier{c: c, bo: session.Backoff{Base: c.cfg.Backoff.Base, Max: c.cfg.Backoff.Max}}
}

// newRenewalRetrier paces the KeepAlive loop's retries: the client's
// Backoff, but never waiting more than a quarter of the TTL, so that a
// session with a sub-second TTL makes several attempts within a lease (after
// a failover the new master's fresh lease lasts one TTL from its takeover).
func (c *Client) newRenewalRetrier(ttl time.Duration) *retrier {
	r := c.newRetrier()
	if q := ttl / 4; q < r.bo.Max {
		r.bo.Max = max(q, r.bo.Base)
	}
	return r
}

// next is the wait before the next attempt.
func (r *retrier) next() time.Duration {
	r.c.rngMu.Lock()
	defer r.c.rngMu.Unlock()
	return r.bo.Next(r.c.rng)
}

// reset starts the backoff over after a success.
func (r *retrier) reset() { r.bo.Reset() }

// wireLockDelay is the one translation of a lock-delay of this package's API
// into the wire's, whose -1 means "the cell's default" and 0 "none".
func wireLockDelay(d time.Duration) int64 {
	switch {
	case d < 0: // NoLockDelay
		return 0
	case d == 0:
		return -1
	}
	return int64(d)
}
