package client

// Discovery: finding the master among the servers, keeping the connection to
// it, and what a new master needs to be told (the event subscriptions).

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/chubby-dev/chubby/wire"
)

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
			if !slices.Contains(servers, h) {
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
	c.install(m.conn, m.addr, m.hello)
	return nil
}

// install makes conn, to the master at addr that answered Hello with
// hello, the client's connection.
func (c *Client) install(conn *rpcConn, addr string, hello wire.HelloReply) {
	c.mu.Lock()
	if c.conn != nil && c.conn != conn {
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
}

// rehelloTimeout bounds rehello's Hello: over a proxy's wait for a new
// master (proxy.helloTimeout, 5 s), which covers an election. The local
// lease bounds it too.
const rehelloTimeout = 6 * time.Second

// rehello asks the other end of conn, which refused a call of epoch as not
// master or of a wrong epoch but is still there, who the master is now. If
// it answers that it is, at another epoch, the client keeps the connection
// and moves to that epoch (true): after a failover behind a proxy, which
// answers so once it has found the new master, each of its clients asks it
// once instead of dialling every server it knows — thousands of clients
// doing that at once can run a process out of file descriptors. A shared
// connection's clients search together instead (Pool.findMaster).
func (c *Client) rehello(ctx context.Context, conn *rpcConn, epoch uint64, err error) bool {
	if conn == nil || conn.t.pool != nil || !(errors.Is(err, wire.ErrNotMaster) || errors.Is(err, wire.ErrWrongEpoch)) {
		return false
	}
	c.mu.Lock()
	current := c.conn == conn && c.epoch == epoch && c.lease.State() == SessionSafe
	addr := c.master
	// Not past the local lease: jeopardy is signalled on time.
	wait := min(rehelloTimeout, c.lease.Expiry().Sub(c.clock.Now()))
	c.mu.Unlock()
	if !current || wait <= 0 {
		return false
	}
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	h, herr := conn.hello(ctx)
	if herr != nil || !h.IsMaster || h.Epoch == epoch {
		return false
	}
	c.learn(h.Servers)
	c.install(conn, addr, h)
	return true
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

// findMaster asks the servers who the master is and keeps the connection
// of the first that is (probe).
func (c *Client) findMaster(ctx context.Context, servers []string) (found, error) {
	if p := c.cfg.Pool; p != nil {
		return p.findMaster(ctx, c, servers)
	}
	return c.probe(ctx, servers)
}

// probeStagger is how long probe waits on a server's answer before it asks
// the next one as well.
var probeStagger = 150 * time.Millisecond

// probe is findMaster's search. It asks the servers in a random order, the
// next one as soon as the last answered that it is not the master (or
// failed), or after probeStagger without an answer, and stops asking once
// one is: a reconnecting client usually opens one connection, not one per
// server — after a failover behind proxies, thousands of clients dialling
// every proxy at once can run a process out of file descriptors — and the
// clients of a cell spread over its servers. A stopped or unreachable
// server costs probeStagger, whatever its place in the list; the search
// ends within the 2 s probe timeout.
func (c *Client) probe(ctx context.Context, servers []string) (found, error) {
	pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	order := slices.Clone(servers)
	c.rngMu.Lock()
	c.rng.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
	c.rngMu.Unlock()
	results := make(chan probeResult, len(order))
	ask := func(addr string) {
		r := probeResult{addr: addr}
		r.conn, r.err = c.dial(pctx, addr)
		if r.err == nil {
			r.hello, r.err = r.conn.hello(pctx)
			if r.err != nil {
				r.conn.close()
				r.conn = nil
			}
		}
		results <- r
	}
	var out found
	var lastErr error = errors.New("no servers")
	asked, pending := 0, 0
	next := func() {
		if asked < len(order) {
			go ask(order[asked])
			asked++
			pending++
		}
	}
	// Real time, as the probe timeout: network waits, not lease time.
	stagger := time.NewTimer(probeStagger)
	defer stagger.Stop()
	next()
	for pending > 0 {
		var r probeResult
		select {
		case r = <-results:
		case <-stagger.C:
			next() // no answer yet: ask another as well
			stagger.Reset(probeStagger)
			continue
		}
		pending--
		stagger.Reset(probeStagger)
		if r.err != nil {
			lastErr = fmt.Errorf("%s: %w", r.addr, r.err)
			next()
			continue
		}
		c.learn(r.hello.Servers)
		if r.hello.IsMaster {
			out.addr, out.conn, out.hello = r.addr, r.conn, r.hello
			break
		}
		r.conn.close()
		lastErr = fmt.Errorf("%s (%s) is not the master", r.addr, r.hello.Node)
		if r.hello.Master != "" && !slices.Contains(out.hints, r.hello.Master) {
			out.hints = append(out.hints, r.hello.Master)
		}
		next()
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
		if !slices.Contains(c.known, s) {
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
		if c.lease.State() == SessionExpired {
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
	conn.drop()
}
