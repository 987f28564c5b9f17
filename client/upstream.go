package client

// Upstream: the master as a proxy (cmd/chubbyproxy, Chubby §3.1) sees it.

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/chubby-dev/chubby/wire"
)

// Upstream is a connection to a cell's master that carries the calls of
// other clients' sessions: a proxy forwards each call as its client made
// it (session, secret, epoch, call number) and renews its clients'
// sessions together, one KeepAliveMany for all of them. It finds the
// master as a Client does, and again after it failed; it has no session of
// its own.
type Upstream struct {
	c    *Client
	pool *Pool
	// mu serialises finding the master.
	mu sync.Mutex
}

// upstreamGather is keepAliveGather for an Upstream. A proxy's clients
// each renew over a connection of their own: the KeepAlives of one hold
// reach it spread over a few hundred milliseconds when the machine is busy
// (5,000 clients a proxy), which one call should carry. A batch goes once
// 20 ms pass without a KeepAlive joining it, at most 150 ms after its
// first (a renewal that late still leaves most of a 1 s lease), and
// within 2 ms when it holds an acknowledgement of invalidations.
var upstreamGather = gathering{quiet: 20 * time.Millisecond, max: 150 * time.Millisecond}

// DialUpstream finds the master of the cell cfg names (Servers, TLS,
// Backoff, Logger; the session fields are not used).
func DialUpstream(ctx context.Context, cfg Config) (*Upstream, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	pool := NewPool()
	pool.gather = upstreamGather
	cfg.Pool = pool
	u := &Upstream{c: newClient(cfg.withDefaults()), pool: pool}
	if _, err := u.Master(ctx); err != nil {
		pool.Close()
		return nil, err
	}
	return u, nil
}

// Master returns the master's answer to Hello, finding the master again if
// the connection to it was lost or it stopped being master.
func (u *Upstream) Master(ctx context.Context) (wire.HelloReply, error) {
	_, h, err := u.conn(ctx)
	return h, err
}

// conn is the connection to the master and what the master said of itself.
func (u *Upstream) conn(ctx context.Context) (*rpcConn, wire.HelloReply, error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	c := u.c
	c.mu.Lock()
	conn, h := c.conn, wire.HelloReply{Cell: c.cell, IsMaster: true, Master: c.master, Epoch: c.epoch}
	c.mu.Unlock()
	if conn != nil {
		return conn, h, nil
	}
	retry := c.newRetrier()
	for {
		err := c.connect(ctx)
		if err == nil {
			break
		}
		c.log.Debug("upstream: no master yet", "err", err)
		select {
		case <-ctx.Done():
			return nil, h, fmt.Errorf("%w: no master reachable at %v: %v", wire.ErrUnavailable, c.cfg.Servers, err)
		case <-c.clock.NewTimer(retry.next()).C():
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.conn, wire.HelloReply{Cell: c.cell, IsMaster: true, Master: c.master, Epoch: c.epoch}, nil
}

// failed drops conn if err says the master behind it is gone (the
// connection failed, or it is no longer master, or its epoch is not the
// one it answered Hello with), so that the next call finds the master.
func (u *Upstream) failed(conn *rpcConn, epoch uint64, err error) {
	stale := errors.Is(err, errConnLost) || errors.Is(err, wire.ErrNotMaster)
	if errors.Is(err, wire.ErrWrongEpoch) {
		u.c.mu.Lock()
		stale = epoch == u.c.epoch // the call carried the epoch we know
		u.c.mu.Unlock()
	}
	if stale {
		u.c.dropConn(conn)
	}
}

// relayable is err as the proxy's client should see it: a lost connection
// to the master is "not master" to a client of the proxy, which then asks
// the proxy (or another) for the master again and retries.
func relayable(err error) error {
	if errors.Is(err, errConnLost) {
		return fmt.Errorf("%w: the proxy lost the master: %v", wire.ErrNotMaster, err)
	}
	return err
}

// Forward makes req's call on the master as its client made it and
// returns the reply's body, or the error to answer the client with.
func (u *Upstream) Forward(ctx context.Context, req *wire.Request) (msgpack.RawMessage, error) {
	conn, _, err := u.conn(ctx)
	if err != nil {
		return nil, err
	}
	var args any = req.Body
	if len(req.Body) == 0 {
		args = wire.Empty{}
	}
	var body msgpack.RawMessage
	err = conn.t.callNumbered(ctx, conn.done, req.Method, req.Epoch, sessionRef{id: req.Session, secret: req.Secret}, req.Call, req.Acked, args, &body)
	if err != nil {
		u.failed(conn, req.Epoch, err)
		return nil, relayable(err)
	}
	return body, nil
}

// KeepAlive renews a client's session as part of the next KeepAliveMany
// and hands deliver the session's answer, or the error to answer the
// client with.
func (u *Upstream) KeepAlive(ctx context.Context, epoch, session uint64, secret []byte, args wire.KeepAliveArgs, deliver func(wire.KeepAliveReply, error)) {
	conn, _, err := u.conn(ctx)
	if err != nil {
		deliver(wire.KeepAliveReply{}, err)
		return
	}
	conn.keepAlive(ctx, epoch, sessionRef{id: session, secret: secret}, args, func(rep wire.KeepAliveReply, err error) {
		if err != nil {
			u.failed(conn, epoch, err)
			err = relayable(err)
		}
		deliver(rep, err)
	}, nil)
}

// Close closes the connections to the cell.
func (u *Upstream) Close() error {
	u.c.mu.Lock()
	conn := u.c.conn
	u.c.conn = nil
	u.c.mu.Unlock()
	if conn != nil {
		conn.close()
	}
	return u.pool.Close()
}
