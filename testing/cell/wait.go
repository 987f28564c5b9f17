package cell

import (
	"testing"
	"time"
)

// WaitTimeout is how long WaitFor waits by default: far longer than any real
// goroutine of the cell needs, so hitting it means a bug, not a slow machine.
const WaitTimeout = 10 * time.Second

// WaitFor polls cond every few milliseconds until it is true, failing the
// test after timeout (WaitTimeout if 0) with a message naming what it waited
// for. Use it for work done by real goroutines (a raft apply, a reply on a
// TCP connection); lease and lock-delay deadlines are moved by the clock, not
// waited for.
func WaitFor(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	if !Eventually(timeout, cond) {
		t.Fatalf("timed out after %v waiting for %s", orDefault(timeout), what)
	}
}

// Eventually polls cond like WaitFor and reports whether it became true in
// time, for callers that want to fail with their own message.
func Eventually(timeout time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(orDefault(timeout))
	sleep := time.Millisecond
	for {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(sleep)
		if sleep < 10*time.Millisecond {
			sleep *= 2
		}
	}
}

// Never checks that cond stays false for d of real time. It is the negative
// counterpart of WaitFor, for asserting that something real goroutines could
// do (send a grant, close a channel) did not happen; it is only as strong as
// d, so prefer a positive check where one exists.
func Never(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if cond() {
			t.Fatalf("%s happened, but must not have", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
	if cond() {
		t.Fatalf("%s happened, but must not have", what)
	}
}

func orDefault(d time.Duration) time.Duration {
	if d <= 0 {
		return WaitTimeout
	}
	return d
}

// WaitApplied waits until the server's applied raft index is above index and
// returns it: the way to know a proposed command (a queued Acquire, an
// expiry) has reached the state machine.
func (c *Cell) WaitApplied(t testing.TB, index uint64) uint64 {
	t.Helper()
	var got uint64
	WaitFor(t, 0, "a raft entry after index "+itoa(index)+" to be applied", func() bool {
		got = c.Status().Applied
		return got > index
	})
	return got
}

func itoa(v uint64) string {
	if v == 0 {
		return "0"
	}
	var b [20]byte
	i := len(b)
	for v > 0 {
		i--
		b[i] = byte('0' + v%10)
		v /= 10
	}
	return string(b[i:])
}
