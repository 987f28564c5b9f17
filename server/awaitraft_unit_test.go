package server

import (
	"errors"
	"testing"

	"github.com/hashicorp/raft"
)

// strandedFuture is a raft future that is never answered, like a
// VerifyLeader that landed in raft's buffered channel after its main loop
// exited.
type strandedFuture struct{ never chan struct{} }

func (f strandedFuture) Error() error { <-f.never; return nil }

type answeredFuture struct{ err error }

func (f answeredFuture) Error() error { return f.err }

// TestAwaitRaftEndsAtShutdown: a caller waiting on a raft future that raft
// never answers (Shutdown raced the call) stops waiting when the server
// shuts down, with raft's shutdown error, so lease expiry and reads do not
// hang; an answered future gives its own result.
func TestAwaitRaftEndsAtShutdown(t *testing.T) {
	s := &Server{shutdown: make(chan struct{})}
	want := errors.New("leadership lost")
	if err := s.awaitRaft(answeredFuture{want}); err != want {
		t.Fatalf("answered future: got %v, want %v", err, want)
	}
	if err := s.awaitRaft(answeredFuture{}); err != nil {
		t.Fatalf("answered future: got %v, want nil", err)
	}
	f := strandedFuture{never: make(chan struct{})}
	defer close(f.never) // let the waiter end, for goleak
	got := make(chan error, 1)
	go func() { got <- s.awaitRaft(f) }()
	select {
	case err := <-got:
		t.Fatalf("returned %v before the server shut down", err)
	default:
	}
	close(s.shutdown)
	if err := <-got; !errors.Is(err, raft.ErrRaftShutdown) {
		t.Fatalf("after shutdown: got %v, want %v", err, raft.ErrRaftShutdown)
	}
}
