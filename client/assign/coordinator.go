package assign

// The coordinator: the member holding DIR/coordinator's lock balances the
// items over the live members and writes the table, fenced by that lock.

import (
	"context"
	"encoding/json"
	"errors"
	"path"
	"slices"
	"time"

	"github.com/chubby-dev/chubby/client"
)

// coordinate campaigns for the coordinator's lock and leads while it
// holds it, until ctx ends; then it releases the lock.
func (mb *Member) coordinate(ctx context.Context) {
	defer close(mb.coordDone)
	defer func() {
		rctx, cancel := context.WithTimeout(context.Background(), callTimeout)
		defer cancel()
		if err := mb.coordH.Release(rctx); err != nil && !errors.Is(err, client.ErrNotHeld) {
			mb.log.Debug("release the coordinator lock", "err", err)
		}
	}()
	backoff := time.Duration(0)
	for ctx.Err() == nil {
		if mb.c.State() != client.SessionSafe {
			select { // woken at safe or expiry
			case <-mb.ckick:
			case <-ctx.Done():
			}
			continue
		}
		// No lock-delay: the table's writes are fenced by the cell, so a
		// successor may write at once.
		if err := mb.coordH.Acquire(ctx, client.Exclusive, client.LockDelay(client.NoLockDelay)); err != nil {
			if ctx.Err() != nil {
				return
			}
			backoff = min(max(2*backoff, 50*time.Millisecond), maxRetry)
			mb.log.Warn("campaign for coordinator", "err", err, "retry", backoff)
			sleep(ctx, backoff)
			continue
		}
		backoff = 0
		mb.lead(ctx)
	}
}

// lead balances the group each time its membership (or the table)
// changes, while this member holds the coordinator's lock and ctx lasts.
func (mb *Member) lead(ctx context.Context) {
	seq, err := mb.coordH.Sequencer()
	if err != nil {
		return
	}
	lctx := mb.coordH.LockContext()
	stop := context.AfterFunc(lctx, func() { poke(mb.ckick) })
	defer stop()
	mb.setLeading(true)
	defer mb.setLeading(false)
	mb.log.Debug("coordinating", "seq", seq)
	var members *client.Handle
	defer func() {
		if members != nil {
			members.Close()
		}
	}()
	var retry *time.Timer
	defer func() {
		if retry != nil {
			retry.Stop()
		}
	}()
	backoff := time.Duration(0)
	for ctx.Err() == nil && lctx.Err() == nil {
		err := func() error {
			if members == nil {
				octx, cancel := context.WithTimeout(ctx, callTimeout)
				defer cancel()
				h, err := mb.c.Open(octx, mb.membersPath, client.WithEvents(client.EventChildAdded, client.EventChildRemoved))
				if err != nil {
					return err
				}
				members = h
			}
			return mb.rebalance(ctx, members, seq)
		}()
		switch {
		case errors.Is(err, client.ErrBadSequencer):
			mb.log.Debug("deposed as coordinator", "err", err)
			return
		case err != nil:
			backoff = min(max(2*backoff, 50*time.Millisecond), maxRetry)
			mb.log.Warn("rebalance", "err", err, "retry", backoff)
			if retry != nil {
				retry.Stop()
			}
			retry = time.AfterFunc(backoff, func() { poke(mb.ckick) })
		default:
			backoff = 0
		}
		select {
		case <-mb.ckick:
		case <-ctx.Done():
		}
	}
}

func (mb *Member) setLeading(on bool) {
	mb.mu.Lock()
	mb.leading = on
	mb.mu.Unlock()
}

// rebalance reads the members and the table and, if Balance changes the
// table, writes the next one fenced by seq.
func (mb *Member) rebalance(ctx context.Context, members *client.Handle, seq client.Sequencer) error {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	names, err := members.ReadDir(ctx)
	if err != nil {
		return err
	}
	names = slices.Clone(names)
	slices.Sort(names)
	t, err := mb.groupTable(ctx)
	if err != nil {
		return err
	}
	prev := t.Owners()
	owners := Balance(mb.m, names, prev)
	if t.Items == mb.m && slices.Equal(t.Members, names) && slices.Equal(owners, prev) {
		return nil
	}
	next := newTable(t.Epoch+1, names, owners)
	out, err := json.Marshal(next)
	if err != nil {
		return err
	}
	if _, err := mb.assignH.SetContents(ctx, out, client.WithSequencer(seq)); err != nil {
		return err
	}
	mb.log.Debug("table written", "epoch", next.Epoch, "members", names, "moved", Moves(prev, owners), "path", path.Base(mb.assignPath))
	return nil
}

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}
