package wire

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net"
	"os"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chubby-dev/chubby/internal/tcptest"
)

// countingConn counts the writes made to a net.Conn.
type countingConn struct {
	net.Conn
	mu     sync.Mutex
	writes int
	// beforeFirst, if set, runs before the first write goes out.
	beforeFirst func()
}

func (c *countingConn) Write(b []byte) (int, error) {
	c.mu.Lock()
	c.writes++
	first := c.writes == 1
	c.mu.Unlock()
	if first && c.beforeFirst != nil {
		c.beforeFirst()
	}
	return c.Conn.Write(b)
}

// TestFrameWriterCoalesces: frames written by many goroutines at once all
// arrive whole and in one piece each, in fewer writes than frames (those
// handed in while a write is under way go out together in the next), and
// each Write returns only once its frame is on the connection.
func TestFrameWriterCoalesces(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	cc := &countingConn{Conn: a}
	w := NewFrameWriter(cc, 10*time.Second)
	const senders, each = 8, 200
	// The first write waits until every sender has handed in a frame, so
	// the frames of the other seven wait behind a write under way however
	// the goroutines are scheduled: they must go out together.
	cc.beforeFirst = func() {
		give := time.Now().Add(10 * time.Second)
		for {
			w.mu.Lock()
			n := w.queued
			w.mu.Unlock()
			if n >= senders {
				return
			}
			if time.Now().After(give) {
				t.Errorf("only %d of %d senders handed in a frame in 10 s", n, senders)
				return
			}
			runtime.Gosched()
		}
	}
	got := make(chan map[string]int, 1)
	go func() {
		seen := map[string]int{}
		br := bufio.NewReader(b)
		for range senders * each {
			f, err := ReadFrame(br)
			if err != nil {
				t.Error(err)
				break
			}
			seen[string(f)]++
		}
		got <- seen
	}()
	var wg sync.WaitGroup
	for s := range senders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				f, err := AppendFrame(nil, []int{s, i})
				if err != nil {
					t.Error(err)
					return
				}
				if err := w.Write(f); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	seen := <-got
	if len(seen) != senders*each {
		t.Fatalf("%d distinct frames read, want %d", len(seen), senders*each)
	}
	for s := range senders {
		for i := range each {
			body, _ := AppendFrame(nil, []int{s, i})
			if seen[string(body[4:])] != 1 {
				t.Fatalf("frame %d/%d read %d times", s, i, seen[string(body[4:])])
			}
		}
	}
	if cc.writes >= senders*each {
		t.Errorf("%d writes for %d frames from %d senders at once: nothing coalesced", cc.writes, senders*each, senders)
	}
	t.Logf("%d frames in %d writes", senders*each, cc.writes)
}

// TestFrameWriterFails: once a write fails, that Write and every later one
// return the error.
func TestFrameWriterFails(t *testing.T) {
	a, b := net.Pipe()
	b.Close()
	w := NewFrameWriter(a, 10*time.Second)
	f, _ := AppendFrame(nil, "x")
	if err := w.Write(f); err == nil {
		t.Fatal("Write to a closed pipe succeeded")
	}
	if err := w.Write(bytes.Clone(f)); err == nil {
		t.Fatal("a Write after a failure succeeded")
	}
}

// TestFrameWriterTimesOutStuckPeer: a write to a peer that reads nothing
// fails once the write deadline passes (between timeout/2 and timeout
// after the first write), not never.
func TestFrameWriterTimesOutStuckPeer(t *testing.T) {
	a, b := net.Pipe() // unbuffered: a write waits for a read
	defer b.Close()
	const timeout = 200 * time.Millisecond
	w := NewFrameWriter(a, timeout)
	f, _ := AppendFrame(nil, "x")
	start := time.Now()
	err := w.Write(f)
	took := time.Since(start)
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("Write to a peer that never reads: %v, want a deadline error", err)
	}
	if took < timeout/2 || took > 5*time.Second {
		t.Fatalf("the write failed after %v, want between %v and a few seconds", took, timeout/2)
	}
}

// TestFrameWriterTCPStuckPeer: on a TCP connection (written through its
// raw socket, internal/rawsock) frames written to a peer that reads
// nothing fail with the write deadline once the socket buffers are full;
// frames the peer reads arrive whole and in order.
func TestFrameWriterTCPStuckPeer(t *testing.T) {
	a, b := tcptest.Pair(t)

	w := NewFrameWriter(a, 300*time.Millisecond)
	body := strings.Repeat("x", 32<<10)
	f, _ := AppendFrame(nil, body)
	// Read by the peer: frames arrive whole.
	for range 3 {
		if err := w.Write(bytes.Clone(f)); err != nil {
			t.Fatal(err)
		}
	}
	br := bufio.NewReader(b)
	for i := range 3 {
		var got string
		frame, err := ReadFrame(br)
		if err == nil {
			err = Unmarshal(frame, &got)
		}
		if err != nil || got != body {
			t.Fatalf("frame %d: %d bytes, %v", i, len(got), err)
		}
	}
	// Not read: the writes fill the buffers and then fail.
	start := time.Now()
	for i := 0; ; i++ {
		err := w.Write(bytes.Clone(f))
		if err == nil {
			if time.Since(start) > 10*time.Second {
				t.Fatalf("%d frames written to a peer that reads nothing, none failed", i)
			}
			continue
		}
		if !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("write %d to a peer that reads nothing: %v, want a deadline error", i, err)
		}
		break
	}
}

// TestFrameWriterMovesDeadlineAlong: the deadline is set lazily, but a
// connection that keeps writing for longer than timeout never meets it.
func TestFrameWriterMovesDeadlineAlong(t *testing.T) {
	a, b := net.Pipe()
	defer b.Close()
	go io.Copy(io.Discard, b)
	const timeout = 400 * time.Millisecond
	w := NewFrameWriter(a, timeout)
	start := time.Now()
	for i := 0; time.Since(start) < 3*timeout; i++ {
		f, _ := AppendFrame(nil, i)
		if err := w.Write(f); err != nil {
			t.Fatalf("write %d, %v after the first: %v", i, time.Since(start), err)
		}
		time.Sleep(timeout / 8)
	}
}

// TestFrameBuffered: a frame counts as buffered only once its header and
// its whole body are in the reader's buffer.
func TestFrameBuffered(t *testing.T) {
	f, _ := AppendFrame(nil, "some body")
	two := append(bytes.Clone(f), f...)
	for cut := 0; cut <= len(f); cut++ {
		br := bufio.NewReader(bytes.NewReader(two[:cut]))
		br.Peek(cut) // what arrived is in the buffer
		if got, want := FrameBuffered(br), cut == len(f); got != want {
			t.Fatalf("%d of %d bytes buffered: FrameBuffered %v, want %v", cut, len(f), got, want)
		}
	}
	br := bufio.NewReader(bytes.NewReader(two))
	br.Peek(len(two))
	if !FrameBuffered(br) {
		t.Fatal("two whole frames buffered: FrameBuffered false")
	}
	if _, err := ReadFrame(br); err != nil || !FrameBuffered(br) {
		t.Fatalf("after reading the first frame (err %v), the second is not seen buffered", err)
	}
}

// TestFrameBufReusesItsBuffer: a frame encoded in a reused FrameBuf is the
// frame AppendFrame makes, and encoding a reply into a pooled buffer
// allocates nothing once the pool is warm (the buffer of every call and
// reply used to be allocated afresh; with the pool it is not).
func TestFrameBufReusesItsBuffer(t *testing.T) {
	resp := &Response{ID: 7, Body: bytes.Repeat([]byte("b"), 100)}
	want, err := AppendFrame(nil, resp)
	if err != nil {
		t.Fatal(err)
	}
	fb := GetFrameBuf()
	for range 2 { // the second time into the buffer the first one grew
		got, err := fb.Encode(resp)
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("Encode = %x, %v; want %x", got, err, want)
		}
	}
	fb.Free()
	allocs := testing.AllocsPerRun(200, func() {
		fb := GetFrameBuf()
		if _, err := fb.Encode(resp); err != nil {
			t.Fatal(err)
		}
		fb.Free()
	})
	if allocs > 0 && !raceEnabled {
		t.Errorf("Encode into a pooled FrameBuf: %.1f allocations, want 0", allocs)
	}
	// A frame too large is refused and leaves nothing behind.
	fb = GetFrameBuf()
	defer fb.Free()
	if _, err := fb.Encode(&Response{ID: 8, Body: make([]byte, MaxFrame+1)}); !errors.Is(err, ErrFrameTooLarge) {
		t.Fatalf("oversize frame: %v, want ErrFrameTooLarge", err)
	}
	if got, err := fb.Encode(resp); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("Encode after a refused frame = %x, %v; want %x", got, err, want)
	}
}
