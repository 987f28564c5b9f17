package server_test

import (
	"testing"

	"github.com/chubby-dev/chubby/testing/leak"
)

// TestMain fails the package if a test leaves a goroutine behind: a server
// that does not stop its raft, listeners, connection readers, lease timers'
// expiry goroutines, or a client whose KeepAlive loop outlives Close.
// (testing/leak names the one goroutine a server may leave.)
func TestMain(m *testing.M) { leak.VerifyTestMain(m) }
