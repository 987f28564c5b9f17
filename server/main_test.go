package server_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if a test leaves a goroutine behind: a server
// that does not stop its raft, listeners, connection readers, lease timers'
// expiry goroutines, or a client whose KeepAlive loop outlives Close.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
