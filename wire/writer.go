package wire

import (
	"net"
	"sync"
	"time"

	"github.com/chubby-dev/chubby/internal/rawsock"
)

// FrameWriter writes frames to a connection for many goroutines at once:
// the frames that senders hand it while a write is under way go out
// together in the next write, so a connection that carries the calls of
// many sessions (or the replies to them) makes a system call per batch of
// frames, not per frame. Write returns once its frame is written — a
// sender is held back by a slow peer as with a write of its own — or the
// connection failed. A connection that gives its socket (a *net.TCPConn;
// not TLS) is written through internal/rawsock, without the scheduler's
// system-call hand-off; the write deadline holds the same way.
type FrameWriter struct {
	nc      net.Conn
	raw     *rawsock.Writer // nc's socket, written raw (nil: through nc)
	timeout time.Duration

	mu      sync.Mutex
	cond    sync.Cond
	out     []byte // frames waiting for the next write
	spare   []byte // the buffer of the last write, for reuse
	queued  uint64 // frames handed in
	written uint64 // frames written (the first `written` handed in)
	writing bool
	err     error
	// deadline is the connection's write deadline, read and set only by
	// the sender that writes (writing).
	deadline time.Time
}

// NewFrameWriter writes to nc, giving each write between timeout/2 and
// timeout (see armDeadline).
func NewFrameWriter(nc net.Conn, timeout time.Duration) *FrameWriter {
	w := &FrameWriter{nc: nc, timeout: timeout}
	if rc := rawsock.Conn(nc); rc != nil {
		w.raw = rawsock.NewWriter(rc)
	}
	w.cond.L = &w.mu
	return w
}

// maxKeptBuffer: a write buffer larger than this is not kept for reuse.
const maxKeptBuffer = 64 << 10

// Write writes frame (a whole frame, as AppendFrame makes) and returns
// when it is on the connection, or the error that failed the connection
// (every later Write fails with it too).
func (w *FrameWriter) Write(frame []byte) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err != nil {
		return w.err
	}
	w.out = append(w.out, frame...)
	w.queued++
	mine := w.queued
	for w.writing {
		if w.written >= mine || w.err != nil {
			return w.err
		}
		w.cond.Wait()
	}
	if w.written >= mine || w.err != nil {
		return w.err
	}
	// This sender writes: its frame and everything queued, then what
	// queued meanwhile, until nothing waits.
	w.writing = true
	for len(w.out) > 0 && w.err == nil {
		buf, upTo := w.out, w.queued
		w.out = w.spare[:0]
		w.mu.Unlock()
		w.armDeadline()
		var err error
		if w.raw != nil {
			_, err = w.raw.Write(buf)
			if err != nil {
				err = &net.OpError{Op: "write", Net: "tcp", Source: w.nc.LocalAddr(), Addr: w.nc.RemoteAddr(), Err: err}
			}
		} else {
			_, err = w.nc.Write(buf)
		}
		w.mu.Lock()
		if err != nil {
			w.err = err
		}
		w.written = upTo
		if cap(buf) <= maxKeptBuffer {
			w.spare = buf[:0]
		} else {
			w.spare = nil
		}
		w.cond.Broadcast()
	}
	w.writing = false
	w.cond.Broadcast()
	return w.err
}

// armDeadline makes sure the next write has at least half of timeout
// before the connection's write deadline. Setting a deadline moves a
// runtime timer (with the read deadline the server also set and cleared
// per call, 2-3 % of the master's CPU at 64 clients, issue 13), so it is
// moved only when less than half is left: a write blocked by a peer that
// does not read fails after between timeout/2 and timeout.
func (w *FrameWriter) armDeadline() {
	now := time.Now()
	if w.deadline.Sub(now) >= w.timeout/2 {
		return
	}
	w.deadline = now.Add(w.timeout)
	w.nc.SetWriteDeadline(w.deadline)
}
