package client

// Pools: many sessions over one connection (Chubby §3.1's proxies and load
// generators need it; one process may hold at most so many sockets).

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/chubby-dev/chubby/wire"
)

// Pool shares connections among Clients. The Clients dialled with the same
// Pool (Config.Pool) reach each server over one connection, and renew their
// sessions together: one KeepAliveMany call, parked on the master, renews
// all of a connection's sessions, where each Client alone would keep a
// KeepAlive of its own parked. Each Client is still one session with its
// own lease, cache, handles and locks; only the connection and the
// renewals are shared.
//
// The connections are made with the first Client's TLS configuration of
// each (server, *tls.Config) pair, so Clients share a connection only when
// they name the same *tls.Config: one identity per connection, as the
// master checks each session's calls against the connection's principal.
//
// A Pool is safe for concurrent use. Close it after its Clients.
type Pool struct {
	// gather is how a connection's KeepAlives wait for others to join
	// their batch (keepAliveGather; an Upstream's pool waits longer).
	gather gathering

	mu      sync.Mutex
	conns   map[poolKey]*transport
	dialing map[poolKey]chan struct{}
	// failed is each server's last failed dial, which stands for
	// dialFailFresh: after a server dies, the Pool's Clients all looking
	// for the master dial it once, not once each.
	failed map[poolKey]dialFailure
	// searches are the searches for the master under way or just done,
	// by the servers searched (search.go): after a failover the Pool's
	// Clients look for the new master once, together.
	searches map[searchKey]*search
	searched int // searches made, for tests
	closed   bool
	// shared marks processPool: its Clients renew their sessions each
	// with a stream KeepAlive of its own (not gathered into KeepAliveMany
	// calls), and a connection closes as soon as no Client uses it.
	shared bool
}

// processPool is the Pool of the Clients dialled with neither a Pool nor
// OwnConnection: the process's connections. It is never closed.
var processPool = func() *Pool {
	p := NewPool()
	p.shared = true
	return p
}()

type dialFailure struct {
	err error
	at  time.Time
}

// dialFailFresh is how long a failed dial stands for a Pool's Clients.
const dialFailFresh = 50 * time.Millisecond

// stands reports whether the failed dial still answers for the server.
func (f dialFailure) stands() bool { return time.Since(f.at) < dialFailFresh }

type poolKey struct {
	addr string
	tls  *tls.Config
}

// NewPool returns an empty Pool.
func NewPool() *Pool {
	return &Pool{gather: keepAliveGather, conns: map[poolKey]*transport{}, dialing: map[poolKey]chan struct{}{},
		failed: map[poolKey]dialFailure{}, searches: map[searchKey]*search{}}
}

var errPoolClosed = errors.New("client pool closed")

// get returns a view of the pool's connection to addr, dialling it if the
// pool has none (one dial at a time per server: a burst of Dials makes one
// connection).
func (p *Pool) get(ctx context.Context, addr string, tlsCfg *tls.Config) (*rpcConn, error) {
	key := poolKey{addr, tlsCfg}
	for {
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			return nil, errPoolClosed
		}
		if t := p.conns[key]; t != nil {
			t.refs++
			p.mu.Unlock()
			return t.view(), nil
		}
		if f, ok := p.failed[key]; ok && f.stands() {
			p.mu.Unlock()
			return nil, f.err
		}
		if d := p.dialing[key]; d != nil {
			p.mu.Unlock()
			select {
			case <-d:
				continue
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		d := make(chan struct{})
		p.dialing[key] = d
		p.mu.Unlock()
		t, err := dialTransport(ctx, addr, tlsCfg)
		p.mu.Lock()
		delete(p.dialing, key)
		close(d)
		if err != nil {
			if ctx.Err() == nil { // the server's failure, not this caller's giving up
				p.failed[key] = dialFailure{err, time.Now()}
			}
			p.mu.Unlock()
			return nil, err
		}
		delete(p.failed, key)
		if p.closed {
			p.mu.Unlock()
			t.close()
			return nil, errPoolClosed
		}
		t.pool, t.key, t.refs = p, key, 1
		p.conns[key] = t
		p.mu.Unlock()
		go func() { // a failed connection gets no new view
			<-t.done
			p.mu.Lock()
			p.unlistLocked(t)
			p.mu.Unlock()
		}()
		return t.view(), nil
	}
}

// release ends a view of t; failed retires t. A retired or failed
// transport closes with its last view; a healthy one stays for the next
// Client (a server probed and found not master is probed again soon),
// except in processPool, which keeps no connection nobody uses.
func (p *Pool) release(t *transport, failed bool) {
	p.mu.Lock()
	t.refs--
	if failed {
		t.retired = true
	}
	last := t.refs == 0 && (t.retired || p.shared)
	if failed || last {
		p.unlistLocked(t)
	}
	p.mu.Unlock()
	if last {
		t.close()
	}
}

func (p *Pool) unlistLocked(t *transport) {
	if p.conns[t.key] == t {
		delete(p.conns, t.key)
	}
}

// Close closes the pool's connections: the calls of Clients still using
// them fail. Close the Clients first.
func (p *Pool) Close() error {
	p.mu.Lock()
	p.closed = true
	ts := make([]*transport, 0, len(p.conns))
	for _, t := range p.conns {
		ts = append(ts, t)
	}
	clear(p.conns)
	p.mu.Unlock()
	for _, t := range ts {
		t.close()
	}
	return nil
}

// dial connects to addr: through the Client's Pool if it has one.
func (c *Client) dial(ctx context.Context, addr string) (*rpcConn, error) {
	if c.cfg.Pool != nil {
		return c.cfg.Pool.get(ctx, addr, c.cfg.TLS)
	}
	return dialConn(ctx, addr, c.cfg.TLS)
}

// helloFresh is how long a shared connection's answer to Hello "I am the
// master" stands for the next Client that probes that server: a burst of
// Dials through a Pool asks the master once, not once per session. A
// master that lost its place meanwhile refuses the Client's first call
// (wrong epoch, not master), and the Client then drops the connection and
// asks again on a new one.
const helloFresh = time.Second

// notMasterFresh is how long another answer stands: after a failover the
// Clients of a Pool, all looking for the new master at once, ask each
// server about once per notMasterFresh, not once per session.
const notMasterFresh = 50 * time.Millisecond

// hello asks the server who the master is. On a shared connection one
// Hello is in flight at a time, and its answer stands for the Clients that
// ask within helloFresh (a master's) or notMasterFresh (another's).
func (c *rpcConn) hello(ctx context.Context) (wire.HelloReply, error) {
	t := c.t
	if t.pool == nil {
		var h wire.HelloReply
		err := c.call(ctx, wire.MHello, 0, sessionRef{}, wire.HelloArgs{}, &h)
		return h, err
	}
	for {
		t.mu.Lock()
		h, at, inflight := t.helloRep, t.helloAt, t.helloCall
		fresh := notMasterFresh
		if h.IsMaster {
			fresh = helloFresh
		}
		if !at.IsZero() && time.Since(at) < fresh {
			t.mu.Unlock()
			return h, nil
		}
		if inflight == nil {
			t.helloCall = make(chan struct{})
			t.mu.Unlock()
			break
		}
		t.mu.Unlock()
		select {
		case <-inflight:
		case <-c.done:
			return h, fmt.Errorf("%w: connection closed by client", errConnLost)
		case <-ctx.Done():
			return h, ctx.Err()
		}
	}
	var h wire.HelloReply
	err := c.call(ctx, wire.MHello, 0, sessionRef{}, wire.HelloArgs{}, &h)
	t.mu.Lock()
	if err == nil {
		t.helloRep, t.helloAt = h, time.Now()
	}
	close(t.helloCall)
	t.helloCall = nil
	t.mu.Unlock()
	return h, err
}

// gathering is how a shared connection's KeepAlives wait for others to
// join their KeepAliveMany: the batch goes once no KeepAlive has joined it
// for quiet, or max after its first one, or within urgentWait of one that
// must not wait (urgent, or the acknowledgement of an invalidation, which
// a write on the master waits for).
type gathering struct {
	quiet, max time.Duration
}

// urgentWait is how long a batch with an urgent KeepAlive still gathers.
const urgentWait = 2 * time.Millisecond

// keepAliveGather is a Pool's gathering: the sessions one reply answered
// send their next KeepAlives from the same process within 2 ms.
var keepAliveGather = gathering{quiet: 2 * time.Millisecond, max: 2 * time.Millisecond}

// kaBatcher gathers the KeepAlives of a shared transport's sessions into
// KeepAliveMany calls.
type kaBatcher struct {
	mu       sync.Mutex
	queue    []*kaWaiter
	flushing bool
	last     time.Time // when the latest KeepAlive joined the queue
	urgent   bool      // the queue holds one that must not wait
	// owesAck are the sessions answered with invalidations whose next
	// KeepAlive, the acknowledgement, has not been queued yet.
	owesAck map[uint64]struct{}
}

// kaWaiter is one session's KeepAlive waiting for its answer.
type kaWaiter struct {
	view  *rpcConn
	epoch uint64
	entry wire.KeepAliveEntry
	// deliver hands the answer over, once (answered guards it): the
	// reply, or the error of the call or of the view's end.
	deliver  func(wire.KeepAliveReply, error)
	answered atomic.Bool
}

func (w *kaWaiter) answer(rep wire.KeepAliveReply, err error) {
	if w.answered.CompareAndSwap(false, true) {
		w.view.forgetKeepAlive(w)
		w.deliver(rep, err)
	}
}

// keepAlive renews the session's lease and hands the answer to deliver,
// which must not block: it runs on the connection's reader, or at once on
// the caller's goroutine when the connection is already gone. The renewal
// is a KeepAlive call of its own on a Client's own connection, its part of
// a KeepAliveMany on a shared one; neither has a goroutine waiting for it.
// Ending the view fails it; ctx ends only the call of its own (a Client's
// loop ends its view when it stops). On a Client's own connection, pushed
// (if not nil) makes it a stream KeepAlive: the events the master sends
// while it stays parked go to pushed, on the reader, in order, before
// deliver gets the answer that ends it (a KeepAliveMany does not stream);
// a push that does not decode comes with its error.
func (c *rpcConn) keepAlive(ctx context.Context, epoch uint64, sess sessionRef, args wire.KeepAliveArgs, deliver func(wire.KeepAliveReply, error), pushed func(wire.KeepAliveReply, error)) {
	if c.t.pool == nil || c.t.pool.shared {
		if c.t.pool != nil {
			// A transport shared with others outlives the view: the
			// view's end must fail the call itself.
			var ended bool
			ctx, deliver, ended = c.endsWithView(ctx, deliver)
			if ended {
				return
			}
		}
		args.Stream = pushed != nil
		c.t.callAsync(ctx, wire.MKeepAlive, epoch, sess, args, func(resp *wire.Response, err error) {
			var rep wire.KeepAliveReply
			if err == nil && resp.More {
				// Events pushed while the KeepAlive stays parked.
				if pushed != nil {
					pushed(rep, responseInto(wire.MKeepAlive, resp, &rep))
				}
				return
			}
			if err == nil {
				err = responseInto(wire.MKeepAlive, resp, &rep)
			}
			deliver(rep, err)
		})
		return
	}
	w := &kaWaiter{view: c, epoch: epoch, deliver: deliver,
		entry: wire.KeepAliveEntry{Session: sess.id, Secret: sess.secret, Urgent: args.Urgent, AckInval: args.AckInval}}
	if c.track(w) {
		c.t.queueKeepAlive(w)
	}
}

// track records w among the view's KeepAlives in flight, which its end
// fails; a view already ended answers w at once with its end (false).
func (c *rpcConn) track(w *kaWaiter) bool {
	c.kaMu.Lock()
	ended := c.kas == nil
	if !ended {
		c.kas[w] = struct{}{}
	}
	c.kaMu.Unlock()
	if ended {
		w.answer(wire.KeepAliveReply{}, fmt.Errorf("%w: connection closed by client", errConnLost))
	}
	return !ended
}

// endsWithView makes a KeepAlive call of its own on a shared transport
// end with the view: it returns a ctx that the view's end cancels and a
// deliver that answers once, with the end of the view if that comes
// first. ended reports a view already ended (deliver has been answered).
func (c *rpcConn) endsWithView(ctx context.Context, deliver func(wire.KeepAliveReply, error)) (context.Context, func(wire.KeepAliveReply, error), bool) {
	ctx, cancel := context.WithCancel(ctx)
	w := &kaWaiter{view: c, deliver: func(rep wire.KeepAliveReply, err error) {
		cancel() // the call's own answer, or the view's end: drop the call
		deliver(rep, err)
	}}
	return ctx, w.answer, !c.track(w)
}

// forgetKeepAlive drops an answered KeepAlive from the view's.
func (c *rpcConn) forgetKeepAlive(w *kaWaiter) {
	c.kaMu.Lock()
	delete(c.kas, w)
	c.kaMu.Unlock()
}

// failKeepAlives answers the view's KeepAlives in flight with the end of
// the view; later ones fail at once.
func (c *rpcConn) failKeepAlives() {
	c.kaMu.Lock()
	ws := c.kas
	c.kas = nil
	c.kaMu.Unlock()
	for w := range ws {
		w.answer(wire.KeepAliveReply{}, fmt.Errorf("%w: connection closed by client", errConnLost))
	}
}

// queueKeepAlive adds w to the next KeepAliveMany of the transport.
func (t *transport) queueKeepAlive(w *kaWaiter) {
	now := time.Now()
	if t.ka.add(w, now) {
		go t.flushKeepAlives(now)
	}
}

// add queues w, which arrived now, and reports whether it begins a batch.
func (b *kaBatcher) add(w *kaWaiter, now time.Time) (first bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.queue = append(b.queue, w)
	b.last = now
	if _, ok := b.owesAck[w.entry.Session]; ok || w.entry.Urgent {
		delete(b.owesAck, w.entry.Session)
		b.urgent = true
	}
	first = !b.flushing
	b.flushing = true
	return first
}

// answered notes the sessions a KeepAliveMany reply delivered
// invalidations to: their next KeepAlives acknowledge them.
func (b *kaBatcher) answered(rep *wire.KeepAliveManyReply) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, r := range rep.Sessions {
		if len(r.Reply.Invalidations) > 0 {
			if b.owesAck == nil {
				b.owesAck = map[uint64]struct{}{}
			}
			b.owesAck[r.Session] = struct{}{}
		}
	}
}

// gather waits until the batch begun at first may go, as g says, and
// takes it.
func (b *kaBatcher) gather(g gathering, first time.Time) []*kaWaiter {
	for {
		b.mu.Lock()
		now := time.Now()
		// wait is how long the batch still gathers.
		wait := min(b.last.Add(g.quiet).Sub(now), first.Add(g.max).Sub(now))
		if b.urgent {
			wait = min(wait, first.Add(urgentWait).Sub(now))
		}
		if wait <= 0 {
			q := b.queue
			b.queue = nil
			b.flushing = false
			b.urgent = false
			b.mu.Unlock()
			return q
		}
		b.mu.Unlock()
		time.Sleep(min(wait, urgentWait))
	}
}

// flushKeepAlives sends the batch begun at first once gathered, in the
// calls splitKeepAlives makes of it.
func (t *transport) flushKeepAlives(first time.Time) {
	for _, c := range splitKeepAlives(t.ka.gather(t.pool.gather, first)) {
		go t.sendKeepAlives(c.epoch, c.ws)
	}
}

// keepAliveCall is one KeepAliveMany to send: KeepAlives for the master
// of epoch.
type keepAliveCall struct {
	epoch uint64
	ws    []*kaWaiter
}

// splitKeepAlives makes the calls of a gathered batch: one KeepAliveMany
// per master epoch, urgency and MaxKeepAliveMany sessions, in the order
// the batch met them; KeepAlives whose Client stopped waiting are left
// out. Urgent ones go apart: the master answers a call with one at once,
// and would answer the others of the call with it, which then send again.
func splitKeepAlives(q []*kaWaiter) []keepAliveCall {
	type key struct {
		epoch  uint64
		urgent bool
	}
	open := map[key]int{} // the call each key fills, by index in calls
	var calls []keepAliveCall
	for _, w := range q {
		if w.answered.Load() { // its Client stopped waiting
			continue
		}
		k := key{w.epoch, w.entry.Urgent}
		i, ok := open[k]
		if !ok || len(calls[i].ws) == wire.MaxKeepAliveMany {
			i = len(calls)
			open[k] = i
			calls = append(calls, keepAliveCall{epoch: w.epoch})
		}
		calls[i].ws = append(calls[i].ws, w)
	}
	return calls
}

// keepAliveTimeout bounds a KeepAliveMany's wait: far over the longest hold
// (a third of the longest TTL), for a master that stopped answering on a
// connection still up.
const keepAliveTimeout = time.Minute

// sendKeepAlives makes one KeepAliveMany call for ws and hands each its
// answer; those the reply left out are sent again.
func (t *transport) sendKeepAlives(epoch uint64, ws []*kaWaiter) {
	args := wire.KeepAliveManyArgs{Sessions: make([]wire.KeepAliveEntry, len(ws))}
	for i, w := range ws {
		args.Sessions[i] = w.entry
	}
	ctx, cancel := context.WithTimeout(context.Background(), keepAliveTimeout)
	defer cancel()
	var rep wire.KeepAliveManyReply
	if err := t.callNumbered(ctx, nil, wire.MKeepAliveMany, epoch, sessionRef{}, 0, 0, args, &rep); err != nil {
		for _, w := range ws {
			w.answer(wire.KeepAliveReply{}, err)
		}
		return
	}
	byID := make(map[uint64]*kaWaiter, len(ws))
	for _, w := range ws {
		byID[w.entry.Session] = w
	}
	t.ka.answered(&rep)
	for _, r := range rep.Sessions {
		if w := byID[r.Session]; w != nil {
			delete(byID, r.Session)
			w.answer(r.Reply, r.Err())
		}
	}
	for _, w := range ws { // left out: renewed but not answered; ask again
		if byID[w.entry.Session] == w && !w.answered.Load() {
			t.queueKeepAlive(w)
		}
	}
}
