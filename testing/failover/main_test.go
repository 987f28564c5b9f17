package failover_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if a test leaves a goroutine behind: a server
// whose raft, listeners or timers outlive Kill or the cluster's teardown, or
// a client whose KeepAlive loop outlives Close.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
