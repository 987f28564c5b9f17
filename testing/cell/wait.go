package cell

import (
	"strconv"
	"testing"
	"time"

	"github.com/chubby-dev/chubby/testing/wait"
)

// WaitTimeout, WaitFor, Eventually and Never are testing/wait's Timeout,
// For, Until and Never under their old names, left for testing/nemesis
// (which another branch owns); new code calls wait directly. Delete them
// once nemesis does.
const WaitTimeout = wait.Timeout

// WaitFor is wait.For.
func WaitFor(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	wait.For(t, timeout, what, cond)
}

// Eventually is wait.Until.
func Eventually(timeout time.Duration, cond func() bool) bool {
	return wait.Until(timeout, cond)
}

// Never is wait.Never.
func Never(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	wait.Never(t, d, what, cond)
}

// WaitApplied waits until the server's applied raft index is above index and
// returns it: the way to know a proposed command (a queued Acquire, an
// expiry) has reached the state machine.
func (c *Cell) WaitApplied(t testing.TB, index uint64) uint64 {
	t.Helper()
	var got uint64
	wait.For(t, 0, "a raft entry after index "+strconv.FormatUint(index, 10)+" to be applied", func() bool {
		got = c.Status().Applied
		return got > index
	})
	return got
}
