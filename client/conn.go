package client

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/chubby-dev/chubby/fs"
	"github.com/chubby-dev/chubby/internal/edgeread"
	"github.com/chubby-dev/chubby/wire"
)

// errConnLost: the connection failed while a call was in flight; the call may
// or may not have been applied.
var errConnLost = errors.New("connection to the master lost")

// transport multiplexes calls over one TCP (or TLS) connection: a reader
// goroutine matches responses to calls by id. A Client uses it through an
// rpcConn: its own transport, or one a Pool shares among its Clients.
type transport struct {
	addr string
	nc   net.Conn
	// er reads the answers (readLoop); closing goes through it.
	er      *edgeread.Reader
	w       *wire.FrameWriter
	mu      sync.Mutex
	nextID  uint64
	pending map[uint64]chan *wire.Response
	// async holds the calls answered by a callback on the reader
	// (callAsync) instead of a waiting goroutine.
	async map[uint64]func(*wire.Response, error)
	err   error
	done  chan struct{}

	// pool shares the transport (nil: a single Client's). refs counts its
	// views and retired is set once a Client dropped it as failing: no new
	// view is made of it and it closes with its last view. Both under
	// pool.mu.
	pool    *Pool
	key     poolKey
	refs    int
	retired bool
	// ka batches the KeepAlives of a shared transport's sessions.
	ka kaBatcher
	// helloRep is a shared transport's last answer to Hello, at helloAt;
	// helloCall is closed when the Hello in flight is answered (all under
	// mu).
	helloRep  wire.HelloReply
	helloAt   time.Time
	helloCall chan struct{}
}

// rpcConn is a Client's connection to a server: a view of a transport that
// the Client closes (done with it) or drops (it failed) by itself; calls
// made through a view end when it does, whoever else shares the transport.
type rpcConn struct {
	t    *transport
	done chan struct{}
	once sync.Once
	// kas are the view's KeepAlives waiting in the shared transport's
	// KeepAliveMany calls (nil once the view ended).
	kaMu sync.Mutex
	kas  map[*kaWaiter]struct{}
}

func (t *transport) view() *rpcConn {
	return &rpcConn{t: t, done: make(chan struct{}), kas: map[*kaWaiter]struct{}{}}
}

// dialConn connects to addr: a Client's own connection.
func dialConn(ctx context.Context, addr string, tlsCfg *tls.Config) (*rpcConn, error) {
	t, err := dialTransport(ctx, addr, tlsCfg)
	if err != nil {
		return nil, err
	}
	return t.view(), nil
}

func dialTransport(ctx context.Context, addr string, tlsCfg *tls.Config) (*transport, error) {
	var d net.Dialer
	nc, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	if tc, ok := nc.(*net.TCPConn); ok {
		tc.SetNoDelay(true)
		tc.SetKeepAlive(true)
		tc.SetKeepAlivePeriod(5 * time.Second)
	}
	if tlsCfg != nil {
		tc := tls.Client(nc, serverVerifying(tlsCfg))
		if err := tc.HandshakeContext(ctx); err != nil {
			nc.Close()
			return nil, fmt.Errorf("tls with %s: %w", addr, err)
		}
		nc = tc
	}
	t := &transport{addr: addr, nc: nc, er: edgeread.New(nc), w: wire.NewFrameWriter(nc, 10*time.Second), pending: map[uint64]chan *wire.Response{}, async: map[uint64]func(*wire.Response, error){}, done: make(chan struct{})}
	go t.readLoop()
	return t, nil
}

// serverVerifying is cfg verifying the server as a cell's server: by its
// role name, not the address dialled (servers are reached by the
// addresses the cell advertises). With cfg.ServerName set it is the
// standard verification of that name.
func serverVerifying(cfg *tls.Config) *tls.Config {
	c := cfg.Clone()
	if c.MinVersion == 0 {
		c.MinVersion = tls.VersionTLS12
	}
	if c.ServerName != "" {
		return c
	}
	roots := c.RootCAs
	c.InsecureSkipVerify = true // verified below: the chain, then the role
	c.VerifyConnection = func(cs tls.ConnectionState) error {
		if len(cs.PeerCertificates) == 0 {
			return errors.New("the server sent no certificate")
		}
		inter := x509.NewCertPool()
		for _, ic := range cs.PeerCertificates[1:] {
			inter.AddCert(ic)
		}
		leaf := cs.PeerCertificates[0]
		if _, err := leaf.Verify(x509.VerifyOptions{Roots: roots, Intermediates: inter, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil {
			return err
		}
		for _, n := range leaf.DNSNames {
			if wire.IsServerName(n) {
				return nil
			}
		}
		return fmt.Errorf("the certificate of %q is not a chubby server's (no server.CELL.chubby name)", leaf.Subject.CommonName)
	}
	return c
}

func (c *transport) readLoop() {
	br := bufio.NewReaderSize(c.er, 16<<10)
	// Replies that arrive whole are read by edgeread without a failed read
	// before each wait; one that has begun to arrive, and every reply on a
	// TLS connection, readReply reads the ordinary way.
	if err := c.er.Run(br, wire.FrameBuffered, func() bool { return c.readReply(br) }); err != nil {
		c.fail(fmt.Errorf("%w: %v", errConnLost, err))
	}
}

// readReply reads one answer and hands it to its call; false: the
// connection failed (fail has run).
func (c *transport) readReply(br *bufio.Reader) bool {
	frame, err := wire.ReadFrame(br)
	if err != nil {
		c.fail(fmt.Errorf("%w: %v", errConnLost, err))
		return false
	}
	resp, err := wire.DecodeResponse(frame)
	if err != nil {
		c.fail(fmt.Errorf("%w: %v", errConnLost, err))
		return false
	}
	c.mu.Lock()
	if resp.More {
		// A partial answer: only an async call that streams takes
		// one (callAsync); the call stays registered for the rest.
		fn := c.async[resp.ID]
		c.mu.Unlock()
		if fn != nil {
			fn(resp, nil)
		}
		return true
	}
	ch, ok := c.pending[resp.ID]
	delete(c.pending, resp.ID)
	fn := c.async[resp.ID]
	delete(c.async, resp.ID)
	c.mu.Unlock()
	switch {
	case ok:
		ch <- resp
	case fn != nil:
		fn(resp, nil)
	case resp.ID == 0 && resp.Code != "":
		c.fail(fmt.Errorf("%w: server: %s", errConnLost, resp.Error))
		return false
	}
	return true
}

// fail closes the connection and fails every pending call.
func (c *transport) fail(err error) {
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		return
	}
	c.err = err
	pending, async := c.pending, c.async
	c.pending, c.async = nil, nil
	close(c.done)
	c.mu.Unlock()
	c.er.Close() // not nc.Close: readReply fails the transport from inside the reads of er
	for _, ch := range pending {
		ch <- &wire.Response{Code: "conn", Error: err.Error()}
	}
	for _, fn := range async {
		fn(nil, fmt.Errorf("%w: %s", errConnLost, err.Error())) // as a waiting call's "conn" answer reads
	}
}

// close fails the transport with errConnLost, as every other end of it
// does: a call made just after (the connection dropped by another of the
// Client's goroutines, or a SessionGroup's renewal loop) is retried on a
// connection found afresh, as the calls in flight are. With a plain error
// a Create racing a drop gave up and left its session on the master.
func (c *transport) close() { c.fail(fmt.Errorf("%w: connection closed by client", errConnLost)) }

// close ends the Client's use of the connection: its calls in flight fail,
// and the transport closes unless a Pool shares it with other Clients.
func (c *rpcConn) close() { c.end(false) }

// drop is close for a connection that failed the Client (an error on it,
// or no answer for a whole lease): a Pool makes no new view of it and
// closes it once its other Clients are done with it too.
func (c *rpcConn) drop() { c.end(true) }

func (c *rpcConn) end(failed bool) {
	first := false
	c.once.Do(func() {
		first = true
		close(c.done)
		if c.t.pool != nil {
			c.t.pool.release(c.t, failed)
			return
		}
		c.t.close()
	})
	if first {
		// Outside once: an answer's callback may end the view again
		// (an Upstream drops the connection its KeepAlive failed on).
		c.failKeepAlives()
	}
}

// sessionRef names the session a call is for (zero: none).
type sessionRef struct {
	id     uint64
	secret []byte // CreateSession's: the master refuses the session's calls without it
}

// call sends one request and waits for its response, ctx, or the end of
// the view.
func (c *rpcConn) call(ctx context.Context, m wire.Method, epoch uint64, sess sessionRef, args, reply any) error {
	return c.t.callNumbered(ctx, c.done, m, epoch, sess, 0, 0, args, reply)
}

// callNumbered is call for a session's numbered (deduplicated) call.
func (c *rpcConn) callNumbered(ctx context.Context, m wire.Method, epoch uint64, sess sessionRef, callID, acked uint64, args, reply any) error {
	return c.t.callNumbered(ctx, c.done, m, epoch, sess, callID, acked, args, reply)
}

// callNumbered sends one request and waits for its response, ctx, or
// viewDone (nil: none).
func (c *transport) callNumbered(ctx context.Context, viewDone <-chan struct{}, m wire.Method, epoch uint64, sess sessionRef, callID, acked uint64, args, reply any) error {
	ch := make(chan *wire.Response, 1)
	var id uint64
	if err := c.send(m, epoch, sess, callID, acked, args, func(n uint64) {
		id = n
		c.pending[id] = ch
	}); err != nil {
		return err
	}
	select {
	case resp := <-ch:
		return responseInto(m, resp, reply)
	case <-ctx.Done():
		c.forget(id)
		return ctx.Err()
	case <-viewDone:
		c.forget(id)
		return fmt.Errorf("%w: connection closed by client", errConnLost)
	}
}

// responseInto is the outcome of call m: its error, or nil with its
// reply decoded into reply.
func responseInto(m wire.Method, resp *wire.Response, reply any) error {
	if resp.Code == "conn" {
		return fmt.Errorf("%w: %s", errConnLost, resp.Error)
	}
	if err := resp.Err(); err != nil {
		return err
	}
	if reply != nil && len(resp.Body) > 0 {
		if err := wire.Unmarshal(resp.Body, reply); err != nil {
			return fmt.Errorf("%w: decode %s reply: %v", fs.ErrBadRequest, m, err)
		}
	}
	return nil
}

// callAsync sends one request and hands its response to done, called once:
// on the connection's reader when the response arrives (done must not
// block), or with an error and no response when the request cannot be
// sent, the connection fails or ctx ends first. Partial answers
// (wire.Response.More, a stream KeepAlive's pushes) go to done too, on the
// reader, before that last call. No goroutine waits for the answer: a
// Client's KeepAlive, parked on the master most of the time, costs none.
func (c *transport) callAsync(ctx context.Context, m wire.Method, epoch uint64, sess sessionRef, args any, done func(*wire.Response, error)) {
	err := c.send(m, epoch, sess, 0, 0, args, func(id uint64) {
		var stop func() bool
		c.async[id] = func(resp *wire.Response, err error) {
			if resp != nil && resp.More {
				done(resp, nil)
				return
			}
			stop()
			done(resp, err)
		}
		// Set under c.mu: the callback is found, and so called, only under it.
		stop = context.AfterFunc(ctx, func() {
			c.mu.Lock()
			_, waiting := c.async[id]
			delete(c.async, id)
			c.mu.Unlock()
			if waiting {
				done(nil, ctx.Err())
			}
		})
	})
	if err != nil {
		done(nil, err)
	}
}

// send numbers a call, has register record it under c.mu (where the reader
// looks answers up), and writes its request. It fails, registering
// nothing, if args do not encode or the connection has failed; a failed
// write fails the connection, which answers every call registered.
func (c *transport) send(m wire.Method, epoch uint64, sess sessionRef, callID, acked uint64, args any, register func(id uint64)) error {
	body, err := wire.Marshal(args)
	if err != nil {
		return err
	}
	c.mu.Lock()
	if c.err != nil {
		err := c.err
		c.mu.Unlock()
		return err
	}
	c.nextID++
	id := c.nextID
	register(id)
	c.mu.Unlock()
	fb := wire.GetFrameBuf()
	frame, err := fb.Encode(&wire.Request{ID: id, Method: m, Epoch: epoch, Session: sess.id, Secret: sess.secret, Call: callID, Acked: acked, Body: body})
	if err == nil {
		err = c.w.Write(frame)
	}
	fb.Free()
	if err != nil {
		c.fail(fmt.Errorf("%w: %v", errConnLost, err))
	}
	return nil
}

// forget stops waiting for the response to call id.
func (c *transport) forget(id uint64) {
	c.mu.Lock()
	if c.pending != nil {
		delete(c.pending, id)
	}
	c.mu.Unlock()
}
