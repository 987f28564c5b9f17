package client

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/chubby-dev/chubby/cache"
	"github.com/chubby-dev/chubby/fs"
	"github.com/chubby-dev/chubby/wire"
)

// Handle is an open node. It is bound to the node's instance: once the node
// is deleted (even if re-created under the same name) its calls fail with
// ErrStaleHandle. A Handle may hold the node's lock.
type Handle struct {
	c        *Client
	path     string
	instance uint64
	isDir    bool
	events   uint32 // subscribed event mask

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

// WithEvents subscribes the handle to events on its node; they arrive on
// Client.Events with the node's path (the child's, for child events).
// With no types, every handle event is subscribed.
func WithEvents(types ...EventType) OpenOption {
	return func(a *wire.OpenArgs) {
		if len(types) == 0 {
			a.Events |= wire.EvAll
		}
		for _, t := range types {
			a.Events |= wire.EventType(t).Bit()
		}
	}
}

// Open returns a handle on path, creating the node if an option says so.
// Opening an existing node (or learning that it is missing) is answered
// from the cache when it can be: repeated Opens cost no round trip.
func (c *Client) Open(ctx context.Context, path string, opts ...OpenOption) (*Handle, error) {
	args := wire.OpenArgs{Path: path}
	for _, o := range opts {
		o(&args)
	}
	if err := fs.CheckPath(c.Cell(), path); err != nil {
		return nil, err
	}
	h := &Handle{c: c, path: path, events: args.Events}
	if !args.Create && args.Events == 0 {
		if v, ok := c.cachedStat(path); ok {
			if v.Absent {
				return nil, fmt.Errorf("open %s: %w: %s", path, ErrNoSuchNode, path)
			}
			h.instance, h.isDir = v.Stat.Instance, v.Stat.IsDir
			return h, nil
		}
	}
	if args.Create {
		c.writing(path)
	} else {
		args.Cache = true
	}
	tok := c.cache.Begin()
	var rep wire.StatReply
	err := c.do(ctx, wire.MOpen, args, &rep, args.Create)
	if args.Create {
		c.written(path)
	}
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	if rep.Cacheable {
		c.cache.Put(cache.Key{Path: path, Kind: cache.StatOnly}, cache.Value{Absent: rep.Absent, Stat: rep.Stat}, tok)
	}
	if rep.Absent {
		return nil, fmt.Errorf("open %s: %w: %s", path, ErrNoSuchNode, path)
	}
	h.instance, h.isDir = rep.Stat.Instance, rep.Stat.IsDir
	if args.Events != 0 {
		c.mu.Lock()
		c.watches[path] |= args.Events
		c.watchN[path]++
		c.mu.Unlock()
	}
	return h, nil
}

// cachedStat answers a stat from the cache: a StatOnly entry or the stat of
// a Contents entry.
func (c *Client) cachedStat(path string) (cache.Value, bool) {
	now := c.clock.Now()
	if v, ok := c.cache.Get(cache.Key{Path: path, Kind: cache.StatOnly}, now); ok {
		return v, true
	}
	return c.cache.Get(cache.Key{Path: path, Kind: cache.Contents}, now)
}

// writing and written bracket a write of path: the client drops its own
// cached entries of the node and its directory before the call, fills none
// while it is in flight (its reads racing the write must not fill them: the
// master sends the writer no invalidation) and drops them again after it.
func (c *Client) writing(path string) {
	dir, _ := fs.Split(path)
	c.cache.BeginWrite(path, dir)
}

func (c *Client) written(path string) {
	dir, _ := fs.Split(path)
	c.cache.EndWrite(path, dir)
}

// checkInstance applies the handle's instance check to a cached entry.
func (h *Handle) checkInstance(v cache.Value) error {
	if v.Absent || (h.instance != 0 && v.Stat.Instance != h.instance) {
		return fmt.Errorf("%w: %s: the node this handle opened was deleted", ErrStaleHandle, h.path)
	}
	return nil
}

// Path returns the handle's path.
func (h *Handle) Path() string { return h.path }

// Instance returns the instance number of the node the handle is bound to.
func (h *Handle) Instance() uint64 { return h.instance }

func (h *Handle) node() wire.NodeArgs { return wire.NodeArgs{Path: h.path, Instance: h.instance} }

// GetContentsAndStat reads a file's contents and metadata, from the cache
// while the session's local lease is valid and the master has not
// invalidated them. The returned slice is shared with the cache and must not
// be modified.
func (h *Handle) GetContentsAndStat(ctx context.Context) ([]byte, Stat, error) {
	key := cache.Key{Path: h.path, Kind: cache.Contents}
	if v, ok := h.c.cache.Get(key, h.c.clock.Now()); ok {
		if err := h.checkInstance(v); err != nil {
			return nil, Stat{}, fmt.Errorf("read %s: %w", h.path, err)
		}
		return v.Data, v.Stat, nil
	}
	tok := h.c.cache.Begin()
	args := h.node()
	args.Cache = true
	var rep wire.ContentsReply
	if err := h.c.do(ctx, wire.MGetContents, args, &rep, readCall); err != nil {
		return nil, Stat{}, fmt.Errorf("read %s: %w", h.path, err)
	}
	if rep.Cacheable {
		h.c.cache.Put(key, cache.Value{Data: rep.Data, Stat: rep.Stat}, tok)
	}
	return rep.Data, rep.Stat, nil
}

// GetStat reads the node's metadata (from the cache when it can).
func (h *Handle) GetStat(ctx context.Context) (Stat, error) {
	if v, ok := h.c.cachedStat(h.path); ok {
		if err := h.checkInstance(v); err != nil {
			return Stat{}, fmt.Errorf("stat %s: %w", h.path, err)
		}
		return v.Stat, nil
	}
	tok := h.c.cache.Begin()
	args := h.node()
	args.Cache = true
	var rep wire.StatReply
	if err := h.c.do(ctx, wire.MGetStat, args, &rep, readCall); err != nil {
		return Stat{}, fmt.Errorf("stat %s: %w", h.path, err)
	}
	if rep.Cacheable {
		h.c.cache.Put(cache.Key{Path: h.path, Kind: cache.StatOnly}, cache.Value{Stat: rep.Stat}, tok)
	}
	return rep.Stat, nil
}

// ReadDir lists a directory's children, sorted by name (from the cache when
// it can; the slice must not be modified).
func (h *Handle) ReadDir(ctx context.Context) ([]string, error) {
	key := cache.Key{Path: h.path, Kind: cache.Listing}
	if v, ok := h.c.cache.Get(key, h.c.clock.Now()); ok {
		if err := h.checkInstance(v); err != nil {
			return nil, fmt.Errorf("list %s: %w", h.path, err)
		}
		return v.Children, nil
	}
	tok := h.c.cache.Begin()
	args := h.node()
	args.Cache = true
	var rep wire.ReadDirReply
	if err := h.c.do(ctx, wire.MReadDir, args, &rep, readCall); err != nil {
		return nil, fmt.Errorf("list %s: %w", h.path, err)
	}
	if rep.Cacheable {
		h.c.cache.Put(key, cache.Value{Children: rep.Children, Stat: rep.Stat}, tok)
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

// write runs a numbered call that changes path, dropping the client's own
// cached entries of it before and after.
func (c *Client) write(ctx context.Context, path string, m wire.Method, args, reply any) error {
	if err := fs.CheckPath(c.Cell(), path); err != nil {
		return err
	}
	c.writing(path)
	defer c.written(path)
	return c.do(ctx, m, args, reply, numberedCall)
}

// SetContents replaces a file's contents (at most 256 KiB).
func (h *Handle) SetContents(ctx context.Context, data []byte, opts ...WriteOption) (Stat, error) {
	o := writeOptions(opts)
	var rep wire.StatReply
	args := wire.SetContentsArgs{Path: h.path, Instance: h.instance, Data: data, Seq: o.seq}
	if err := h.c.write(ctx, h.path, wire.MSetContents, args, &rep); err != nil {
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
	if err := h.c.write(ctx, h.path, wire.MSetContents, args, &rep); err != nil {
		return Stat{}, fmt.Errorf("cas %s: %w", h.path, err)
	}
	return rep.Stat, nil
}

// Delete deletes the node (a file or an empty directory).
func (h *Handle) Delete(ctx context.Context, opts ...WriteOption) error {
	o := writeOptions(opts)
	if err := h.c.write(ctx, h.path, wire.MDelete, wire.DeleteArgs{Path: h.path, Instance: h.instance, Seq: o.seq}, nil); err != nil {
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
	h.c.writing(h.path)
	err := h.c.do(ctx, wire.MAcquire, args, &rep, readCall) // idempotent by its wait id
	h.c.written(h.path)
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
	if err := h.c.write(ctx, h.path, wire.MAcquire, h.lockArgs(mode, opts), &rep); err != nil {
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
// Whatever it returns, the handle no longer counts the lock as held. When
// it fails without an answer from the cell (ctx ended, the cell
// unreachable) the session may still hold the lock: it is freed when the
// session ends, or an Acquire through the handle gets that same hold back
// (same sequencer), which a Release can then free.
func (h *Handle) Release(ctx context.Context) error {
	h.c.mu.Lock()
	l := h.lock
	h.c.mu.Unlock()
	if l == nil {
		return fmt.Errorf("release %s: %w", h.path, ErrNotHeld)
	}
	err := h.c.write(ctx, h.path, wire.MRelease, wire.ReleaseArgs{Path: h.path, Gen: l.seq.Gen}, nil)
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

// Close releases the handle's lock, if any, and ends its event
// subscription. The handle must not be used after.
func (h *Handle) Close() error {
	h.c.mu.Lock()
	held := h.lock != nil
	unwatch := false
	if h.events != 0 {
		h.events = 0
		if h.c.watchN[h.path]--; h.c.watchN[h.path] <= 0 {
			delete(h.c.watchN, h.path)
			delete(h.c.watches, h.path)
			unwatch = true
		}
	}
	h.c.mu.Unlock()
	if unwatch {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		h.c.do(ctx, wire.MUnwatch, wire.UnwatchArgs{Path: h.path}, nil, readCall)
		cancel()
	}
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
	if err := c.write(ctx, path, wire.MSetContents, args, &rep); err != nil {
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
	if err := c.write(ctx, path, wire.MSetContents, args, &rep); err != nil {
		return Stat{}, fmt.Errorf("cas %s: %w", path, err)
	}
	return rep.Stat, nil
}
