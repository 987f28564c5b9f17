package client

// Locks: acquiring and releasing a node's lock, the signal that a held lock
// may be lost, and RunLocked, which runs work only while the lock is held.

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/chubby-dev/chubby/session"
	"github.com/chubby-dev/chubby/wire"
)

// ErrLockLost: a held lock may be lost (see LockLostError).
var ErrLockLost = errors.New("lock may be lost")

// Why a held lock may be lost: LockLostError.Reason.
const (
	LostJeopardy = "jeopardy" // the session's local lease ran out
	LostExpired  = "expired"  // the session ended
	LostReleased = "released" // the handle released the lock (Release, Close)
	LostClosed   = "closed"   // the client was closed
)

// LockLostError says why a held lock may be lost and by when its holder
// must have stopped acting on it. It is the cause (context.Cause) of the
// context RunLocked gives its function, and wraps ErrLockLost.
type LockLostError struct {
	Path   string
	Reason string    // LostJeopardy, LostExpired, LostReleased or LostClosed
	At     time.Time // when the client noticed, on its clock
	// StopBy is the latest moment, on the client's clock, at which the
	// holder may still act on the lock: until then the master cannot have
	// granted it to anybody else (its lease of the session outlives the
	// local one by the drift margin, and lock-delay adds to that). It is At
	// unless the reason is jeopardy.
	StopBy time.Time
}

func (e *LockLostError) Error() string {
	return fmt.Sprintf("lock on %s may be lost: %s", e.Path, e.Reason)
}

func (e *LockLostError) Unwrap() error { return ErrLockLost }

// heldLock is one acquisition of a handle's lock.
type heldLock struct {
	seq   Sequencer
	delay time.Duration // its lock-delay (0: none)
	// ctx is done the moment the lock may be lost; its cause is a
	// *LockLostError.
	ctx  context.Context
	lose context.CancelCauseFunc
}

// LockOption modifies Acquire, TryAcquire and RunLocked.
type LockOption func(*lockOpts)

type lockOpts struct{ delay time.Duration }

// LockDelay sets the lock-delay of this acquisition: if this session expires
// while holding the lock, nobody else gets it for d. As in
// Config.LockDelay, 0 means the default (Config.LockDelay) and NoLockDelay
// none; at most MaxLockDelay.
func LockDelay(d time.Duration) LockOption {
	return func(o *lockOpts) { o.delay = d }
}

// lockDelay is the lock-delay an acquisition with opts asks for.
func (c *Client) lockDelay(opts []LockOption) time.Duration {
	var o lockOpts
	for _, f := range opts {
		f(&o)
	}
	if o.delay == 0 {
		return c.cfg.LockDelay
	}
	return o.delay
}

func (h *Handle) lockArgs(mode Mode, delay time.Duration) wire.AcquireArgs {
	return wire.AcquireArgs{Path: h.path, Instance: h.instance, Mode: mode, LockDelay: wireLockDelay(delay)}
}

// Acquire takes the node's lock in mode, blocking until it is granted (the
// master queues the request and grants it in order, without polling) or ctx
// ends. On success the handle holds the lock: Sequencer returns its fencing
// token and LockLost is closed if the session enters jeopardy.
func (h *Handle) Acquire(ctx context.Context, mode Mode, opts ...LockOption) error {
	delay := h.c.lockDelay(opts)
	args := h.lockArgs(mode, delay)
	args.Wait = true
	args.WaitID = h.c.waitSeq.Add(1)
	var rep wire.SeqReply
	h.c.writing(h.path)
	err := h.c.do(ctx, wire.MAcquire, args, &rep, readCall) // idempotent by its wait id
	h.c.written(h.path)
	if err != nil {
		if ctx.Err() != nil {
			// Leave the queue; if the grant raced the cancel, the master
			// releases what it granted to this wait.
			cctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
			h.c.do(cctx, wire.MCancelAcquire, wire.CancelAcquireArgs{Path: h.path, WaitID: args.WaitID}, nil, numberedCall)
			cancel()
		}
		return fmt.Errorf("acquire %s: %w", h.path, err)
	}
	h.setHeld(rep.Seq, delay)
	return nil
}

// TryAcquire takes the lock if it can be granted at once and fails with
// ErrLockHeld (or ErrLockDelay) otherwise.
func (h *Handle) TryAcquire(ctx context.Context, mode Mode, opts ...LockOption) error {
	delay := h.c.lockDelay(opts)
	var rep wire.SeqReply
	if err := h.c.write(ctx, h.path, wire.MAcquire, h.lockArgs(mode, delay), &rep); err != nil {
		return fmt.Errorf("trylock %s: %w", h.path, err)
	}
	h.setHeld(rep.Seq, delay)
	return nil
}

func (h *Handle) setHeld(seq Sequencer, delay time.Duration) {
	h.c.mu.Lock()
	defer h.c.mu.Unlock()
	if h.lock != nil && h.lock.seq == seq && h.lock.ctx.Err() == nil {
		return
	}
	// A new acquisition, or the same hold given back by the master after
	// its lost signal fired (an Acquire by a session that came back from
	// jeopardy still holding the lock): a fresh context, so LockContext
	// and LockLost follow the hold again.

	ctx, lose := context.WithCancelCause(context.Background())
	h.lock = &heldLock{seq: seq, delay: max(delay, 0), ctx: ctx, lose: lose}
	h.c.held[h] = struct{}{}
}

// markLost signals that the held lock may be lost for reason; the first
// reason is the one reported. The caller holds c.mu.
func (h *Handle) markLostLocked(l *heldLock, reason string) {
	if l == nil || l.ctx.Err() != nil {
		return
	}
	now := h.c.clock.Now()
	e := &LockLostError{Path: h.path, Reason: reason, At: now, StopBy: now}
	if reason == LostJeopardy {
		e.StopBy = now.Add(stopWithin(h.c.lease.TTL, l.delay))
	}
	l.lose(e)
}

func (h *Handle) markLost(reason string) {
	h.c.mu.Lock()
	defer h.c.mu.Unlock()
	h.markLostLocked(h.lock, reason)
}

// stopWithin is how long after its local lease ran out a holder may still
// act on a lock with lock-delay delay: half the margin by which the
// master's lease outlives the local one (the drift margin, plus lock-delay;
// with lock-delay, at most 2 s).
func stopWithin(ttl, delay time.Duration) time.Duration {
	if delay > 0 {
		return min(delay/2, 2*time.Second)
	}
	return session.DriftMargin(ttl) / 2
}

// Release frees the lock this handle holds. It names the acquisition's
// generation, so a retried Release never frees a later acquisition.
// Whatever it returns, the handle no longer counts the lock as held. When
// it fails without an answer from the cell (ctx ended, the cell
// unreachable) the session may still hold the lock: it is freed when the
// session ends, or an Acquire through the handle gets that same hold back
// (same sequencer), which a Release can then free.
func (h *Handle) Release(ctx context.Context) error {
	h.c.mu.Lock()
	l := h.lock
	h.c.mu.Unlock()
	return h.release(ctx, l)
}

// release frees the acquisition l, if the handle still holds it.
func (h *Handle) release(ctx context.Context, l *heldLock) error {
	h.c.mu.Lock()
	held := l != nil && h.lock == l
	h.c.mu.Unlock()
	if !held {
		return fmt.Errorf("release %s: %w", h.path, ErrNotHeld)
	}
	err := h.c.write(ctx, h.path, wire.MRelease, wire.ReleaseArgs{Path: h.path, Gen: l.seq.Gen}, nil)
	h.c.mu.Lock()
	if h.lock == l {
		h.lock = nil
		delete(h.c.held, h)
		h.markLostLocked(l, LostReleased)
	}
	h.c.mu.Unlock()
	if err != nil {
		return fmt.Errorf("release %s: %w", h.path, err)
	}
	return nil
}

// Sequencer returns the fencing token of the lock this handle holds.
func (h *Handle) Sequencer() (Sequencer, error) {
	h.c.mu.Lock()
	defer h.c.mu.Unlock()
	if h.lock == nil {
		return Sequencer{}, fmt.Errorf("%s: %w", h.path, ErrNotHeld)
	}
	return h.lock.seq, nil
}

// LockLost returns a channel closed the moment the held lock may be lost:
// when the session's local lease enters jeopardy, when it expires, or when
// the lock is released. It is nil when no lock is held.
func (h *Handle) LockLost() <-chan struct{} {
	h.c.mu.Lock()
	defer h.c.mu.Unlock()
	if h.lock == nil {
		return nil
	}
	return h.lock.ctx.Done()
}

// LockContext returns a context that is done the moment the held lock may
// be lost, as LockLost's channel is closed; its context.Cause is then a
// *LockLostError. With no lock held it returns a context already done
// whose cause wraps ErrNotHeld.
func (h *Handle) LockContext() context.Context {
	h.c.mu.Lock()
	defer h.c.mu.Unlock()
	if h.lock == nil {
		ctx, cancel := context.WithCancelCause(context.Background())
		cancel(fmt.Errorf("%s: %w", h.path, ErrNotHeld))
		return ctx
	}
	return h.lock.ctx
}

// RunLocked acquires the handle's lock in mode (as Acquire does), runs fn
// while the lock is held, and releases it once fn has returned.
//
// fn's ctx is done the moment the lock may be lost — the session's local
// lease enters jeopardy, the session expires, the lock is released or the
// client closed — or when ctx ends. context.Cause of fn's ctx is then a
// *LockLostError whose StopBy is the latest moment fn may still act on the
// lock (before the master can grant it to anybody else), or ctx's cause.
// RunLocked always waits for fn to return before it releases the lock.
//
// It returns Acquire's error if the lock was not taken; otherwise fn's
// error; if fn returned nil, the *LockLostError if the lock may have been
// lost while fn ran, or Release's error.
func (h *Handle) RunLocked(ctx context.Context, mode Mode, fn func(ctx context.Context, seq Sequencer) error, opts ...LockOption) error {
	if err := h.Acquire(ctx, mode, opts...); err != nil {
		return err
	}
	h.c.mu.Lock()
	l := h.lock
	h.c.mu.Unlock()
	if l == nil {
		// Released by another goroutine as soon as it was granted.
		return fmt.Errorf("lock %s: %w", h.path, ErrLockLost)
	}
	fctx, cancel := context.WithCancelCause(ctx)
	stop := context.AfterFunc(l.ctx, func() { cancel(context.Cause(l.ctx)) })
	err := fn(fctx, l.seq)
	stop()
	lost := context.Cause(l.ctx) // before our own Release below marks it
	cancel(nil)
	rctx, rcancel := context.WithTimeout(context.Background(), cleanupTimeout)
	relErr := h.release(rctx, l)
	rcancel()
	switch {
	case err != nil:
		return err
	case lost != nil:
		return lost
	case errors.Is(relErr, ErrNotHeld):
		return nil
	}
	return relErr
}
