package rawsock

import (
	"bytes"
	"errors"
	"io"
	"net"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/chubby-dev/chubby/internal/tcptest"
)

// TestWriteFillsAndWaits: a write far larger than the socket buffers,
// to a peer that reads slowly, arrives whole and in order: Writer.Write
// continues after partial writes and waits for room on EAGAIN.
func TestWriteFillsAndWaits(t *testing.T) {
	a, b := tcptest.Pair(t)
	want := make([]byte, 16<<20)
	for i := range want {
		want[i] = byte(i * 7)
	}
	got := make(chan []byte, 1)
	go func() {
		var buf bytes.Buffer
		chunk := make([]byte, 64<<10)
		for {
			n, err := b.Read(chunk)
			buf.Write(chunk[:n])
			if err != nil {
				got <- buf.Bytes()
				return
			}
			if buf.Len() < 1<<20 {
				time.Sleep(time.Millisecond) // slow at first: the sender meets a full buffer
			}
		}
	}()
	n, err := NewWriter(Conn(a)).Write(want)
	if err != nil || n != len(want) {
		t.Fatalf("Writer.Write = %d, %v; want %d, nil", n, err, len(want))
	}
	a.CloseWrite()
	if g := <-got; !bytes.Equal(g, want) {
		t.Fatalf("the peer read %d bytes, not the %d written in order", len(g), len(want))
	}
}

// TestWriteDeadline: a write to a peer that never reads fails with the
// connection's write deadline once the buffers are full, not never.
func TestWriteDeadline(t *testing.T) {
	a, _ := tcptest.Pair(t)
	a.SetWriteDeadline(time.Now().Add(300 * time.Millisecond))
	start := time.Now()
	n, err := NewWriter(Conn(a)).Write(make([]byte, 64<<20))
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("Writer.Write to a peer that reads nothing: %d bytes, %v; want a deadline error", n, err)
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Fatalf("the deadline of 300ms ended the write after %v", took)
	}
	if n == 0 || n >= 64<<20 {
		t.Fatalf("%d bytes written before the deadline; want some, not all", n)
	}
}

// TestWritePeerGone: writing to a connection whose peer closed fails
// (EPIPE or a reset), and one closed locally fails with net.ErrClosed.
func TestWritePeerGone(t *testing.T) {
	a, b := tcptest.Pair(t)
	b.Close()
	var err error
	for i := 0; i < 100 && err == nil; i++ { // the first write may still be accepted
		_, err = NewWriter(Conn(a)).Write([]byte("after the peer left"))
		time.Sleep(5 * time.Millisecond)
	}
	if !errors.Is(err, syscall.EPIPE) && !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("writes to a closed peer: %v, want EPIPE or ECONNRESET", err)
	}
	c, _ := tcptest.Pair(t)
	rc := Conn(c)
	c.Close()
	if _, err := NewWriter(rc).Write([]byte("x")); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("write on a closed connection: %v, want net.ErrClosed", err)
	}
}

// TestRead: Read returns EAGAIN when nothing is there (it never waits),
// what arrived once the poller reports the socket readable, and 0 at the
// end of the stream.
func TestRead(t *testing.T) {
	a, b := tcptest.Pair(t)
	rc := Conn(a)
	// read reads once; with wait, an EAGAIN waits for readiness and reads
	// again, as edgeread's loop does.
	read := func(wait bool) (string, syscall.Errno) {
		var s string
		var e syscall.Errno
		if err := rc.Read(func(fd uintptr) bool {
			p := make([]byte, 100)
			n, err := Read(int(fd), p)
			s, e = string(p[:n]), err
			return !wait || e != syscall.EAGAIN
		}); err != nil {
			t.Fatal(err)
		}
		return s, e
	}
	if s, e := read(false); e != syscall.EAGAIN {
		t.Fatalf("Read of an empty socket = %q, %v; want EAGAIN", s, e)
	}
	b.Write([]byte("hello"))
	if s, e := read(true); e != 0 || s != "hello" {
		t.Fatalf("Read after the peer wrote = %q, %v; want hello", s, e)
	}
	b.Close()
	if s, e := read(true); e != 0 || s != "" {
		t.Fatalf("Read after the peer closed = %q, %v; want the end (0 bytes)", s, e)
	}
}

// TestConn: a TCP connection gives its socket; one that has none (an
// in-memory pipe) gives nil, and is written the ordinary way.
func TestConn(t *testing.T) {
	a, _ := tcptest.Pair(t)
	if Conn(a) == nil {
		t.Fatal("Conn of a TCP connection is nil")
	}
	p, q := net.Pipe()
	defer p.Close()
	defer q.Close()
	if rc := Conn(p); rc != nil {
		t.Fatalf("Conn of a net.Pipe = %v, want nil", rc)
	}
}

// TestWriteAllocatesNothing: a Writer's write of a small buffer, the
// per-reply path of every connection, allocates nothing.
func TestWriteAllocatesNothing(t *testing.T) {
	a, b := tcptest.Pair(t)
	go io.Copy(io.Discard, b)
	w := NewWriter(Conn(a))
	p := []byte("a reply frame")
	if n := testing.AllocsPerRun(1000, func() {
		if _, err := w.Write(p); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Fatalf("%v allocations per write, want 0", n)
	}
}
