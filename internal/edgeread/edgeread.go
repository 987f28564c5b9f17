// Package edgeread reads a stream of frames from a TCP connection with one
// read system call per arrival instead of two.
//
// Go's net package reads a non-blocking socket and, when the read fails
// with EAGAIN, parks the goroutine until the poller reports the socket
// readable. A connection that carries one call at a time therefore makes
// two reads per call: the one that returns the call and, right after it,
// one that fails because nothing else has come yet. On a loaded cell that
// failed read is a third of every side's socket system calls (one call and
// its reply cost six: a write and two reads on each side), and on a
// virtual machine each costs microseconds.
//
// The failed read only learns what the successful one already told: a
// read that returned less than it asked for emptied the socket (a TCP
// receive takes everything queued, backlog included). Go's poller is edge
// triggered: whatever arrives after that read raises a readiness event,
// and the poller keeps an event that comes while nobody waits. The one
// thing that loses such an event is the reset at the start of every
// net.Conn.Read and syscall.RawConn.Read (the readiness mark is cleared
// before the first read). So Run keeps the whole read loop inside one
// RawConn.Read: after a short read it waits for readiness at once, without
// reading again; after every wake-up, and at every entry, it reads first.
//
//	Run ────► RawConn.Read(f) ─ prepare (mark cleared) ─► f: read ─┐
//	                 ▲                                             │ frames whole in the buffer → frame()
//	                 │       wait for readiness ◄── short read ────┤ EAGAIN (a stale mark) → wait
//	                 └────────────────────────────────── wake ─────┘ a partial frame → return to the caller
//
// A frame that has begun but not arrived whole is left to the caller's
// ordinary read (with its deadline for a frame's body); so is every read
// on a connection that is not a raw socket (TLS).
package edgeread

import (
	"bufio"
	"errors"
	"io"
	"net"
	"syscall"

	"github.com/chubby-dev/chubby/internal/rawsock"
)

// errWait is what Read answers inside Run's raw loop when the socket has
// nothing: the loop then waits for readiness. No caller of Run sees it.
var errWait = errors.New("edgeread: nothing to read yet")

// Reader is the io.Reader under a connection's bufio.Reader. Outside
// Run's raw loop it reads through the net.Conn; inside it reads the socket
// itself.
// One goroutine uses a Reader.
type Reader struct {
	nc net.Conn
	rc syscall.RawConn // nil: not a socket Run can read raw (TLS)
	// raw: inside the raw loop's callback, reads go to fd.
	raw bool
	fd  int
	// short: the last raw read returned less than it asked for, so the
	// socket was empty after it.
	short bool
}

// New returns a Reader of nc. Run reads raw only a *net.TCPConn (or
// another connection giving a syscall.RawConn) without TLS over it.
func New(nc net.Conn) *Reader {
	return &Reader{nc: nc, rc: rawsock.Conn(nc)}
}

// Read reads from the connection: through net.Conn.Read outside the raw
// loop, with one read system call inside it.
func (r *Reader) Read(p []byte) (int, error) {
	if !r.raw {
		return r.nc.Read(p)
	}
	if len(p) == 0 {
		return 0, nil
	}
	for {
		n, err := rawsock.Read(r.fd, p)
		switch {
		case err == syscall.EINTR:
			continue
		case err == syscall.EAGAIN:
			return 0, errWait
		case err != 0:
			return 0, &net.OpError{Op: "read", Net: "tcp", Source: r.nc.LocalAddr(), Addr: r.nc.RemoteAddr(), Err: err}
		case n == 0:
			return 0, io.EOF
		}
		r.short = n < len(p)
		return n, nil
	}
}

// Run hands br's frames to frame until frame returns false (nil then) or
// the connection fails to read (io.EOF, a reset, net.ErrClosed once it is
// closed). frame reads one frame from br and handles it; whole reports
// that br holds a frame whole. While frames arrive whole, frame runs
// inside serve's raw read loop; a frame that has begun to arrive, and
// every frame on a connection that cannot be read raw (TLS), frame reads
// the ordinary way, through r. br must read from r.
func (r *Reader) Run(br *bufio.Reader, whole func(*bufio.Reader) bool, frame func() bool) error {
	for {
		stopped, err := r.serve(br, whole, frame)
		if stopped || err != nil {
			return err
		}
		if !frame() {
			return nil
		}
	}
}

// serve hands br's frames to frame while they arrive whole. It returns
// with stopped set when frame returns false; with err the read error; and
// with neither when br holds the start of a frame not yet whole, or when
// the connection cannot be read raw.
func (r *Reader) serve(br *bufio.Reader, whole func(*bufio.Reader) bool, frame func() bool) (stopped bool, err error) {
	if r.rc == nil {
		return false, nil
	}
	// The mark of any arrival since the last read was cleared on entry:
	// read before waiting.
	r.short = false
	var readErr error
	err = r.rc.Read(func(fd uintptr) bool {
		r.fd, r.raw = int(fd), true
		defer func() { r.raw = false }()
		for {
			if whole(br) {
				if !frame() {
					stopped = true
					return true
				}
				continue
			}
			if br.Buffered() > 0 {
				return true // a frame's start: read the rest the ordinary way
			}
			if r.short {
				// Empty since that read: whatever comes next raises the
				// event this waits for.
				r.short = false
				return false
			}
			if _, err := br.Peek(1); err != nil {
				if errors.Is(err, errWait) {
					return false
				}
				readErr = err
				return true
			}
		}
	})
	if err == nil {
		err = readErr
	}
	return stopped, err
}

// Close closes the connection without waiting for Run. Inside its raw
// loop Run holds the socket open (net.Conn.Close waits for every read in
// progress, and the loop's frames run inside one), so a Close made from a
// frame, or by a goroutine a frame waits for, would never return. Close
// shuts the socket down at once (the peer sees the end, Run's next read
// ends) and releases it on another goroutine once Run lets go.
func (r *Reader) Close() error {
	if r.rc == nil {
		return r.nc.Close()
	}
	r.rc.Control(func(fd uintptr) { syscall.Shutdown(int(fd), syscall.SHUT_RDWR) })
	go r.nc.Close()
	return nil
}
