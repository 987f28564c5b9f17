package server

import (
	"fmt"
	"sync"

	"github.com/chubby-dev/chubby/wire"
)

// readVerifier makes reads linearizable: before a read is answered from the
// local state, the master confirms with a quorum that it is still the raft
// leader (raft.VerifyLeader), so a master that was paused or partitioned and
// deposed meanwhile never answers from stale state. Concurrent readers share
// rounds: a reader waits for a round that started after it arrived, so at
// most two rounds are in flight per burst of reads, whatever their number.
type readVerifier struct {
	// verifyLeader confirms raft leadership with a quorum
	// (raft.VerifyLeader); serving says whether this server still serves
	// as master.
	verifyLeader func() error
	serving      func() bool

	mu      sync.Mutex
	running bool
	next    *verifyRound
}

type verifyRound struct {
	done chan struct{}
	err  error
}

// verify blocks until a leadership check that started after the call
// succeeds or fails.
func (v *readVerifier) verify() error {
	v.mu.Lock()
	if v.next == nil {
		v.next = &verifyRound{done: make(chan struct{})}
	}
	r := v.next
	if !v.running {
		v.startLocked()
	}
	v.mu.Unlock()
	<-r.done
	return r.err
}

func (v *readVerifier) startLocked() {
	r := v.next
	v.next = nil
	v.running = true
	go func() {
		err := v.verifyLeader()
		if err == nil && !v.serving() {
			err = wire.ErrNotMaster
		}
		if err != nil {
			err = fmt.Errorf("%w: leadership not confirmed: %v", wire.ErrNotMaster, err)
		}
		r.err = err
		close(r.done)
		v.mu.Lock()
		v.running = false
		if v.next != nil {
			v.startLocked()
		}
		v.mu.Unlock()
	}()
}
