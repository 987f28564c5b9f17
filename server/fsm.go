package server

import (
	"bytes"
	"io"
	"sync"

	"github.com/hashicorp/raft"

	"github.com/chubby-dev/chubby/fs"
)

// fsm adapts the pure fs.State to raft.FSM. Apply runs on raft's FSM
// goroutine; reads take the read lock. After each command the effects are
// handed to onApply (without the lock held) so the master can wake waiting
// calls and arm lock-delay timers.
type fsm struct {
	mu      sync.RWMutex
	state   *fs.State
	onApply func(*fs.Command, *fs.Result)
}

var _ raft.FSM = (*fsm)(nil)

func newFSM(cell string) *fsm { return &fsm{state: fs.New(cell)} }

// Apply decodes and applies one log entry, a batch of commands; the
// []*fs.Result (one per command, in order) is the future's Response.
func (f *fsm) Apply(l *raft.Log) any {
	if l.Type != raft.LogCommand {
		return nil
	}
	cmds, err := fs.DecodeCommands(l.Data)
	if err != nil {
		return &fs.Result{Err: err}
	}
	results := make([]*fs.Result, len(cmds))
	f.mu.Lock()
	for i, cmd := range cmds {
		results[i] = f.state.Apply(l.Index, cmd)
	}
	f.mu.Unlock()
	if f.onApply != nil {
		for i, cmd := range cmds {
			f.onApply(cmd, results[i])
		}
	}
	return results
}

// read runs fn with the state under the read lock.
func (f *fsm) read(fn func(*fs.State)) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	fn(f.state)
}

// Snapshot serialises the state while holding the read lock.
func (f *fsm) Snapshot() (raft.FSMSnapshot, error) {
	var buf bytes.Buffer
	f.mu.RLock()
	err := f.state.Snapshot(&buf)
	f.mu.RUnlock()
	if err != nil {
		return nil, err
	}
	return &fsmSnapshot{data: buf.Bytes()}, nil
}

// Restore replaces the state with a snapshot's.
func (f *fsm) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	f.mu.Lock()
	defer f.mu.Unlock()
	st := fs.New(f.state.Cell())
	if err := st.Restore(rc); err != nil {
		return err
	}
	f.state = st
	return nil
}

type fsmSnapshot struct{ data []byte }

func (s *fsmSnapshot) Persist(sink raft.SnapshotSink) error {
	if _, err := sink.Write(s.data); err != nil {
		sink.Cancel()
		return err
	}
	return sink.Close()
}

func (s *fsmSnapshot) Release() {}
