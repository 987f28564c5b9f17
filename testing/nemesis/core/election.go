package core

import (
	"context"
	"fmt"

	"github.com/chubby-dev/chubby/client"
	"github.com/chubby-dev/chubby/client/election"
)

// ElectionLocker is an election (client/election) as the Locker of a
// LockCycle: Acquire campaigns, the hold is the term, Release resigns. The
// fencing workload and its checks then hold for leaders as for lock
// holders: no two leaders' sequencers admitted out of order, no lost
// increment, generations in grant order.
type ElectionLocker struct {
	E     *election.Election
	Value []byte
	term  *election.Term
}

// Acquire campaigns until this session leads (mode must be exclusive;
// options are the election's own).
func (l *ElectionLocker) Acquire(ctx context.Context, mode client.Mode, _ ...client.LockOption) error {
	if mode != client.Exclusive {
		return fmt.Errorf("an election is an exclusive lock, not %v", mode)
	}
	t, err := l.E.Campaign(ctx, l.Value)
	if err != nil {
		return err
	}
	l.term = t
	return nil
}

// Sequencer is the term's.
func (l *ElectionLocker) Sequencer() (client.Sequencer, error) {
	if l.term == nil {
		return client.Sequencer{}, client.ErrNotHeld
	}
	return l.term.Sequencer(), nil
}

// Release resigns: nil only if the cell confirmed the term still held.
func (l *ElectionLocker) Release(ctx context.Context) error {
	l.term = nil
	return l.E.Resign(ctx)
}
