package wire

import (
	"bufio"
	"bytes"
	"net"
	"sync"
	"testing"
	"time"
)

// countingConn counts the writes made to a net.Conn.
type countingConn struct {
	net.Conn
	mu     sync.Mutex
	writes int
}

func (c *countingConn) Write(b []byte) (int, error) {
	c.mu.Lock()
	c.writes++
	c.mu.Unlock()
	return c.Conn.Write(b)
}

// TestFrameWriterCoalesces: frames written by many goroutines at once all
// arrive whole and in one piece each, in fewer writes than frames while
// the peer reads slowly, and each Write returns only once its frame is on
// the connection.
func TestFrameWriterCoalesces(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	cc := &countingConn{Conn: a}
	w := NewFrameWriter(cc, 10*time.Second)
	const senders, each = 8, 200
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
