package failover_test

import (
	"testing"

	"github.com/chubby-dev/chubby/testing/leak"
)

// TestMain fails the package if a test leaves a goroutine behind: a server
// whose raft, listeners or timers outlive Kill or the cluster's teardown, or
// a client whose KeepAlive loop outlives Close.
// (testing/leak names the one goroutine a server may leave.)
func TestMain(m *testing.M) { leak.VerifyTestMain(m) }
