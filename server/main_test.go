package server_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if a test leaves a goroutine behind: a server
// that does not stop its raft, listeners, connection readers, lease timers'
// expiry goroutines, or a client whose KeepAlive loop outlives Close.
// Ignored: the waiter on a raft future that raft never answers when its
// Shutdown races the call (Server.awaitRaft).
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreAnyFunction("github.com/chubby-dev/chubby/server.raftFutureWaiter"))
}
