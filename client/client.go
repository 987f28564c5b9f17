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

// Config configures a Client.
type Config struct {
	// Servers are RPC addresses of any servers of the cell.
	Servers []string
	// FixedServers: connect only to Servers, never to the servers the cell
	// advertises (for clients that reach the cell through proxies).
	FixedServers bool
	// SessionTTL is the lease TTL to ask for (0: the cell's default).
	SessionTTL time.Duration
	// Grace is how long to keep trying after the local lease ran out
	// before giving the session up (0: 45 s).
	Grace time.Duration
	// LockDelay is the default lock-delay of locks this client takes
	// (0: 15 s; use NoLockDelay for none).
	LockDelay time.Duration
	// Cache bounds the client cache; DisableCache turns it off (every read
	// is a call to the master).
	Cache        cache.Config
	DisableCache bool
	// EventBuffer is the capacity of the Events channel (0: 256).
	EventBuffer int
	// Clock drives the local lease (RealClock if nil).
	Clock session.Clock
	// Logger receives debug lines (discarded if nil).
	Logger hclog.Logger
}

// NoLockDelay asks for locks without lock-delay.
const NoLockDelay time.Duration = -1

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
	lease     *session.Lease
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
	waitSeq atomic.Uint64
	stop    chan struct{}
	done    chan struct{}
}

// Dial finds the master of the cell, creates a session and starts its
// KeepAlive loop. It keeps trying the servers until ctx ends.
func Dial(ctx context.Context, cfg Config) (*Client, error) {
	if len(cfg.Servers) == 0 {
		return nil, errors.New("client: no servers given")
	}
	if cfg.Clock == nil {
		cfg.Clock = session.RealClock{}
	}
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	if cfg.EventBuffer <= 0 {
		cfg.EventBuffer = 256
	}
	if cfg.Grace <= 0 {
		cfg.Grace = session.DefaultGrace
	}
	c := &Client{
		cfg:       cfg,
		clock:     cfg.Clock,
		log:       cfg.Logger.Named("client"),
		rng:       rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 0x2545f4914f6cdd1d)),
		connReady: make(chan struct{}),
		known:     append([]string(nil), cfg.Servers...),
		held:      map[*Handle]struct{}{},
		inflight:  map[uint64]struct{}{},
		cache:     cache.New(cfg.Cache),
		watches:   map[string]uint32{},
		watchN:    map[string]int{},
		events:    make(chan Event, cfg.EventBuffer),
		stop:      make(chan struct{}),
		done:      make(chan struct{}),
	}
	bo := session.Backoff{Base: 50 * time.Millisecond, Max: time.Second}
	nonce := rand.Uint64() | 1 // math/rand/v2: seeded from the OS
	for {
		err := c.connect(ctx)
		if err == nil {
			var rep wire.CreateSessionReply
			sentAt := c.clock.Now()
			err = c.conn.call(ctx, wire.MCreateSession, c.epoch, 0, wire.CreateSessionArgs{TTL: int64(cfg.SessionTTL), Nonce: nonce}, &rep)
			if err == nil {
				c.id = rep.Session
				c.lease = session.NewLease(sentAt, time.Duration(rep.TTL), cfg.Grace)
				if cfg.DisableCache {
					c.cache.Disable()
				}
				c.cache.SetLeaseEnd(c.lease.Expiry())
				go c.keepAliveLoop()
				return c, nil
			}
			c.dropConn(c.conn)
		}
		c.log.Debug("dial attempt failed", "err", err)
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("%w: no master reachable at %v: %v", wire.ErrUnavailable, cfg.Servers, err)
		case <-time.After(c.backoff(&bo)):
		}
	}
}

func (c *Client) backoff(b *session.Backoff) time.Duration {
	c.rngMu.Lock()
	defer c.rngMu.Unlock()
	return b.Next(c.rng)
}

// connect finds the master and installs a connection to it, trying every
// known server once.
func (c *Client) connect(ctx context.Context) error {
	c.mu.Lock()
	servers := append([]string(nil), c.known...)
	c.mu.Unlock()
	m, err := c.findMaster(ctx, servers)
	if err != nil {
		var hinted []string
		for _, h := range m.hints {
			if !contains(servers, h) {
				hinted = append(hinted, h)
			}
		}
		if len(hinted) == 0 || c.cfg.FixedServers {
			return err
		}
		if m, err = c.findMaster(ctx, hinted); err != nil {
			return err
		}
	}
	conn, addr, hello := m.conn, m.addr, m.hello
	{
		c.mu.Lock()
		if c.conn != nil {
			c.conn.close()
		}
		failover := c.epoch != 0 && c.epoch != hello.Epoch
		if failover {
			// Before any call uses the new master: nothing cached under
			// the old one may be served, and the new master's invalidation
			// numbers start afresh.
			c.cache.Flush()
			c.invalAck.Store(0)
		}
		c.conn, c.master, c.epoch, c.cell = conn, addr, hello.Epoch, hello.Cell
		select {
		case <-c.connReady:
		default:
			close(c.connReady)
		}
		c.mu.Unlock()
		if failover {
			c.emit(Event{Type: EventMasterFailover})
			go c.resubscribe()
		}
		return nil
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// probeResult is one server's answer to Hello.
type probeResult struct {
	addr  string
	conn  *rpcConn
	hello wire.HelloReply
	err   error
}

// found is the outcome of findMaster: the master's connection, or the
// masters the servers pointed to.
type found struct {
	addr  string
	conn  *rpcConn
	hello wire.HelloReply
	hints []string
}

// findMaster asks every server at once who the master is and keeps the
// connection of the first that is. A stopped or unreachable server costs no
// more than the slowest answer of the others (at most the 2 s probe
// timeout), whatever its place in the list.
func (c *Client) findMaster(ctx context.Context, servers []string) (found, error) {
	pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	results := make(chan probeResult, len(servers))
	for _, addr := range servers {
		go func(addr string) {
			r := probeResult{addr: addr}
			r.conn, r.err = dialConn(pctx, addr)
			if r.err == nil {
				r.err = r.conn.call(pctx, wire.MHello, 0, 0, wire.HelloArgs{}, &r.hello)
				if r.err != nil {
					r.conn.close()
					r.conn = nil
				}
			}
			results <- r
		}(addr)
	}
	var out found
	var lastErr error = errors.New("no servers")
	pending := len(servers)
	for pending > 0 {
		r := <-results
		pending--
		if r.err != nil {
			lastErr = fmt.Errorf("%s: %w", r.addr, r.err)
			continue
		}
		c.learn(r.hello.Servers)
		if r.hello.IsMaster && out.conn == nil {
			out.addr, out.conn, out.hello = r.addr, r.conn, r.hello
			break
		}
		r.conn.close()
		lastErr = fmt.Errorf("%s (%s) is not the master", r.addr, r.hello.Node)
		if r.hello.Master != "" && !contains(out.hints, r.hello.Master) {
			out.hints = append(out.hints, r.hello.Master)
		}
	}
	if pending > 0 {
		// Close the connections of the probes still running.
		go func(n int) {
			for ; n > 0; n-- {
				if r := <-results; r.conn != nil {
					r.conn.close()
				}
			}
		}(pending)
	}
	if out.conn == nil {
		return out, lastErr
	}
	return out, nil
}

// resubscribe re-sends the event subscriptions of open handles to a new
// master (which starts with none).
func (c *Client) resubscribe() {
	c.mu.Lock()
	subs := make(map[string]uint32, len(c.watches))
	for p, m := range c.watches {
		subs[p] = m
	}
	c.mu.Unlock()
	for p, m := range subs {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		var rep wire.StatReply
		if err := c.do(ctx, wire.MOpen, wire.OpenArgs{Path: p, Events: m}, &rep, readCall); err != nil {
			c.log.Debug("re-subscribing after failover", "path", p, "err", err)
		}
		cancel()
	}
}

// learn adds servers a Hello told us of to the ones tried on reconnect.
func (c *Client) learn(servers []string) {
	if c.cfg.FixedServers {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, s := range servers {
		found := false
		for _, k := range c.known {
			found = found || k == s
		}
		if !found {
			c.known = append(c.known, s)
		}
	}
}

// current returns the connection to the master, waiting while the KeepAlive
// loop reconnects.
func (c *Client) current(ctx context.Context) (*rpcConn, uint64, error) {
	for {
		c.mu.Lock()
		if c.closed {
			c.mu.Unlock()
			return nil, 0, ErrClosed
		}
		if c.lease.State() == session.Expired {
			c.mu.Unlock()
			return nil, 0, fmt.Errorf("%w: session %d", ErrSessionExpired, c.id)
		}
		conn, epoch, ready := c.conn, c.epoch, c.connReady
		c.mu.Unlock()
		if conn != nil {
			return conn, epoch, nil
		}
		select {
		case <-ready:
		case <-c.done:
		case <-ctx.Done():
			return nil, 0, ctx.Err()
		}
	}
}

// dropConn forgets a failed connection so the KeepAlive loop reconnects.
func (c *Client) dropConn(conn *rpcConn) {
	c.mu.Lock()
	if c.conn == conn {
		c.conn = nil
		c.connReady = make(chan struct{})
	}
	c.mu.Unlock()
	conn.close()
}

// retryable: the call was refused before it was applied (or the connection
// failed) and may be retried on the master once found.
func retryable(err error) bool {
	return errors.Is(err, wire.ErrNotMaster) || errors.Is(err, wire.ErrWrongEpoch) || errors.Is(err, errConnLost)
}

// beginCall numbers a mutating call; endCall marks its reply received.
// The acknowledged mark sent with each call is the lowest number still
// waiting for a reply: the master may forget every result below it.
func (c *Client) beginCall() uint64 {
	c.callMu.Lock()
	defer c.callMu.Unlock()
	c.nextCall++
	c.inflight[c.nextCall] = struct{}{}
	return c.nextCall
}

func (c *Client) endCall(id uint64) {
	c.callMu.Lock()
	delete(c.inflight, id)
	c.callMu.Unlock()
}

func (c *Client) acked() uint64 {
	c.callMu.Lock()
	defer c.callMu.Unlock()
	low := c.nextCall + 1
	for id := range c.inflight {
		if id < low {
			low = id
		}
	}
	return low
}

// Call kinds for do.
const (
	readCall     = false // no state change: safe to repeat
	numberedCall = true  // a state change, deduplicated by its call number
)

// do runs a call on the master and retries it through connection loss and
// failover until it is answered, ctx ends or the session expires. A
// numbered call keeps its number across retries, so the master applies it
// at most once and answers a retry with the first result.
func (c *Client) do(ctx context.Context, m wire.Method, args, reply any, numbered bool) error {
	var callID uint64
	if numbered {
		callID = c.beginCall()
		defer c.endCall(callID)
	}
	bo := session.Backoff{Base: 20 * time.Millisecond, Max: time.Second}
	for {
		conn, epoch, err := c.current(ctx)
		if err != nil {
			return err
		}
		var acked uint64
		if numbered {
			acked = c.acked()
		}
		err = conn.callNumbered(ctx, m, epoch, c.id, callID, acked, args, reply)
		unavailable := errors.Is(err, ErrUnavailable) // e.g. the master shutting down mid-apply
		if err == nil || !(retryable(err) || unavailable) {
			if errors.Is(err, ErrSessionExpired) {
				c.expire()
			}
			return err
		}
		c.dropConn(conn)
		if unavailable {
			t := c.clock.NewTimer(c.backoff(&bo))
			select {
			case <-t.C():
			case <-ctx.Done():
				t.Stop()
				return err
			}
		}
	}
}

// keepAliveLoop renews the lease: a KeepAlive is always parked on the
// master, which answers it after about a third of the TTL. When no renewal
// arrives before the local lease ends the session is in jeopardy; the loop
// keeps reconnecting (with jittered backoff) until the grace period ends.
func (c *Client) keepAliveLoop() {
	defer close(c.done)
	// Reconnection backoff: short, so a client finds a new master soon after
	// it is elected; jittered, so a cell's clients do not arrive together.
	bo := session.Backoff{Base: 25 * time.Millisecond, Max: 250 * time.Millisecond}
	type result struct {
		sentAt time.Time
		rep    wire.KeepAliveReply
		err    error
		conn   *rpcConn
	}
	results := make(chan result, 1)
	inflight := false
	var kaConn *rpcConn // the connection of the KeepAlive in flight
	// urgent: ask the master to answer at once (fresh connection or
	// jeopardy) rather than hold the poll for a third of the TTL.
	urgent := false
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for {
		if !inflight {
			c.mu.Lock()
			conn, epoch := c.conn, c.epoch
			c.mu.Unlock()
			if conn == nil {
				if err := c.connect(ctx); err != nil {
					c.log.Debug("reconnect failed", "err", err)
					if !c.sleep(c.backoff(&bo)) {
						return
					}
					continue
				}
				urgent = true
				continue
			}
			inflight, kaConn = true, conn
			sentAt := c.clock.Now()
			c.mu.Lock()
			args := wire.KeepAliveArgs{Urgent: urgent || c.lease.State() != session.Safe, AckInval: c.invalAck.Load()}
			c.mu.Unlock()
			go func() {
				var rep wire.KeepAliveReply
				err := conn.call(ctx, wire.MKeepAlive, epoch, c.id, args, &rep)
				results <- result{sentAt, rep, err, conn}
			}()
		}
		c.mu.Lock()
		wake := c.lease.Expiry()
		if c.lease.State() != session.Safe {
			wake = c.lease.GraceEnd()
		}
		c.mu.Unlock()
		if !wake.After(c.clock.Now()) {
			// The deadline passed while the loop was busy (reconnecting):
			// act on it now rather than through a timer armed in the past.
			if c.checkLease() == session.Expired {
				return
			}
			continue
		}
		timer := c.clock.NewTimer(wake.Sub(c.clock.Now()))
		select {
		case r := <-results:
			timer.Stop()
			inflight = false
			switch {
			case r.err == nil:
				bo.Reset()
				urgent = false
				// Invalidations first: the renewed lease below must not
				// make a dropped entry servable again.
				if len(r.rep.Invalidations) > 0 {
					c.cache.Invalidate(r.rep.Invalidations...)
				}
				c.invalAck.Store(r.rep.InvalSeq)
				for _, ev := range r.rep.Events {
					if ev.Type == wire.EventHandleInvalid {
						// The node is gone; so is the master's subscription.
						c.mu.Lock()
						delete(c.watches, ev.Path)
						c.mu.Unlock()
					}
					c.emit(Event{Type: EventType(ev.Type), Path: ev.Path})
				}
				if r.rep.Dropped > 0 {
					c.dropped.Add(r.rep.Dropped)
					c.log.Warn("the master dropped events for this session: its queue was full", "dropped", r.rep.Dropped)
				}
				c.mu.Lock()
				before := c.lease.Renewed(r.sentAt, time.Duration(r.rep.TTL))
				c.cache.SetLeaseEnd(c.lease.Expiry())
				c.mu.Unlock()
				if before == session.Jeopardy {
					if !c.cfg.DisableCache {
						c.cache.Enable()
					}
					c.emit(Event{Type: EventSafe})
				}
			case errors.Is(r.err, ErrSessionExpired):
				c.expire()
				return
			default:
				c.log.Debug("keepalive failed", "err", r.err)
				c.dropConn(r.conn)
				if c.checkLease() == session.Expired {
					return
				}
				if !c.sleep(c.backoff(&bo)) {
					return
				}
			}
		case <-timer.C():
			st := c.checkLease()
			if st == session.Expired {
				return
			}
			if st == session.Jeopardy && inflight {
				// No answer for a whole lease, yet the connection is up
				// (a paused master, or a partition that drops packets):
				// give it up and look for the master among every server
				// for the grace period, instead of waiting on it.
				c.dropConn(kaConn)
			}
		case <-c.stop:
			timer.Stop()
			return
		}
	}
}

// sleep waits d on the client's clock, or less: it wakes at the end of the
// local lease (in jeopardy, of the grace period), so that jeopardy — and with
// it the lock-lost signal — and expiry are acted on the moment they happen,
// not a backoff later. It returns false if the client is stopping or the
// session has expired.
func (c *Client) sleep(d time.Duration) bool {
	select {
	case <-c.stop:
		return false
	default:
	}
	c.mu.Lock()
	deadline := c.lease.Expiry()
	if c.lease.State() != session.Safe {
		deadline = c.lease.GraceEnd()
	}
	c.mu.Unlock()
	if left := deadline.Sub(c.clock.Now()); left < d {
		d = left
	}
	if d > 0 {
		t := c.clock.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C():
		case <-c.stop:
			return false
		}
	}
	return c.checkLease() != session.Expired
}

// checkLease advances the lease state for now, emitting jeopardy (and
// signalling lock loss) or expiry.
func (c *Client) checkLease() session.State {
	c.mu.Lock()
	before := c.lease.State()
	after := c.lease.Check(c.clock.Now())
	c.mu.Unlock()
	if before == session.Safe && after != session.Safe {
		c.cache.Disable()
		c.loseLocks()
		c.emit(Event{Type: EventJeopardy})
	}
	if after == session.Expired && before != session.Expired {
		c.expire()
	}
	return after
}

// expire ends the session locally: every handle and lock becomes invalid.
func (c *Client) expire() {
	c.mu.Lock()
	already := c.expired
	c.expired = true
	c.lease.Expire()
	conn := c.conn
	c.mu.Unlock()
	if already {
		return
	}
	c.cache.Disable()
	c.loseLocks()
	if conn != nil {
		conn.close()
	}
	c.emit(Event{Type: EventExpired})
}

// loseLocks fires the lock-lost signal of every held lock.
func (c *Client) loseLocks() {
	c.mu.Lock()
	hs := make([]*Handle, 0, len(c.held))
	for h := range c.held {
		hs = append(hs, h)
	}
	c.mu.Unlock()
	for _, h := range hs {
		h.markLost()
	}
}

func (c *Client) emit(e Event) {
	if e.Time.IsZero() {
		e.Time = c.clock.Now()
	}
	select {
	case c.events <- e:
	default:
		c.dropped.Add(1)
	}
}

// Events delivers session events (jeopardy, safe, expired, master_failover).
// A consumer that falls behind loses events, never blocks the session;
// DroppedEvents counts them.
func (c *Client) Events() <-chan Event { return c.events }

// DroppedEvents is how many events were dropped because Events was full.
func (c *Client) DroppedEvents() uint64 { return c.dropped.Load() }

// Done is closed when the session has ended (expired or closed).
func (c *Client) Done() <-chan struct{} { return c.done }

// State is the session's state now. A transition it observes (the local
// lease ending) is acted on as the KeepAlive loop would: locks are marked
// lost and the event is emitted.
func (c *Client) State() session.State { return c.checkLease() }

// SessionInfo describes the session.
type SessionInfo struct {
	ID        uint64
	TTL       time.Duration
	LeaseLeft time.Duration
	State     session.State
	Master    string
	Epoch     uint64
	Cell      string
}

// Session describes the session now.
func (c *Client) Session() SessionInfo {
	c.checkLease() // act on a transition, as State does
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.clock.Now()
	return SessionInfo{ID: c.id, TTL: c.lease.TTL, LeaseLeft: c.lease.Remaining(now), State: c.lease.State(),
		Master: c.master, Epoch: c.epoch, Cell: c.cell}
}

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
	expired := c.lease.State() == session.Expired
	c.mu.Unlock()
	// Nothing is answered from the cache once Close has begun: the master
	// forgets the session (and sends it no invalidation) when it ends.
	c.cache.Disable()
	var err error
	if !expired {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
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
	c.loseLocks()
	return err
}

// Member is a server of the cell.
type Member = wire.Member

// Members lists the cell's servers: name, RPC address, gossip state, whether
// it votes and which is the master.
func (c *Client) Members(ctx context.Context) ([]Member, error) {
	var rep wire.MembersReply
	if err := c.do(ctx, wire.MMembers, wire.Empty{}, &rep, readCall); err != nil {
		return nil, fmt.Errorf("members: %w", err)
	}
	return rep.Members, nil
}

// RemoveServer removes a server from the cell for good (an operator
// command). A server that is merely down stays a member until removed.
func (c *Client) RemoveServer(ctx context.Context, name string) error {
	if err := c.do(ctx, wire.MRemoveServer, wire.RemoveServerArgs{Name: name}, nil, readCall); err != nil {
		return fmt.Errorf("remove-server %s: %w", name, err)
	}
	return nil
}

// CacheStats returns the client cache's counters.
func (c *Client) CacheStats() cache.Stats { return c.cache.Stats() }
