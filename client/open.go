package client

import (
	"context"
	"fmt"

	"github.com/chubby-dev/chubby/cache"
	"github.com/chubby-dev/chubby/fs"
	"github.com/chubby-dev/chubby/wire"
)

// OpenOption modifies Open.
type OpenOption func(*openOpts)

// openOpts is what the options of an Open ask for.
type openOpts struct {
	create, isDir, ephemeral, exclusive bool
	events                              uint32 // the wire's event mask
	data                                []byte
	seq                                 *Sequencer
	acl                                 ACL
	noCache                             bool
}

// Create makes Open create the file if it is missing.
func Create() OpenOption { return func(o *openOpts) { o.create = true } }

// CreateDir makes Open create a directory if it is missing.
func CreateDir() OpenOption { return func(o *openOpts) { o.create, o.isDir = true, true } }

// Ephemeral makes Open create an ephemeral file, deleted when this session ends.
func Ephemeral() OpenOption { return func(o *openOpts) { o.create, o.ephemeral = true, true } }

// FailIfExists makes a creating Open fail with ErrExists if the node exists.
func FailIfExists() OpenOption { return func(o *openOpts) { o.exclusive = true } }

// InitialContents gives the file a creating Open makes these contents, in
// the same write (at most MaxContents bytes). A file that exists already
// keeps its own.
func InitialContents(data []byte) OpenOption {
	return func(o *openOpts) { o.data = append([]byte{}, data...) }
}

// CreateFenced makes a creating Open commit only while seq is held, as
// WithSequencer does for writes: it fails with ErrBadSequencer otherwise.
func CreateFenced(seq Sequencer) OpenOption { return func(o *openOpts) { o.seq = &seq } }

// WithACL names the ACLs of the node a creating Open makes: each name set
// in acl replaces the one the node would copy from its parent. A node
// that exists keeps its own (change them with Handle.SetACL).
func WithACL(acl ACL) OpenOption { return func(o *openOpts) { o.acl = acl } }

// NoCache makes Open, and the handle's reads, neither answer from nor fill
// the session's cache: for a node the session opens to lock, or watches
// and reads only when an event says it changed. Every write of a node (and
// every lock grant and release, which change its stat) commits only once
// each session's cached copy is invalidated; a session that caches nothing
// of the node costs those writes nothing.
func NoCache() OpenOption { return func(o *openOpts) { o.noCache = true } }

// WithEvents subscribes the handle to events on its node; they arrive on
// Client.Events with the node's path (the child's, for child events).
// With no types, every handle event is subscribed. A handle that caches
// (no NoCache, caching on) gets a small file's new contents with its
// contents_modified event, installed in the cache before the event is
// delivered: a read right after the event is answered from the cache.
func WithEvents(types ...EventType) OpenOption {
	return func(o *openOpts) {
		if len(types) == 0 {
			o.events |= wire.EvAll
		}
		for _, t := range types {
			o.events |= wire.EventType(t).Bit()
		}
	}
}

// Open returns a handle on path, creating the node if an option says so.
// Opening an existing node (or learning that it is missing) is answered
// from the cache when it can be: repeated Opens cost no round trip.
func (c *Client) Open(ctx context.Context, path string, opts ...OpenOption) (*Handle, error) {
	var o openOpts
	for _, f := range opts {
		f(&o)
	}
	args := wire.OpenArgs{Path: path, Create: o.create, IsDir: o.isDir, Ephemeral: o.ephemeral, Exclusive: o.exclusive, Events: o.events}
	if (o.data != nil || o.seq != nil || !o.acl.IsZero()) && !o.create {
		return nil, fmt.Errorf("open %s: %w: InitialContents, CreateFenced and WithACL need a creating Open", path, ErrBadRequest)
	}
	if o.create {
		args.Data, args.Seq, args.ACL = o.data, o.seq, o.acl
	}
	check := fs.CheckPath
	if args.Create {
		check = fs.CheckNewPath // no invisible format characters in new names
	}
	if err := check(c.Cell(), path); err != nil {
		return nil, err
	}
	if args.Events&wire.EvContentsModified != 0 && !o.noCache && !c.cfg.DisableCache {
		// The handle reads through the cache: its contents_modified
		// events may bring the new contents along to refill it.
		args.Events |= wire.EvContents
	}
	h := &Handle{c: c, path: path, events: args.Events, noCache: o.noCache}
	if !args.Create && args.Events == 0 && !o.noCache {
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
		args.Cache = !o.noCache
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
