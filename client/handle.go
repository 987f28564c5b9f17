package client

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/chubby-dev/chubby/fs"
	"github.com/chubby-dev/chubby/server/wire"
)

// Handle is an open node. It is bound to the node's instance: once the node
// is deleted (even if re-created under the same name) its calls fail with
// ErrStaleHandle. A Handle may hold the node's lock.
type Handle struct {
	c        *Client
	path     string
	instance uint64
	isDir    bool

	lock *heldLock // guarded by c.mu
}

type heldLock struct {
	seq  Sequencer
	lost chan struct{}
}

// OpenOption modifies Open.
type OpenOption func(*wire.OpenArgs)

// Create makes Open create the file if it is missing.
func Create() OpenOption { return func(a *wire.OpenArgs) { a.Create = true } }

// CreateDir makes Open create a directory if it is missing.
func CreateDir() OpenOption { return func(a *wire.OpenArgs) { a.Create, a.IsDir = true, true } }

// Ephemeral makes Open create an ephemeral file, deleted when this session ends.
func Ephemeral() OpenOption { return func(a *wire.OpenArgs) { a.Create, a.Ephemeral = true, true } }

// FailIfExists makes a creating Open fail with ErrExists if the node exists.
func FailIfExists() OpenOption { return func(a *wire.OpenArgs) { a.Exclusive = true } }

// Open returns a handle on path, creating the node if an option says so.
func (c *Client) Open(ctx context.Context, path string, opts ...OpenOption) (*Handle, error) {
	args := wire.OpenArgs{Path: path}
	for _, o := range opts {
		o(&args)
	}
	if err := fs.CheckPath(c.Cell(), path); err != nil {
		return nil, err
	}
	var rep wire.StatReply
	if err := c.do(ctx, wire.MOpen, args, &rep, args.Create); err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	return &Handle{c: c, path: path, instance: rep.Stat.Instance, isDir: rep.Stat.IsDir}, nil
}

// Path returns the handle's path.
func (h *Handle) Path() string { return h.path }

// Instance returns the instance number of the node the handle is bound to.
func (h *Handle) Instance() uint64 { return h.instance }

func (h *Handle) node() wire.NodeArgs { return wire.NodeArgs{Path: h.path, Instance: h.instance} }

// GetContentsAndStat reads a file's contents and metadata.
func (h *Handle) GetContentsAndStat(ctx context.Context) ([]byte, Stat, error) {
	var rep wire.ContentsReply
	if err := h.c.do(ctx, wire.MGetContents, h.node(), &rep, readCall); err != nil {
		return nil, Stat{}, fmt.Errorf("read %s: %w", h.path, err)
	}
	return rep.Data, rep.Stat, nil
}

// GetStat reads the node's metadata.
func (h *Handle) GetStat(ctx context.Context) (Stat, error) {
	var rep wire.StatReply
	if err := h.c.do(ctx, wire.MGetStat, h.node(), &rep, readCall); err != nil {
		return Stat{}, fmt.Errorf("stat %s: %w", h.path, err)
	}
	return rep.Stat, nil
}

// ReadDir lists a directory's children, sorted by name.
func (h *Handle) ReadDir(ctx context.Context) ([]string, error) {
	var rep wire.ReadDirReply
	if err := h.c.do(ctx, wire.MReadDir, h.node(), &rep, readCall); err != nil {
		return nil, fmt.Errorf("list %s: %w", h.path, err)
	}
	return rep.Children, nil
}

// WriteOption modifies SetContents, SetContentsIf and Delete.
type WriteOption func(*writeOpts)

type writeOpts struct{ seq *Sequencer }

// WithSequencer fences the write: it commits only if seq is still valid when
// it is applied, and fails with ErrBadSequencer otherwise.
func WithSequencer(seq Sequencer) WriteOption { return func(o *writeOpts) { o.seq = &seq } }

func writeOptions(opts []WriteOption) writeOpts {
	var o writeOpts
	for _, f := range opts {
		f(&o)
	}
	return o
}

// SetContents replaces a file's contents (at most 256 KiB).
func (h *Handle) SetContents(ctx context.Context, data []byte, opts ...WriteOption) (Stat, error) {
	o := writeOptions(opts)
	var rep wire.StatReply
	args := wire.SetContentsArgs{Path: h.path, Instance: h.instance, Data: data, Seq: o.seq}
	if err := h.c.do(ctx, wire.MSetContents, args, &rep, numberedCall); err != nil {
		return Stat{}, fmt.Errorf("write %s: %w", h.path, err)
	}
	return rep.Stat, nil
}

// SetContentsIf replaces a file's contents only if its content generation is
// gen; otherwise it fails with ErrCASMismatch.
func (h *Handle) SetContentsIf(ctx context.Context, data []byte, gen uint64, opts ...WriteOption) (Stat, error) {
	o := writeOptions(opts)
	var rep wire.StatReply
	args := wire.SetContentsArgs{Path: h.path, Instance: h.instance, Data: data, CAS: true, Gen: gen, Seq: o.seq}
	if err := h.c.do(ctx, wire.MSetContents, args, &rep, numberedCall); err != nil {
		return Stat{}, fmt.Errorf("cas %s: %w", h.path, err)
	}
	return rep.Stat, nil
}

// Delete deletes the node (a file or an empty directory).
func (h *Handle) Delete(ctx context.Context, opts ...WriteOption) error {
	o := writeOptions(opts)
	if err := h.c.do(ctx, wire.MDelete, wire.DeleteArgs{Path: h.path, Instance: h.instance, Seq: o.seq}, nil, numberedCall); err != nil {
		return fmt.Errorf("delete %s: %w", h.path, err)
	}
	return nil
}

// LockOption modifies Acquire and TryAcquire.
type LockOption func(*lockOpts)

type lockOpts struct{ delay time.Duration }

// LockDelay sets the lock-delay of this acquisition: if this session expires
// while holding the lock, nobody else gets it for d (at most 60 s; 0 none).
func LockDelay(d time.Duration) LockOption {
	return func(o *lockOpts) {
		if d == 0 {
			d = NoLockDelay
		}
		o.delay = d
	}
}

func (h *Handle) lockArgs(mode Mode, opts []LockOption) wire.AcquireArgs {
	o := lockOpts{delay: h.c.cfg.LockDelay}
	for _, f := range opts {
		f(&o)
	}
	delay := int64(o.delay)
	switch {
	case o.delay == NoLockDelay:
		delay = 0
	case o.delay == 0:
		delay = -1 // the cell's default
	}
	return wire.AcquireArgs{Path: h.path, Instance: h.instance, Mode: mode, LockDelay: delay}
}

// Acquire takes the node's lock in mode, blocking until it is granted (the
// master queues the request and grants it in order, without polling) or ctx
// ends. On success the handle holds the lock: Sequencer returns its fencing
// token and LockLost is closed if the session enters jeopardy.
func (h *Handle) Acquire(ctx context.Context, mode Mode, opts ...LockOption) error {
	args := h.lockArgs(mode, opts)
	args.Wait = true
	args.WaitID = h.c.waitSeq.Add(1)
	var rep wire.SeqReply
	err := h.c.do(ctx, wire.MAcquire, args, &rep, readCall) // idempotent by its wait id
	if err != nil {
		if ctx.Err() != nil {
			// Leave the queue; if the grant raced the cancel, the master
			// releases what it granted to this wait.
			cctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			h.c.do(cctx, wire.MCancelAcquire, wire.CancelAcquireArgs{Path: h.path, WaitID: args.WaitID}, nil, numberedCall)
			cancel()
		}
		return fmt.Errorf("acquire %s: %w", h.path, err)
	}
	h.setHeld(rep.Seq)
	return nil
}

// TryAcquire takes the lock if it can be granted at once and fails with
// ErrLockHeld (or ErrLockDelay) otherwise.
func (h *Handle) TryAcquire(ctx context.Context, mode Mode, opts ...LockOption) error {
	var rep wire.SeqReply
	if err := h.c.do(ctx, wire.MAcquire, h.lockArgs(mode, opts), &rep, numberedCall); err != nil {
		return fmt.Errorf("trylock %s: %w", h.path, err)
	}
	h.setHeld(rep.Seq)
	return nil
}

func (h *Handle) setHeld(seq Sequencer) {
	h.c.mu.Lock()
	defer h.c.mu.Unlock()
	if h.lock != nil && h.lock.seq == seq {
		return
	}
	h.lock = &heldLock{seq: seq, lost: make(chan struct{})}
	h.c.held[h] = struct{}{}
}

func (h *Handle) markLost() {
	h.c.mu.Lock()
	defer h.c.mu.Unlock()
	if h.lock != nil {
		select {
		case <-h.lock.lost:
		default:
			close(h.lock.lost)
		}
	}
}

// Release frees the lock this handle holds. It names the acquisition's
// generation, so a retried Release never frees a later acquisition.
func (h *Handle) Release(ctx context.Context) error {
	h.c.mu.Lock()
	l := h.lock
	h.c.mu.Unlock()
	if l == nil {
		return fmt.Errorf("release %s: %w", h.path, ErrNotHeld)
	}
	err := h.c.do(ctx, wire.MRelease, wire.ReleaseArgs{Path: h.path, Gen: l.seq.Gen}, nil, numberedCall)
	h.c.mu.Lock()
	if h.lock == l {
		h.lock = nil
		delete(h.c.held, h)
		select {
		case <-l.lost:
		default:
			close(l.lost)
		}
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
	return h.lock.lost
}

// Close releases the handle's lock, if any. The handle must not be used after.
func (h *Handle) Close() error {
	h.c.mu.Lock()
	held := h.lock != nil
	h.c.mu.Unlock()
	if !held {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := h.Release(ctx)
	if errors.Is(err, ErrNotHeld) || errors.Is(err, ErrSessionExpired) {
		return nil
	}
	return err
}

// WriteFile sets the contents of the file at path, creating it (its parent
// must exist) if it is missing, in one call.
func (c *Client) WriteFile(ctx context.Context, path string, data []byte, opts ...WriteOption) (Stat, error) {
	o := writeOptions(opts)
	var rep wire.StatReply
	args := wire.SetContentsArgs{Path: path, Data: data, Create: true, Seq: o.seq}
	if err := c.do(ctx, wire.MSetContents, args, &rep, numberedCall); err != nil {
		return Stat{}, fmt.Errorf("write %s: %w", path, err)
	}
	return rep.Stat, nil
}

// WriteFileIf sets the contents of the file at path only if its content
// generation is gen; gen 0 means "only if the file does not exist" (it is
// then created). A mismatch fails with ErrCASMismatch.
func (c *Client) WriteFileIf(ctx context.Context, path string, data []byte, gen uint64, opts ...WriteOption) (Stat, error) {
	o := writeOptions(opts)
	var rep wire.StatReply
	args := wire.SetContentsArgs{Path: path, Data: data, CAS: true, Gen: gen, Seq: o.seq}
	if err := c.do(ctx, wire.MSetContents, args, &rep, numberedCall); err != nil {
		return Stat{}, fmt.Errorf("cas %s: %w", path, err)
	}
	return rep.Stat, nil
}
