package client

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/chubby-dev/chubby/cache"
	"github.com/chubby-dev/chubby/session"
	"github.com/chubby-dev/chubby/wire"
)

// cleanupTimeout bounds the calls the client makes on its own to tidy up
// (leaving a lock queue, ending a subscription, releasing, closing).
const cleanupTimeout = 5 * time.Second

// Client is one session with a cell. It is safe for concurrent use.
type Client struct {
	cfg   Config
	clock session.Clock
	log   hclog.Logger
	rng   *rand.Rand
	rngMu sync.Mutex

	mu        sync.Mutex
	known     []string // servers to try: the configured ones, then those the cell told us of
	conn      *rpcConn
	connReady chan struct{} // closed when conn is set
	master    string
	epoch     uint64
	cell      string
	id        uint64
	secret    []byte // the session's, sent with each of its calls
	principal string // who the cell says the session belongs to
	lease     *lease
	held      map[*Handle]struct{}
	closed    bool
	// expired is set when expire has run. The lease state cannot tell: Check
	// moves it to Expired by itself when the grace period ends.
	expired bool

	cache    *cache.Cache
	invalAck atomic.Uint64     // last invalidation sequence processed
	watches  map[string]uint32 // path → event mask of open handles, re-sent after failover
	watchN   map[string]int    // path → handles watching it
	callMu   sync.Mutex
	nextCall uint64
	inflight map[uint64]struct{}

	events  chan Event
	dropped atomic.Uint64
	subMu   sync.Mutex
	subs    map[uint64]func(Event) // Subscribe's callbacks
	subSeq  uint64
	waitSeq atomic.Uint64
	stop    chan struct{}
	done    chan struct{}
}

// Dial finds the master of the cell, creates a session and starts its
// KeepAlive loop. It keeps trying the servers until ctx ends. Zero fields of
// cfg take DefaultConfig's values; a cfg that fails Validate is refused.
func Dial(ctx context.Context, cfg Config) (*Client, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Pool == nil && !cfg.OwnConnection {
		cfg.Pool = processPool
	}
	c := newClient(cfg.withDefaults())
	retry := c.newRetrier()
	nonce := rand.Uint64() | 1 // math/rand/v2: seeded from the OS
	for {
		err := c.connect(ctx)
		if err == nil {
			if err = c.createSession(ctx, nonce); err == nil {
				go c.keepAliveLoop()
				return c, nil
			}
			c.dropConn(c.conn)
			if errors.Is(err, ErrResourceExhausted) { // the master refused: no retry helps soon
				return nil, fmt.Errorf("dial: %w", err)
			}
		}
		c.log.Debug("dial attempt failed", "err", err)
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("%w: no master reachable at %v: %v", wire.ErrUnavailable, cfg.Servers, err)
		case <-time.After(retry.next()):
		}
	}
}

// newClient is a Client of cfg (with its defaults) before it has a
// connection or a session.
func newClient(cfg Config) *Client {
	return &Client{
		cfg:       cfg,
		clock:     cfg.Clock,
		log:       cfg.Logger.Named("client"),
		rng:       newRand(),
		connReady: make(chan struct{}),
		known:     append([]string(nil), cfg.Servers...),
		held:      map[*Handle]struct{}{},
		inflight:  map[uint64]struct{}{},
		cache:     cache.New(cfg.Cache.cacheConfig()),
		watches:   map[string]uint32{},
		watchN:    map[string]int{},
		events:    make(chan Event, cfg.EventBuffer),
		subs:      map[uint64]func(Event){},
		stop:      make(chan struct{}),
		done:      make(chan struct{}),
	}
}

// createSession asks the master for the session (nonce makes a retry return
// the same one) and starts the local lease.
func (c *Client) createSession(ctx context.Context, nonce uint64) error {
	var rep wire.CreateSessionReply
	sentAt := c.clock.Now()
	err := c.conn.call(ctx, wire.MCreateSession, c.epoch, sessionRef{}, wire.CreateSessionArgs{TTL: int64(c.cfg.SessionTTL), Nonce: nonce, NoCache: c.cfg.DisableCache}, &rep)
	if err != nil {
		return err
	}
	c.id, c.secret, c.principal = rep.Session, rep.Secret, rep.Principal
	c.lease = newLease(sentAt, time.Duration(rep.TTL), c.cfg.Grace)
	if c.cfg.DisableCache {
		c.cache.Disable()
	}
	c.cache.SetLeaseEnd(c.lease.Expiry())
	return nil
}

// session names this client's session in its calls.
func (c *Client) session() sessionRef { return sessionRef{id: c.id, secret: c.secret} }

// newRand seeds the jitter of the client's backoff.
func newRand() *rand.Rand {
	return rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 0x2545f4914f6cdd1d))
}

// Done is closed when the session has ended (expired or closed).
func (c *Client) Done() <-chan struct{} { return c.done }

// Cell returns the cell's name; its namespace root is /ls/<cell>.
func (c *Client) Cell() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.cell
}

// CheckSequencer asks the cell whether seq is valid now.
func (c *Client) CheckSequencer(ctx context.Context, seq Sequencer) (bool, error) {
	var rep wire.CheckSequencerReply
	err := c.do(ctx, wire.MCheckSequencer, wire.CheckSequencerArgs{Seq: seq}, &rep, readCall)
	return rep.Valid, err
}

// Close ends the session at once: its locks are released (without
// lock-delay) and its ephemeral nodes deleted.
func (c *Client) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	expired := c.lease.State() == SessionExpired
	c.mu.Unlock()
	// Nothing is answered from the cache once Close has begun: the master
	// forgets the session (and sends it no invalidation) when it ends.
	c.cache.Disable()
	var err error
	if !expired {
		ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
		err = c.do(ctx, wire.MCloseSession, wire.Empty{}, nil, numberedCall)
		cancel()
		if errors.Is(err, ErrSessionExpired) {
			err = nil
		}
	}
	c.mu.Lock()
	c.closed = true
	conn := c.conn
	c.conn = nil
	c.mu.Unlock()
	close(c.stop)
	if conn != nil {
		conn.close()
	}
	<-c.done
	c.loseLocks(LostClosed)
	return err
}
