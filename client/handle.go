package client

import (
	"context"
	"errors"
	"fmt"

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
	noCache  bool   // opened NoCache: reads neither use nor fill the cache

	lock *heldLock // guarded by c.mu
}

// Path returns the handle's path.
func (h *Handle) Path() string { return h.path }

// IsDir reports whether the handle's node is a directory.
func (h *Handle) IsDir() bool { return h.isDir }

// Instance returns the instance number of the node the handle is bound to.
func (h *Handle) Instance() uint64 { return h.instance }

func (h *Handle) node() wire.NodeArgs { return wire.NodeArgs{Path: h.path, Instance: h.instance} }

// cacheable is a read reply the master may let the client cache.
type cacheable interface {
	value() (v cache.Value, ok bool)
}

// read answers a read of kind from the cache while the session's local
// lease is valid and the master has not invalidated it, and otherwise with
// the call m, whose reply fills the cache if the master allows.
func read[R any, P interface {
	*R
	cacheable
}](ctx context.Context, h *Handle, verb string, kind cache.Kind, m wire.Method) (cache.Value, error) {
	return readVia(ctx, h, verb, kind, func(ctx context.Context, args wire.NodeArgs) (cache.Value, bool, error) {
		var rep R
		if err := h.c.do(ctx, m, args, &rep, readCall); err != nil {
			return cache.Value{}, false, err
		}
		v, ok := P(&rep).value()
		return v, ok, nil
	})
}

// readVia is read with the call(s) made by fetch, which reports the value
// and whether the master let it be cached.
func readVia(ctx context.Context, h *Handle, verb string, kind cache.Kind,
	fetch func(context.Context, wire.NodeArgs) (cache.Value, bool, error)) (cache.Value, error) {
	if h.noCache {
		v, _, err := fetch(ctx, h.node())
		if err != nil {
			return cache.Value{}, fmt.Errorf("%s %s: %w", verb, h.path, err)
		}
		return v, nil
	}
	key := cache.Key{Path: h.path, Kind: kind}
	if v, ok := h.c.cached(key); ok {
		if err := h.checkInstance(v); err != nil {
			return cache.Value{}, fmt.Errorf("%s %s: %w", verb, h.path, err)
		}
		return v, nil
	}
	tok := h.c.cache.Begin()
	args := h.node()
	args.Cache = true
	v, ok, err := fetch(ctx, args)
	if err != nil {
		return cache.Value{}, fmt.Errorf("%s %s: %w", verb, h.path, err)
	}
	if ok {
		h.c.cache.Put(key, v, tok)
	}
	return v, nil
}

// maxListRestarts bounds how often a paged listing starts over because the
// directory changed between its pages.
const maxListRestarts = 5

// fetchListing reads a directory page by page (wire.ListPageBytes of names
// each). The pages form one listing of one moment only if the directory
// did not change between them: its stat (Mtime moves with every child
// added or removed) is the same on the first and the last page, or the
// listing starts over.
func (h *Handle) fetchListing(ctx context.Context, args wire.NodeArgs) (cache.Value, bool, error) {
	for range maxListRestarts {
		var v cache.Value
		cacheable := true
		args.After = ""
		for {
			var rep wire.ReadDirReply
			if err := h.c.do(ctx, wire.MReadDir, args, &rep, readCall); err != nil {
				return cache.Value{}, false, err
			}
			if args.After == "" {
				v.Stat = rep.Stat
			} else if rep.Stat != v.Stat {
				break // changed under us: start over
			}
			v.Children = append(v.Children, rep.Children...)
			cacheable = cacheable && rep.Cacheable
			if !rep.More || len(rep.Children) == 0 {
				return v, cacheable, nil
			}
			args.After = rep.Children[len(rep.Children)-1]
		}
	}
	return cache.Value{}, false, fmt.Errorf("%w: the directory changed during each of %d paged listings", ErrUnavailable, maxListRestarts)
}

type (
	contentsReply wire.ContentsReply
	statReply     wire.StatReply
)

func (r *contentsReply) value() (cache.Value, bool) {
	return cache.Value{Data: r.Data, Stat: r.Stat}, r.Cacheable
}

func (r *statReply) value() (cache.Value, bool) { return cache.Value{Stat: r.Stat}, r.Cacheable }

// GetContentsAndStat reads a file's contents and metadata, from the cache
// while the session's local lease is valid and the master has not
// invalidated them. The returned slice is shared with the cache and must not
// be modified.
func (h *Handle) GetContentsAndStat(ctx context.Context) ([]byte, Stat, error) {
	v, err := read[contentsReply](ctx, h, "read", cache.Contents, wire.MGetContents)
	return v.Data, v.Stat, err
}

// GetStat reads the node's metadata (from the cache when it can).
func (h *Handle) GetStat(ctx context.Context) (Stat, error) {
	v, err := read[statReply](ctx, h, "stat", cache.StatOnly, wire.MGetStat)
	return v.Stat, err
}

// ReadDir lists a directory's children, sorted by name (from the cache when
// it can; the slice must not be modified). A large directory is read in
// pages of 256 KiB of names; the pages are one listing of one moment (the
// listing starts over if the directory changed between them).
func (h *Handle) ReadDir(ctx context.Context) ([]string, error) {
	v, err := readVia(ctx, h, "list", cache.Listing, h.fetchListing)
	return v.Children, err
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

// setContents is every write of contents: verb names it in errors.
func (c *Client) setContents(ctx context.Context, verb string, args wire.SetContentsArgs, opts []WriteOption) (Stat, error) {
	args.Seq = writeOptions(opts).seq
	var rep wire.StatReply
	if err := c.write(ctx, args.Path, wire.MSetContents, args, &rep); err != nil {
		return Stat{}, fmt.Errorf("%s %s: %w", verb, args.Path, err)
	}
	return rep.Stat, nil
}

// SetContents replaces a file's contents (at most 256 KiB).
func (h *Handle) SetContents(ctx context.Context, data []byte, opts ...WriteOption) (Stat, error) {
	return h.c.setContents(ctx, "write", wire.SetContentsArgs{Path: h.path, Instance: h.instance, Data: data}, opts)
}

// SetContentsIf replaces a file's contents only if its content generation is
// gen; otherwise it fails with ErrCASMismatch.
func (h *Handle) SetContentsIf(ctx context.Context, data []byte, gen uint64, opts ...WriteOption) (Stat, error) {
	return h.c.setContents(ctx, "cas", wire.SetContentsArgs{Path: h.path, Instance: h.instance, Data: data, CAS: true, Gen: gen}, opts)
}

// WriteFile sets the contents of the file at path, creating it (its parent
// must exist) if it is missing, in one call.
func (c *Client) WriteFile(ctx context.Context, path string, data []byte, opts ...WriteOption) (Stat, error) {
	return c.setContents(ctx, "write", wire.SetContentsArgs{Path: path, Data: data, Create: true}, opts)
}

// WriteFileIf sets the contents of the file at path only if its content
// generation is gen; gen 0 means "only if the file does not exist" (it is
// then created). A mismatch fails with ErrCASMismatch.
func (c *Client) WriteFileIf(ctx context.Context, path string, data []byte, gen uint64, opts ...WriteOption) (Stat, error) {
	return c.setContents(ctx, "cas", wire.SetContentsArgs{Path: path, Data: data, CAS: true, Gen: gen}, opts)
}

// Delete deletes the node (a file or an empty directory).
func (h *Handle) Delete(ctx context.Context, opts ...WriteOption) error {
	o := writeOptions(opts)
	if err := h.c.write(ctx, h.path, wire.MDelete, wire.DeleteArgs{Path: h.path, Instance: h.instance, Seq: o.seq}, nil); err != nil {
		return fmt.Errorf("delete %s: %w", h.path, err)
	}
	return nil
}

// ACL returns the ACL names that govern the node (for a node made before
// ACLs, those of its nearest ancestor that has them) and its stat, whose
// ACLGen moves with every change of them. It needs read permission and is
// always answered by the master, never from the cache.
func (h *Handle) ACL(ctx context.Context) (ACL, Stat, error) {
	var rep wire.ACLReply
	if err := h.c.do(ctx, wire.MGetACL, h.node(), &rep, readCall); err != nil {
		return ACL{}, Stat{}, fmt.Errorf("acl get %s: %w", h.path, err)
	}
	return rep.ACL, rep.Stat, nil
}

// SetACL changes the node's ACL names: each name set in acl replaces the
// node's, an empty one keeps it. It needs change-ACL permission (or an
// admin) and returns the node's stat with its new ACLGen. It takes effect
// for every client's next call.
func (h *Handle) SetACL(ctx context.Context, acl ACL) (Stat, error) {
	var rep wire.StatReply
	args := wire.SetACLArgs{Path: h.path, Instance: h.instance, ACL: acl}
	if err := h.c.write(ctx, h.path, wire.MSetACL, args, &rep); err != nil {
		return Stat{}, fmt.Errorf("acl set %s: %w", h.path, err)
	}
	return rep.Stat, nil
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
		ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
		h.c.do(ctx, wire.MUnwatch, wire.UnwatchArgs{Path: h.path}, nil, readCall)
		cancel()
	}
	if !held {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
	defer cancel()
	err := h.Release(ctx)
	if errors.Is(err, ErrNotHeld) || errors.Is(err, ErrSessionExpired) {
		return nil
	}
	return err
}
