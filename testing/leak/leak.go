// Package leak is the tests' check that a package leaves no goroutine
// behind (go.uber.org/goleak), with the one goroutine a server may leave
// that is not ours to end: the waiter in Server.awaitRaft on a raft future
// that hashicorp/raft v1.8 never answers, because the VerifyLeader or
// GetConfiguration that made it landed in raft's buffered channel as raft
// shut down. The server's own callers stop waiting at shutdown; only that
// waiter stays, blocked in raft's Error until the process exits.
package leak

import (
	"testing"

	"go.uber.org/goleak"
)

// strandedRaftWaiter ignores the waiter of Server.awaitRaft.
var strandedRaftWaiter = goleak.IgnoreAnyFunction("github.com/chubby-dev/chubby/server.raftFutureWaiter")

// VerifyTestMain runs the package's tests and fails it if a goroutine is
// left behind, but for the stranded raft waiter and those opts ignore.
func VerifyTestMain(m *testing.M, opts ...goleak.Option) {
	goleak.VerifyTestMain(m, append(opts, strandedRaftWaiter)...)
}

// Find reports goroutines left behind, but for the stranded raft waiter,
// for a TestMain that has more to do after its tests ran.
func Find() error { return goleak.Find(strandedRaftWaiter) }
