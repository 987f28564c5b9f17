package edgeread

import (
	"bufio"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/chubby-dev/chubby/internal/tcptest"
	"github.com/chubby-dev/chubby/wire"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// pair is a loopback TCP connection: the test writes to peer and reads
// from r.
func pair(t *testing.T) (nc net.Conn, r *Reader, br *bufio.Reader, peer net.Conn) {
	t.Helper()
	peer, nc = tcptest.Pair(t)
	r = New(nc)
	return nc, r, bufio.NewReaderSize(r, 16<<10), peer
}

func frame(t *testing.T, body string) []byte {
	t.Helper()
	var b []byte
	b = append(b, 0, 0, 0, byte(len(body)))
	return append(b, body...)
}

// serve runs Run in the background; it sends each frame's body on got
// and Run's end on done.
func serve(t *testing.T, r *Reader, br *bufio.Reader, onFrame func(string) bool) (got chan string, done chan error) {
	got, done = make(chan string, 100), make(chan error, 1)
	handle := func() bool {
		b, err := wire.ReadFrame(br)
		if err != nil {
			done <- err
			return false
		}
		got <- string(b)
		return onFrame == nil || onFrame(string(b))
	}
	go func() {
		if err := r.Run(br, wire.FrameBuffered, handle); err != nil {
			done <- err
		}
	}()
	return got, done
}

func recv(t *testing.T, got chan string, want string) {
	t.Helper()
	select {
	case s := <-got:
		if s != want {
			t.Fatalf("got frame %q, want %q", s, want)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("frame %q never came", want)
	}
}

// The property the package rests on: a call that arrives after the short
// read that emptied the socket, while the frame before it is still being
// handled, is read (its readiness event is not lost). Each frame here is
// handled only once the peer has sent the next, so every frame but the
// first arrives during the handling of the one before.
func TestArrivalDuringHandlingIsNotLost(t *testing.T) {
	_, r, br, peer := pair(t)
	const n = 200
	sent := make(chan int, n)
	got, done := serve(t, r, br, func(string) bool {
		<-sent // the next frame is on the wire before this one returns
		return true
	})
	for i := 0; i < n; i++ {
		body := string(rune('a' + i%26))
		if _, err := peer.Write(frame(t, body)); err != nil {
			t.Fatal(err)
		}
		if i > 0 {
			sent <- i
		}
		recv(t, got, body)
	}
	sent <- n
	peer.Close()
	if err := <-done; !errors.Is(err, io.EOF) {
		t.Fatalf("Run ended with %v, want EOF", err)
	}
}

// Frames sent together, and one split across writes (the second part
// only after a pause, so the first part is read alone), all arrive.
func TestBurstsAndSplitFrames(t *testing.T) {
	_, r, br, peer := pair(t)
	got, done := serve(t, r, br, nil)
	var burst []byte
	for _, s := range []string{"one", "two", "three"} {
		burst = append(burst, frame(t, s)...)
	}
	peer.Write(burst)
	for _, s := range []string{"one", "two", "three"} {
		recv(t, got, s)
	}
	f := frame(t, "split")
	peer.Write(f[:3])
	time.Sleep(20 * time.Millisecond) // most likely the half frame is read on its own (the test holds either way)
	peer.Write(f[3:])
	recv(t, got, "split")
	peer.Write(frame(t, "after"))
	recv(t, got, "after")
	peer.Close()
	if err := <-done; !errors.Is(err, io.EOF) {
		t.Fatalf("Run ended with %v, want EOF", err)
	}
}

// A frame's handler may close the connection through the Reader (a server
// answering garbage, a client failing its transport): Close returns at
// once, the peer sees the end and Run stops, where net.Conn.Close would
// wait for Run forever.
func TestCloseFromAFrame(t *testing.T) {
	_, r, br, peer := pair(t)
	closed := make(chan struct{})
	got, done := serve(t, r, br, func(s string) bool {
		if s == "close" {
			r.Close()
			close(closed)
		}
		return true
	})
	peer.Write(frame(t, "close"))
	recv(t, got, "close")
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Fatal("Close from inside a frame did not return")
	}
	peer.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := peer.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
		t.Fatalf("the peer read %v after Close, want EOF", err)
	}
	endsAfterClose(t, done)
}

// Close from another goroutine while Run waits ends Run.
func TestCloseWhileWaiting(t *testing.T) {
	_, r, br, _ := pair(t)
	_, done := serve(t, r, br, nil)
	// Most likely Run waits for a frame by now; it must end either way.
	time.Sleep(20 * time.Millisecond)
	r.Close()
	endsAfterClose(t, done)
}

// A connection that is not a raw socket (here net.Pipe; TLS alike) is left
// to the caller's ordinary reads: serve returns at once, having read
// nothing.
func TestNotARawSocket(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	r := New(a)
	br := bufio.NewReader(r)
	stopped, err := r.serve(br, wire.FrameBuffered, func() bool { t.Error("frame called"); return false })
	if stopped || err != nil || br.Buffered() != 0 {
		t.Fatalf("serve on a pipe = %v, %v (buffered %d); want false, nil, nothing read", stopped, err, br.Buffered())
	}
	go b.Write(frame(t, "ordinary"))
	body, err := wire.ReadFrame(br)
	if err != nil || string(body) != "ordinary" {
		t.Fatalf("ordinary read = %q, %v", body, err)
	}
}

// endsAfterClose: Run (its end on done) ends, with an error, after Close.
func endsAfterClose(t *testing.T, done chan error) {
	t.Helper()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("Run ended without an error after Close")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not end after Close")
	}
}
