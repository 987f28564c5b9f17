// Package rawsock makes the read and write system calls of a non-blocking
// socket without the Go scheduler's system-call hand-off.
//
// syscall.Read and syscall.Write tell the scheduler that the thread enters
// a system call that may block. If the call lasts longer than the runtime
// monitor's tick (20 µs to 10 ms) while other goroutines wait to run, the
// monitor hands the thread's processor to another thread, waking or
// starting one, and the returning thread then has to find a processor
// again or sleep. A socket that is non-blocking never sleeps in read or
// write (it answers EAGAIN), but on loopback a write carries the receiving
// socket's TCP work and its wake-up, and on a virtual machine it often
// takes longer than that tick: at 64 sessions the monitor's hand-offs and
// the thread wake-ups they cause were about a fifth of a client process's
// CPU (issue 13). syscall.RawSyscall makes the same call with the thread
// keeping its processor, as for any other short piece of work.
//
// Only for sockets in non-blocking mode, which every net.Conn's socket is:
// a blocking call made this way would hold a processor for as long as it
// blocks. Callers reach the socket through syscall.RawConn, whose Read and
// Write wait for readiness (with the connection's deadlines) when the call
// answers EAGAIN.
package rawsock

import (
	"net"
	"syscall"
	"unsafe"
)

// Conn is nc's socket for raw calls: its syscall.RawConn, or nil when nc
// does not give one (TLS, net.Pipe).
func Conn(nc net.Conn) syscall.RawConn {
	sc, ok := nc.(syscall.Conn)
	if !ok {
		return nil
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return nil
	}
	return rc
}

// Read reads a non-blocking socket into p (not empty): the bytes read, or
// the error number (EAGAIN when nothing is there; n == 0 with no error at
// the end of the stream).
func Read(fd int, p []byte) (int, syscall.Errno) {
	n, _, e := syscall.RawSyscall(syscall.SYS_READ, uintptr(fd), uintptr(unsafe.Pointer(&p[0])), uintptr(len(p)))
	if e != 0 {
		return 0, e
	}
	return int(n), 0
}

// write writes p (not empty) to a non-blocking socket.
func write(fd uintptr, p []byte) (int, syscall.Errno) {
	n, _, e := syscall.RawSyscall(syscall.SYS_WRITE, fd, uintptr(unsafe.Pointer(&p[0])), uintptr(len(p)))
	if e != 0 {
		return 0, e
	}
	return int(n), 0
}

// Writer writes whole buffers to the socket of a syscall.RawConn. One
// goroutine writes at a time.
type Writer struct {
	rc syscall.RawConn
	fn func(fd uintptr) bool // w.write, made once: a write allocates nothing
	p  []byte
	n  int
	e  syscall.Errno
}

// NewWriter writes to the socket of rc.
func NewWriter(rc syscall.RawConn) *Writer {
	w := &Writer{rc: rc}
	w.fn = w.write
	return w
}

// Write writes p whole, waiting for room when the socket's buffer is full,
// until the connection's write deadline (os.ErrDeadlineExceeded) or its
// close (net.ErrClosed). It returns the bytes written and the error that
// stopped it.
func (w *Writer) Write(p []byte) (int, error) {
	w.p, w.n, w.e = p, 0, 0
	err := w.rc.Write(w.fn)
	n, e := w.n, w.e
	w.p = nil
	if err == nil && e != 0 {
		err = e
	}
	return n, err
}

// write is the RawConn.Write callback: false asks it to wait until the
// socket is writable and call again.
func (w *Writer) write(fd uintptr) bool {
	for w.n < len(w.p) {
		m, e := write(fd, w.p[w.n:])
		switch e {
		case 0:
			w.n += m
		case syscall.EINTR:
		case syscall.EAGAIN:
			return false
		default:
			w.e = e
			return true
		}
	}
	return true
}
