package netproxy

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/chubby-dev/chubby/testing/wait"
)

// TestMain fails the package if a Link leaves a goroutine behind after
// Close.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// echo is a target that echoes every line back and counts connections.
type echo struct {
	ln    net.Listener
	conns atomic.Int64
	wg    sync.WaitGroup
	mu    sync.Mutex
	open  []net.Conn
}

func startEcho(t *testing.T) *echo {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	e := &echo{ln: ln}
	e.wg.Add(1)
	go func() {
		defer e.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			e.conns.Add(1)
			e.mu.Lock()
			e.open = append(e.open, c)
			e.mu.Unlock()
			e.wg.Add(1)
			go func() {
				defer e.wg.Done()
				defer c.Close()
				io.Copy(c, c)
			}()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		e.mu.Lock()
		for _, c := range e.open {
			c.Close()
		}
		e.mu.Unlock()
		e.wg.Wait()
	})
	return e
}

func (e *echo) addr() string { return e.ln.Addr().String() }

func newLink(t *testing.T, target string) *Link {
	t.Helper()
	l, err := Listen("test", target)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

func dial(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// roundTrip writes a line and reads it back within timeout.
func roundTrip(c net.Conn, line string, timeout time.Duration) (string, error) {
	c.SetDeadline(time.Now().Add(timeout))
	defer c.SetDeadline(time.Time{})
	if _, err := io.WriteString(c, line+"\n"); err != nil {
		return "", err
	}
	got, err := bufio.NewReader(c).ReadString('\n')
	return string(bytes.TrimSuffix([]byte(got), []byte("\n"))), err
}

func mustEcho(t *testing.T, c net.Conn, line string) {
	t.Helper()
	got, err := roundTrip(c, line, 5*time.Second)
	if err != nil || got != line {
		t.Fatalf("round trip of %q: got %q, %v", line, got, err)
	}
}

// wantClosed: a read on c ends (EOF or reset) within timeout, not a
// timeout; it returns the read's error.
func wantClosed(t *testing.T, c net.Conn, what string) error {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, 16)
	for {
		_, err := c.Read(buf)
		if err == nil {
			continue
		}
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			t.Fatalf("%s: the connection is still open after 5s", what)
		}
		return err
	}
}

func wantReset(t *testing.T, c net.Conn, what string) {
	t.Helper()
	if err := wantClosed(t, c, what); !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("%s: %v, want a reset", what, err)
	}
}

// wantSilent: nothing arrives on c for d, and it is not closed.
func wantSilent(t *testing.T, c net.Conn, d time.Duration, what string) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(d))
	defer c.SetReadDeadline(time.Time{})
	buf := make([]byte, 16)
	n, err := c.Read(buf)
	var ne net.Error
	if n > 0 || !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("%s: want silence for %v, got %q, %v", what, d, buf[:n], err)
	}
}

func TestPassForwards(t *testing.T) {
	e := startEcho(t)
	l := newLink(t, e.addr())
	c := dial(t, l.Addr())
	for i := range 10 {
		mustEcho(t, c, fmt.Sprintf("line %d", i))
	}
	st := l.Stats()
	if st.Accepted != 1 || st.Forwarded != 1 || st.BytesUp == 0 || st.BytesUp != st.BytesDown {
		t.Fatalf("stats %+v", st)
	}
}

func TestRefuse(t *testing.T) {
	e := startEcho(t)
	l := newLink(t, e.addr())
	old := dial(t, l.Addr())
	mustEcho(t, old, "before")
	l.Cut(Refuse)
	wantReset(t, old, "a connection open at Cut(Refuse)")
	// A new connection is reset: at connect, or at the first read if the
	// reset came after connect returned.
	if fresh, err := net.DialTimeout("tcp", l.Addr(), 5*time.Second); err == nil {
		wantReset(t, fresh, "a connection made during Cut(Refuse)")
		fresh.Close()
	} else if !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("dial during Cut(Refuse): %v, want a reset", err)
	}
	if n := e.conns.Load(); n != 1 {
		t.Fatalf("the target saw %d connections, want 1 (none while refusing)", n)
	}
	l.Up()
	mustEcho(t, dial(t, l.Addr()), "after")
	if st := l.Stats(); st.Refused != 1 || st.Cut != 1 || st.Forwarded != 2 {
		t.Fatalf("stats %+v", st)
	}
}

func TestBlackhole(t *testing.T) {
	e := startEcho(t)
	l := newLink(t, e.addr())
	old := dial(t, l.Addr())
	mustEcho(t, old, "before")
	l.Cut(Blackhole)
	wantClosed(t, old, "a connection open at Cut(Blackhole)")
	hole := dial(t, l.Addr())
	if _, err := io.WriteString(hole, "into the hole\n"); err != nil {
		t.Fatalf("a write into a blackholed connection failed: %v", err)
	}
	wantSilent(t, hole, 300*time.Millisecond, "a blackholed connection")
	if n := e.conns.Load(); n != 1 {
		t.Fatalf("the target saw %d connections, want 1 (none while blackholed)", n)
	}
	l.Up()
	wantClosed(t, hole, "a blackholed connection at Up")
	mustEcho(t, dial(t, l.Addr()), "after")
	if st := l.Stats(); st.Swallowed != 1 {
		t.Fatalf("stats %+v", st)
	}
}

func TestStallHoldsAndDelivers(t *testing.T) {
	e := startEcho(t)
	l := newLink(t, e.addr())
	old := dial(t, l.Addr())
	mustEcho(t, old, "before")
	l.Cut(Stall)
	for i := range 3 {
		if _, err := fmt.Fprintf(old, "stalled %d\n", i); err != nil {
			t.Fatal(err)
		}
	}
	wantSilent(t, old, 300*time.Millisecond, "a stalled connection")
	fresh := dial(t, l.Addr())
	if _, err := io.WriteString(fresh, "new during stall\n"); err != nil {
		t.Fatal(err)
	}
	wantSilent(t, fresh, 100*time.Millisecond, "a connection made during a stall")
	if n := e.conns.Load(); n != 1 {
		t.Fatalf("the target saw %d connections during the stall, want 1", n)
	}
	l.Up()
	old.SetReadDeadline(time.Now().Add(5 * time.Second))
	br := bufio.NewReader(old)
	for i := range 3 {
		got, err := br.ReadString('\n')
		if want := fmt.Sprintf("stalled %d\n", i); got != want || err != nil {
			t.Fatalf("after the stall: got %q, %v; want %q", got, err, want)
		}
	}
	fresh.SetReadDeadline(time.Now().Add(5 * time.Second))
	if got, err := bufio.NewReader(fresh).ReadString('\n'); got != "new during stall\n" || err != nil {
		t.Fatalf("the connection made during the stall: got %q, %v", got, err)
	}
}

func TestStallThenRefuseCloses(t *testing.T) {
	e := startEcho(t)
	l := newLink(t, e.addr())
	c := dial(t, l.Addr())
	mustEcho(t, c, "before")
	l.Cut(Stall)
	l.Cut(Refuse)
	wantClosed(t, c, "a stalled connection cut with Refuse")
}

func TestDelay(t *testing.T) {
	e := startEcho(t)
	l := newLink(t, e.addr())
	c := dial(t, l.Addr())
	mustEcho(t, c, "warm")
	const d = 40 * time.Millisecond
	l.Delay(d)
	// Many lines written at once arrive complete and in order, each at
	// least 2d (one delay each way) after it was sent.
	start := time.Now()
	var want bytes.Buffer
	for i := range 200 {
		fmt.Fprintf(&want, "line %d\n", i)
	}
	go c.Write(want.Bytes())
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	got := make([]byte, want.Len())
	if _, err := io.ReadFull(c, got); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took < 2*d {
		t.Fatalf("a round trip through a link delayed %v took %v, want at least %v", d, took, 2*d)
	}
	if !bytes.Equal(got, want.Bytes()) {
		t.Fatalf("the delayed stream was reordered or corrupted")
	}
	l.Delay(0)
	mustEcho(t, c, "undelayed")
	if m, dd := l.State(); m != Pass || dd != 0 {
		t.Fatalf("state %v %v", m, dd)
	}
}

// TestHalfClose: a dialer that closes its write side still reads the
// target's answer; the target saw EOF.
func TestHalfClose(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	served := make(chan error, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			served <- err
			return
		}
		defer c.Close()
		b, err := io.ReadAll(c) // until the dialer's half-close
		if err == nil {
			_, err = c.Write(append([]byte("got "), b...))
		}
		served <- err
	}()
	l := newLink(t, ln.Addr().String())
	c := dial(t, l.Addr())
	io.WriteString(c, "request")
	c.(*net.TCPConn).CloseWrite()
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	b, err := io.ReadAll(c)
	if err != nil || string(b) != "got request" {
		t.Fatalf("reply after half-close: %q, %v", b, err)
	}
	if err := <-served; err != nil {
		t.Fatal(err)
	}
}

func TestTargetDownClosesDialer(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := ln.Addr().String()
	ln.Close()
	l := newLink(t, dead)
	wantClosed(t, dial(t, l.Addr()), "a connection to a target that is down")
	e := startEcho(t)
	l.SetTarget(e.addr())
	mustEcho(t, dial(t, l.Addr()), "retargeted")
}

// TestCloseEndsEverything: Close returns with connections in every state
// (forwarded, stalled, waiting, swallowed) closed and no goroutine left
// (TestMain checks).
func TestCloseEndsEverything(t *testing.T) {
	e := startEcho(t)
	l, err := Listen("closing", e.addr())
	if err != nil {
		t.Fatal(err)
	}
	fwd := dial(t, l.Addr())
	mustEcho(t, fwd, "x")
	l.Cut(Stall)
	io.WriteString(fwd, "held\n")
	waiting := dial(t, l.Addr())
	l.Cut(Blackhole)
	hole := dial(t, l.Addr())
	io.WriteString(hole, "swallowed\n")
	done := make(chan error, 1)
	go func() { done <- l.Close() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not return")
	}
	for _, c := range []net.Conn{fwd, waiting, hole} {
		wantClosed(t, c, "a connection after Close")
	}
	if _, err := net.DialTimeout("tcp", l.Addr(), time.Second); err == nil {
		t.Fatalf("a closed link still accepts")
	}
	if err := l.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}

func TestModeString(t *testing.T) {
	for m, s := range map[Mode]string{Pass: "up", Refuse: "refuse", Blackhole: "blackhole", Stall: "stall"} {
		if m.String() != s {
			t.Errorf("%d: %q", int(m), m.String())
		}
	}
}

// TestJitterKeepsOrder: with a random delay per chunk, a stream of many
// small writes arrives complete and in order.
func TestJitterKeepsOrder(t *testing.T) {
	e := startEcho(t)
	l := newLink(t, e.addr())
	var calls atomic.Int64
	l.Jitter(func() time.Duration {
		// A fixed pseudo-random sequence of 0–19 ms; safe for concurrent use.
		return time.Duration(calls.Add(1)*7919%20) * time.Millisecond
	})
	c := dial(t, l.Addr())
	var want bytes.Buffer
	for i := range 300 {
		fmt.Fprintf(&want, "line %d\n", i)
	}
	go func() {
		for _, line := range bytes.SplitAfter(want.Bytes(), []byte("\n")) {
			c.Write(line) // many chunks, each with its own sample
		}
	}()
	c.SetReadDeadline(time.Now().Add(20 * time.Second))
	got := make([]byte, want.Len())
	if _, err := io.ReadFull(c, got); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want.Bytes()) {
		t.Fatalf("the jittered stream was reordered or corrupted")
	}
	if calls.Load() < 2 {
		t.Fatalf("jitter sampled %d times, want one sample per chunk", calls.Load())
	}
}

// TestJitterHoldsBackLaterChunks: a chunk whose sample is long delays the
// chunks read after it, even those whose own sample is 0 (due = max(the
// previous chunk's due, read time + sample)); jitter adds to Delay; nil
// turns it off.
func TestJitterHoldsBackLaterChunks(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	type arrival struct {
		line string
		at   time.Time
	}
	arrivals := make(chan arrival, 10)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		br := bufio.NewReader(c)
		for {
			line, err := br.ReadString('\n')
			if err != nil {
				return
			}
			arrivals <- arrival{line, time.Now()}
		}
	}()
	l := newLink(t, ln.Addr().String())
	const long, delay = 300 * time.Millisecond, 20 * time.Millisecond
	l.Delay(delay)
	var n atomic.Int64
	l.Jitter(func() time.Duration {
		if n.Add(1) == 1 {
			return long // the first chunk only
		}
		return -time.Second // counts as 0
	})
	c := dial(t, l.Addr())
	sent1 := time.Now()
	io.WriteString(c, "first\n")
	// Once the link has read the first line as a chunk of its own (and
	// sampled its jitter), the second chunk, sampled 0, must still wait
	// for the first.
	if !wait.Until(5*time.Second, func() bool { return n.Load() == 1 }) {
		t.Fatal("the link did not read the first line")
	}
	io.WriteString(c, "second\n")
	next := func() arrival {
		select {
		case a := <-arrivals:
			return a
		case <-time.After(5 * time.Second):
			t.Fatal("no line arrived")
			return arrival{}
		}
	}
	a1, a2 := next(), next()
	if a1.line != "first\n" || a2.line != "second\n" {
		t.Fatalf("lines %q, %q", a1.line, a2.line)
	}
	if got := a1.at.Sub(sent1); got < long+delay {
		t.Fatalf("the first chunk took %v, want at least its sample %v plus the delay %v", got, long, delay)
	}
	if got := a2.at.Sub(sent1); got < long+delay {
		t.Fatalf("the second chunk arrived %v after the first was sent, want it held back at least %v", got, long+delay)
	}
	if n.Load() != 2 {
		t.Fatalf("jitter sampled %d times for two chunks", n.Load())
	}
	l.Jitter(nil)
	l.Delay(0)
	sent3 := time.Now()
	io.WriteString(c, "third\n")
	if a3 := next(); a3.at.Sub(sent3) >= long {
		t.Fatalf("with jitter off a chunk took %v", a3.at.Sub(sent3))
	}
	if n.Load() != 2 {
		t.Fatalf("jitter sampled after it was turned off")
	}
}
