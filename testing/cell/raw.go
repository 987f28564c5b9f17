package cell

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/chubby-dev/chubby/wire"
)

// RawConn is a wire-level connection to the server, for tests that need
// what the client library never does: a session without KeepAlives, a call
// with a wrong epoch, hand-made or broken frames. Calls are stamped with
// Epoch and Session. It is not safe for concurrent use.
type RawConn struct {
	// Epoch and Session stamp every call made with Go or Call; Hello and
	// CreateSession set them.
	Epoch   uint64
	Session uint64
	// Secret is the session's secret, sent with Session (CreateSession
	// sets it; a test may change it to impersonate a session).
	Secret []byte

	nc     net.Conn
	nextID uint64
	stash  map[uint64]*wire.Response
	resps  chan *wire.Response // filled by the reader goroutine
	done   chan struct{}       // closed when the reader goroutine stops
	quit   chan struct{}       // closed by Close
	err    error               // why it stopped; read after done
	mu     sync.Mutex
	closed bool
}

// RawTimeout bounds how long a RawConn waits for a reply.
const RawTimeout = 10 * time.Second

// DialRaw connects to the server's RPC address; the connection is closed when
// the test ends.
func (c *Cell) DialRaw(t testing.TB) *RawConn {
	t.Helper()
	return DialRawTo(t, c.Addr())
}

// DialRawTo connects to the server at addr (an RPC address); the connection
// is closed when the test ends.
func DialRawTo(t testing.TB, addr string) *RawConn {
	t.Helper()
	nc, err := net.DialTimeout("tcp", addr, RawTimeout)
	if err != nil {
		t.Fatalf("cell: raw dial %s: %v", addr, err)
	}
	r := &RawConn{nc: nc, stash: map[uint64]*wire.Response{}, resps: make(chan *wire.Response, 1024),
		done: make(chan struct{}), quit: make(chan struct{})}
	go r.readLoop()
	t.Cleanup(func() { r.Close() })
	return r
}

// readLoop reads whole frames, so a timeout of Await never leaves half a
// frame behind.
func (r *RawConn) readLoop() {
	defer close(r.done)
	br := bufio.NewReader(r.nc)
	for {
		frame, err := wire.ReadFrame(br)
		if err != nil {
			r.err = err
			return
		}
		resp, err := wire.DecodeResponse(frame)
		if err != nil {
			r.err = err
			return
		}
		select {
		case r.resps <- resp:
		case <-r.quit:
			return
		}
	}
}

// NewRawSession dials, learns the epoch with Hello and creates a session of
// ttl (0: the cell's default) that sends no KeepAlive unless told to.
func (c *Cell) NewRawSession(t testing.TB, ttl time.Duration) *RawConn {
	t.Helper()
	return newRawSession(t, c.Addr(), ttl)
}

func newRawSession(t testing.TB, addr string, ttl time.Duration) *RawConn {
	t.Helper()
	r := DialRawTo(t, addr)
	if _, err := r.Hello(); err != nil {
		t.Fatalf("cell: raw hello: %v", err)
	}
	if _, err := r.CreateSession(ttl); err != nil {
		t.Fatalf("cell: raw create session: %v", err)
	}
	return r
}

// Conn is the underlying connection, for writing bytes that are not frames.
func (r *RawConn) Conn() net.Conn { return r.nc }

// Close closes the connection.
func (r *RawConn) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil
	}
	r.closed = true
	close(r.quit)
	err := r.nc.Close()
	<-r.done
	return err
}

// Hello asks the server about the cell and adopts its epoch.
func (r *RawConn) Hello() (wire.HelloReply, error) {
	var rep wire.HelloReply
	err := r.Call(wire.MHello, wire.HelloArgs{}, &rep)
	if err == nil {
		r.Epoch = rep.Epoch
	}
	return rep, err
}

// CreateSession creates a session and adopts it.
func (r *RawConn) CreateSession(ttl time.Duration) (wire.CreateSessionReply, error) {
	var rep wire.CreateSessionReply
	err := r.Call(wire.MCreateSession, wire.CreateSessionArgs{TTL: int64(ttl)}, &rep)
	if err == nil {
		r.Session, r.Secret = rep.Session, rep.Secret
	}
	return rep, err
}

// WriteFrame sends req (its ID assigned if zero) with args as its body and
// returns the ID.
func (r *RawConn) WriteFrame(req wire.Request, args any) (uint64, error) {
	if args != nil {
		b, err := msgpack.Marshal(args)
		if err != nil {
			return 0, err
		}
		req.Body = b
	}
	if req.ID == 0 {
		r.nextID++
		req.ID = r.nextID
	}
	buf, err := wire.AppendFrame(nil, &req)
	if err != nil {
		return 0, err
	}
	if err := r.WriteBytes(buf); err != nil {
		return 0, err
	}
	return req.ID, nil
}

// WriteBytes writes b as is.
func (r *RawConn) WriteBytes(b []byte) error {
	r.nc.SetWriteDeadline(time.Now().Add(RawTimeout))
	_, err := r.nc.Write(b)
	return err
}

// Go sends a call of method m stamped with Epoch and Session and returns its
// ID without waiting for the reply.
func (r *RawConn) Go(m wire.Method, args any) (uint64, error) {
	return r.WriteFrame(wire.Request{Method: m, Epoch: r.Epoch, Session: r.Session, Secret: r.Secret}, args)
}

// Await returns the response to call id, keeping responses to other calls
// for their own Await. A response with ID 0 (the server failing the whole
// connection) is returned to whoever is waiting.
func (r *RawConn) Await(id uint64, timeout time.Duration) (*wire.Response, error) {
	if resp, ok := r.stash[id]; ok {
		delete(r.stash, id)
		return resp, nil
	}
	deadline := time.Now().Add(timeout)
	for {
		resp, err := r.ReadResponse(time.Until(deadline))
		if err != nil {
			return nil, err
		}
		if resp.ID == id || resp.ID == 0 {
			return resp, nil
		}
		r.stash[resp.ID] = resp
	}
}

// ReadResponse returns the next response, whatever call it answers. When
// the server has closed the connection (and every response before that has
// been read) it returns the read error, io.EOF for a clean close.
func (r *RawConn) ReadResponse(timeout time.Duration) (*wire.Response, error) {
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case resp := <-r.resps:
		return resp, nil
	case <-t.C:
		return nil, ErrNoReply
	case <-r.done:
		select {
		case resp := <-r.resps:
			return resp, nil
		default:
			return nil, r.err
		}
	}
}

// Call sends a call and waits for its reply, decoding the body into reply
// (if non-nil). A failed call returns the error rebuilt from the response's
// code, so errors.Is works with the fs sentinels.
func (r *RawConn) Call(m wire.Method, args, reply any) error {
	id, err := r.Go(m, args)
	if err != nil {
		return err
	}
	return r.Result(id, reply)
}

// Result waits for the reply of a call sent with Go and decodes it.
func (r *RawConn) Result(id uint64, reply any) error {
	resp, err := r.Await(id, RawTimeout)
	if err != nil {
		return err
	}
	return DecodeResult(resp, reply)
}

// DecodeResult turns a response into its error or decodes its body into
// reply.
func DecodeResult(resp *wire.Response, reply any) error {
	if err := resp.Err(); err != nil {
		return err
	}
	if reply != nil && len(resp.Body) > 0 {
		if err := wire.Unmarshal(resp.Body, reply); err != nil {
			return fmt.Errorf("decode reply: %w", err)
		}
	}
	return nil
}

// ErrNoReply is returned when no reply arrived in time.
var ErrNoReply = errors.New("no reply")

// Answered reports whether the reply to call id has arrived within wait
// (which may be short: it is for checking that something did NOT happen).
func (r *RawConn) Answered(id uint64, wait time.Duration) (*wire.Response, bool) {
	resp, err := r.Await(id, wait)
	if err != nil {
		return nil, false
	}
	return resp, true
}
