package server

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sync/semaphore"

	"github.com/chubby-dev/chubby/fs"
	"github.com/chubby-dev/chubby/internal/edgeread"
	"github.com/chubby-dev/chubby/wire"
)

// bodyTimeout bounds how long a started frame may take to arrive whole.
const bodyTimeout = 30 * time.Second

// conn is one client connection. A reader goroutine decodes calls and hands
// them to the dispatch table; replies may come from any goroutine (a handler,
// a KeepAlive hold timer, a lock grant) and are serialised by wmu.
type conn struct {
	// id numbers the server's connections from 1, for the proposer's
	// queue of this connection's commands.
	id        uint64
	log       hclog.Logger
	badFrames prometheus.Counter
	// dispatch serves one decoded call; done runs once serve returns.
	dispatch func(*conn, *wire.Request)
	done     func(*conn)
	// frames is the server's budget for the bodies of large frames being
	// read (nil: none).
	frames *semaphore.Weighted
	// queue holds calls read but not started; at most maxRunning of the
	// connection's calls run at once (see spawn). nil: every call runs at
	// once in a goroutine of its own.
	queue     chan func(park func())
	running   chan struct{} // a value per running call, maxRunning at most
	queueOnce sync.Once
	// workers runs the calls (nil: a goroutine each).
	workers *workerPool

	nc net.Conn
	// principal is who the connection speaks for: its TLS certificate's
	// common name, AnonymousPrincipal without TLS. Set by serve before the
	// first call is read.
	principal string
	// br reads calls through er.
	er     *edgeread.Reader
	br     *bufio.Reader
	w      *wire.FrameWriter
	closed chan struct{}
	once   sync.Once
}

// proposals is the proposer's queue for this connection's commands.
func (c *conn) proposals() queueKey { return queueKey{conn: c.id} }

func (c *conn) close() {
	c.once.Do(func() {
		close(c.closed)
		c.er.Close() // not nc.Close: a call read by c.er may close its own connection
	})
}

// send writes one response frame (with the frames of other replies sent
// at the same time: see wire.FrameWriter). Errors close the connection.
func (c *conn) send(resp *wire.Response) {
	fb := wire.GetFrameBuf()
	defer fb.Free()
	frame, err := fb.Encode(resp)
	if err != nil {
		// The caller still gets an answer: the error, which always fits.
		c.log.Warn("reply not sent", "id", resp.ID, "err", err)
		frame, err = fb.Encode(errorResponse(resp.ID, fmt.Errorf("%w: the reply could not be sent: %v", fs.ErrTooLarge, err)))
		if err != nil {
			c.close()
			return
		}
	}
	if err := c.w.Write(frame); err != nil {
		c.close()
	}
}

// Back-pressure per connection (issue 17, finding 1). A connection's calls
// run at most maxRunning at a time; up to maxQueued more wait, read and
// decoded, and past that the reader stops reading (TCP pushes back on the
// client). Inline calls (KeepAlive) run in the reader and never wait behind
// the queue until it is full, so a client's own backlog does not delay its
// lease. A client pipelining thousands of writes thus puts maxRunning of
// them before the proposer at a time, not thousands, and other sessions'
// calls are not starved of the CPU or the queue (the proposer takes one
// command of each connection in turn). A call that waits for a lock grant
// parks (call.park) and stops counting as running, so blocked Acquires
// never hold up the connection's other calls. A connection carries the
// sessions of a whole process (the client shares one by default), so the
// bound is per process rather than per session: 16 held 64 sessions'
// Acquires and Releases to a quarter of them at a time (7,000 cycles/s
// against 10,000 with a connection each), 128 lets them all run (12,800).
const (
	maxRunning = 128
	maxQueued  = 1024
)

// spawn runs a non-inline call: at once in its own goroutine while fewer
// than maxRunning of the connection's calls run, else after one ends.
func (c *conn) spawn(run func(park func())) {
	if c.queue == nil {
		go run(func() {})
		return
	}
	select {
	case c.running <- struct{}{}: // the common case: start it now
		c.start(run)
		return
	default:
	}
	c.queueOnce.Do(func() { go c.runQueue() })
	select {
	case c.queue <- run: // blocks the reader only when maxQueued wait
	case <-c.closed:
	}
}

// runQueue starts the connection's queued calls, maxRunning at a time,
// until the connection closes.
func (c *conn) runQueue() {
	for {
		select {
		case run := <-c.queue:
			select {
			case c.running <- struct{}{}:
			case <-c.closed:
				return
			}
			c.start(run)
		case <-c.closed:
			return
		}
	}
}

// start runs a call that holds a running slot on a worker.
func (c *conn) start(run func(park func())) {
	if c.workers == nil {
		go c.runParked(run)
		return
	}
	c.workers.run(func() { c.runParked(run) })
}

// runParked runs a call that holds a running slot, freeing the slot when
// the call parks or returns.
func (c *conn) runParked(run func(park func())) {
	var once sync.Once
	park := func() { once.Do(func() { <-c.running }) }
	defer park()
	run(park)
}

// reserve takes n bytes of the server's frame budget for a large frame's
// body, waiting up to bodyTimeout for other connections' frames to be read.
func (c *conn) reserve(n int) error {
	ctx, cancel := context.WithTimeout(context.Background(), bodyTimeout)
	defer cancel()
	if err := c.frames.Acquire(ctx, int64(n)); err != nil {
		return fmt.Errorf("%w: no room for a %d-byte frame within %v (other connections' large frames hold the server's frame memory)", wire.ErrResourceExhausted, n, bodyTimeout)
	}
	return nil
}

// refuse answers a connection the server will not serve with err (call id
// 0) and closes it.
func (c *conn) refuse(err error) {
	c.reply(0, nil, err)
	c.close()
}

// reply answers call id with body or err.
func (c *conn) reply(id uint64, body any, err error) {
	if err != nil {
		c.send(errorResponse(id, err))
		return
	}
	resp := &wire.Response{ID: id}
	if body != nil {
		b, merr := wire.Marshal(body)
		switch {
		case merr != nil:
			resp = errorResponse(id, merr)
		case len(b) > wire.ReplyBudget:
			resp = errorResponse(id, fmt.Errorf("%w: a reply of %d bytes (limit %d)", fs.ErrTooLarge, len(b), wire.ReplyBudget))
		default:
			resp.Body = b
		}
	}
	c.send(resp)
}

// push sends call id a partial answer (wire.Response.More): a stream
// KeepAlive's events, the call staying open.
func (c *conn) push(id uint64, body any) {
	b, err := wire.Marshal(body)
	if err != nil || len(b) > wire.ReplyBudget {
		c.log.Warn("push not sent", "id", id, "bytes", len(b), "err", err)
		return
	}
	c.send(&wire.Response{ID: id, More: true, Body: b})
}

// errorResponse answers call id with err (its code, or internal).
func errorResponse(id uint64, err error) *wire.Response {
	return &wire.Response{ID: id, Code: wire.Code(err), Error: err.Error()}
}

// serve reads calls until the connection fails or carries garbage.
func (c *conn) serve() {
	defer c.close()
	defer c.done(c)
	p, err := principalOf(c.nc)
	if err != nil {
		c.log.Debug("TLS handshake refused", "remote", c.nc.RemoteAddr(), "err", err)
		return
	}
	c.principal = p
	// Calls that arrive whole are read by edgeread without a failed read
	// before each wait; a call that has begun to arrive, and every call on
	// a TLS connection, readCall reads the ordinary way.
	c.er.Run(c.br, wire.FrameBuffered, c.readCall)
}

// readCall reads one call and dispatches it; false: the connection is to
// be closed (it failed, or carried garbage, answered as such).
func (c *conn) readCall() bool {
	// Wait for a frame without a deadline (a client may be idle while
	// its KeepAlive is parked), then give its body bodyTimeout to
	// arrive, so a truncated frame cannot hold the reader forever. A
	// frame already buffered whole needs no deadline: most calls are
	// small and come in one read (setting and clearing a deadline moves
	// a runtime timer twice per call).
	deadline := false
	if _, err := c.br.Peek(1); err == nil && !wire.FrameBuffered(c.br) {
		c.nc.SetReadDeadline(time.Now().Add(bodyTimeout))
		deadline = true
	}
	var reserve func(int) error
	if c.frames != nil {
		reserve = c.reserve
	}
	frame, reserved, err := wire.ReadFrameReserving(c.br, reserve)
	if deadline {
		c.nc.SetReadDeadline(time.Time{})
	}
	release := func() {
		if reserved > 0 {
			c.frames.Release(int64(reserved))
		}
	}
	if err != nil {
		release()
		if errors.Is(err, wire.ErrResourceExhausted) {
			c.reply(0, nil, err)
			return false
		}
		if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) && !errors.Is(err, syscall.ECONNRESET) {
			c.badFrames.Inc()
			c.log.Debug("bad frame; closing connection", "remote", c.nc.RemoteAddr(), "err", err)
			c.reply(0, nil, errBadRequest("bad frame: %v", err))
		}
		return false
	}
	req, err := wire.DecodeRequest(frame)
	release() // the decoder copied what it keeps
	if err != nil {
		c.badFrames.Inc()
		c.log.Debug("bad request; closing connection", "remote", c.nc.RemoteAddr(), "err", err)
		c.reply(0, nil, errBadRequest("%v", err))
		return false
	}
	if !known(req.Method) {
		c.badFrames.Inc()
		c.reply(req.ID, nil, errBadRequest("unknown call %d", req.Method))
		return false
	}
	c.dispatch(c, req)
	return true
}

func errBadRequest(format string, args ...any) error {
	return wire.FromCode("bad_request", "bad request: "+sprintf(format, args...))
}

func (s *Server) acceptLoop() {
	defer s.wg.Done()
	for {
		nc, err := s.ln.Accept()
		if err != nil {
			if s.closing.Load() {
				return
			}
			s.rpcLog.Warn("accept", "err", err)
			time.Sleep(50 * time.Millisecond)
			continue
		}
		if tc, ok := nc.(*net.TCPConn); ok {
			tc.SetNoDelay(true)
			tc.SetKeepAlive(true)
		}
		er := edgeread.New(nc)
		c := &conn{id: s.connSeq.Add(1), log: s.rpcLog, badFrames: s.metrics.badFrames, dispatch: s.dispatch, done: s.dropConn, frames: s.frames, workers: s.workers,
			nc: nc, er: er, br: bufio.NewReaderSize(er, 16<<10), w: wire.NewFrameWriter(nc, 10*time.Second), closed: make(chan struct{}), queue: make(chan func(park func()), maxQueued), running: make(chan struct{}, maxRunning)}
		s.connsMu.Lock()
		if s.closing.Load() {
			s.connsMu.Unlock()
			nc.Close()
			return
		}
		if len(s.conns) >= s.cfg.MaxConns {
			s.connsMu.Unlock()
			s.metrics.rejected.WithLabelValues("connections").Inc()
			go c.refuse(fmt.Errorf("%w: %d client connections open (limit %d)", wire.ErrResourceExhausted, s.cfg.MaxConns, s.cfg.MaxConns))
			continue
		}
		s.conns[c] = struct{}{}
		s.connsMu.Unlock()
		s.metrics.conns.Inc()
		go c.serve()
	}
}

func (s *Server) dropConn(c *conn) {
	s.connsMu.Lock()
	delete(s.conns, c)
	s.connsMu.Unlock()
	s.metrics.conns.Dec()
}

func sprintf(format string, args ...any) string { return fmt.Sprintf(format, args...) }
