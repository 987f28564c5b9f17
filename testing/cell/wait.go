package cell

import (
	"strconv"
	"testing"

	"github.com/chubby-dev/chubby/testing/wait"
)

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
