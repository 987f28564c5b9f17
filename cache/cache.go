package cache

import (
	"container/list"
	"sync"
	"sync/atomic"
	"time"

	"github.com/chubby-dev/chubby/fs"
)

// Kind is what an entry caches about a path.
type Kind uint8

// Entry kinds.
const (
	Contents Kind = iota // file contents and stat
	StatOnly             // stat
	Listing              // directory children
)

// Key names an entry.
type Key struct {
	Path string
	Kind Kind
}

// Value is a cached answer. Absent records that the node does not exist
// (a negative entry); Data and Children are shared with callers and must not
// be modified.
type Value struct {
	Absent   bool
	Data     []byte
	Stat     fs.Stat
	Children []string
}

func (v *Value) size(k Key) int {
	n := len(k.Path) + len(v.Data) + 96
	for _, c := range v.Children {
		n += len(c) + 16
	}
	return n
}

// Stats are the cache's counters.
type Stats struct {
	Hits          uint64 `json:"hits"`
	Misses        uint64 `json:"misses"`
	Entries       int    `json:"entries"`
	Bytes         int    `json:"bytes"`
	Invalidations uint64 `json:"invalidations"`
	Refills       uint64 `json:"refills"` // entries stored by Refill
}

// Config bounds the cache.
type Config struct {
	MaxEntries int // 0: 10,000
	MaxBytes   int // 0: 64 MiB
}

// Cache is safe for concurrent use.
type Cache struct {
	mu       sync.RWMutex
	cfg      Config
	entries  map[Key]*list.Element
	lru      list.List // front: most recently used
	bytes    int
	leaseEnd time.Time
	enabled  bool
	gen      uint64         // bumped by every invalidation and flush
	writing  map[string]int // paths with writes of this client in flight: not filled
	// invalAt: per path, the master's invalidation number (an upper
	// bound) of the last invalidation of it (InvalidateAt); invalFloor
	// stands for every path once invalAt outgrew maxInvalAt. A Refill
	// numbered below either is older than that invalidation.
	invalAt    map[string]uint64
	invalFloor uint64
	stats      Stats // invalidations; hits and misses are counted below
	hits       atomic.Uint64
	misses     atomic.Uint64
}

type item struct {
	key  Key
	val  Value
	size int
	ref  atomic.Bool // read since it was last considered for eviction
}

// New returns an empty, enabled cache with no valid lease yet.
func New(cfg Config) *Cache {
	if cfg.MaxEntries <= 0 {
		cfg.MaxEntries = 10000
	}
	if cfg.MaxBytes <= 0 {
		cfg.MaxBytes = 64 << 20
	}
	return &Cache{cfg: cfg, entries: map[Key]*list.Element{}, writing: map[string]int{}, invalAt: map[string]uint64{}, enabled: true}
}

// SetLeaseEnd records the end of the session's local lease: no entry is
// served at or after it.
func (c *Cache) SetLeaseEnd(t time.Time) {
	c.mu.Lock()
	c.leaseEnd = t
	c.mu.Unlock()
}

// Get returns the entry for k if it may be served at now.
//
// A hit takes only the read lock: it marks the entry referenced (eviction
// gives referenced entries a second chance, an approximation of LRU) and
// counts atomically, so concurrent readers do not serialise.
func (c *Cache) Get(k Key, now time.Time) (Value, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if !c.enabled || !now.Before(c.leaseEnd) {
		c.misses.Add(1)
		return Value{}, false
	}
	e, ok := c.entries[k]
	if !ok {
		c.misses.Add(1)
		return Value{}, false
	}
	it := e.Value.(*item)
	if !it.ref.Load() {
		it.ref.Store(true)
	}
	c.hits.Add(1)
	return it.val, true
}

// Token is taken before the RPC whose answer will be Put.
type Token uint64

// Begin returns the token a later Put must present.
func (c *Cache) Begin() Token {
	c.mu.Lock()
	defer c.mu.Unlock()
	return Token(c.gen)
}

// Put stores v under k unless the cache was invalidated or flushed since
// tok was taken (the answer may predate the invalidation), is disabled, or
// a write of k's path by this client is in flight.
func (c *Cache) Put(k Key, v Value, tok Token) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.enabled || uint64(tok) != c.gen || c.writing[k.Path] > 0 {
		return
	}
	c.storeLocked(k, v)
}

func (c *Cache) storeLocked(k Key, v Value) {
	it := &item{key: k, val: v, size: v.size(k)}
	if it.size > c.cfg.MaxBytes {
		return
	}
	if e, ok := c.entries[k]; ok {
		c.removeLocked(e)
	}
	c.entries[k] = c.lru.PushFront(it)
	c.bytes += it.size
	for len(c.entries) > c.cfg.MaxEntries || c.bytes > c.cfg.MaxBytes {
		back := c.lru.Back()
		if it := back.Value.(*item); it.ref.Load() && back != c.lru.Front() {
			it.ref.Store(false) // used since it was last looked at: a second chance
			c.lru.MoveToFront(back)
			continue
		}
		c.removeLocked(back)
	}
}

func (c *Cache) removeLocked(e *list.Element) {
	it := e.Value.(*item)
	c.lru.Remove(e)
	delete(c.entries, it.key)
	c.bytes -= it.size
}

// Invalidate drops every entry of the paths (all kinds) and makes in-flight
// fills void.
func (c *Cache) Invalidate(paths ...string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.invalidateLocked(paths)
}

// BeginWrite invalidates paths and keeps them from being filled until the
// matching EndWrite: the client is writing them. The master sends no
// invalidation to the writing session itself, so an answer it gave this
// client before the write arrived must not be cached, even if it comes back
// after the write committed.
func (c *Cache) BeginWrite(paths ...string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.invalidateLocked(paths)
	for _, p := range paths {
		c.writing[p]++
	}
}

// EndWrite ends a BeginWrite of the same paths (the write's reply arrived or
// the call failed) and invalidates them again.
func (c *Cache) EndWrite(paths ...string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, p := range paths {
		if c.writing[p]--; c.writing[p] <= 0 {
			delete(c.writing, p)
		}
	}
	c.invalidateLocked(paths)
}

func (c *Cache) invalidateLocked(paths []string) {
	c.gen++
	for _, p := range paths {
		for _, k := range []Kind{Contents, StatOnly, Listing} {
			if e, ok := c.entries[Key{p, k}]; ok {
				c.removeLocked(e)
			}
		}
		c.stats.Invalidations++
	}
}

// InvalidateAt is Invalidate for invalidations the master numbered up to
// seq (a KeepAlive reply's InvalSeq): it also remembers seq for each path,
// so that a Refill numbered below it — contents the master sent before
// this invalidation — is refused, whichever of the two arrives first.
func (c *Cache) InvalidateAt(seq uint64, paths ...string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.invalidateLocked(paths)
	for _, p := range paths {
		c.invalAt[p] = max(c.invalAt[p], seq)
	}
	if len(c.invalAt) > maxInvalAt {
		// Bounded memory: one number for every path, the largest
		// (Refills of paths invalidated long ago are refused a while).
		for _, n := range c.invalAt {
			c.invalFloor = max(c.invalFloor, n)
		}
		clear(c.invalAt)
	}
}

// maxInvalAt bounds the paths whose last invalidation number is kept.
const maxInvalAt = 4096

// Refill stores the contents and stat of a file that the master sent with
// an event, numbered seq by the master's invalidations (wire.EventContents):
// the master counts the session among the file's cachers from then on, as
// for a read. It is refused — and reports false — when the cache is
// disabled, the client is writing the path, an invalidation of the path
// numbered above seq has arrived (InvalidateAt), the entry cached now is
// negative or as new (instance, then content generation), or v is absent.
// It voids no in-flight fill (a read's answer cacheable then is not older).
func (c *Cache) Refill(k Key, v Value, seq uint64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.enabled || v.Absent || c.writing[k.Path] > 0 || seq < c.invalFloor || seq < c.invalAt[k.Path] {
		return false
	}
	if e, ok := c.entries[k]; ok {
		old := e.Value.(*item).val
		if old.Absent || !newer(v.Stat, old.Stat) {
			return false
		}
	}
	c.storeLocked(k, v)
	_, ok := c.entries[k]
	if ok {
		c.stats.Refills++
	}
	return ok
}

// newer reports whether stat a is of a later write than b: a later
// instance of the node, or a later content generation of the same one.
func newer(a, b fs.Stat) bool {
	if a.Instance != b.Instance {
		return a.Instance > b.Instance
	}
	return a.ContentGen > b.ContentGen
}

// Flush drops everything (master failover) and makes in-flight fills void.
// It forgets the invalidation numbers too: a new master's start afresh.
func (c *Cache) Flush() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.flushLocked()
	clear(c.invalAt)
	c.invalFloor = 0
}

func (c *Cache) flushLocked() {
	c.gen++
	c.entries = map[Key]*list.Element{}
	c.lru.Init()
	c.bytes = 0
}

// Disable flushes and serves nothing until Enable (jeopardy).
func (c *Cache) Disable() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.enabled = false
	c.flushLocked()
}

// Enable serves again (the session is safe).
func (c *Cache) Enable() {
	c.mu.Lock()
	c.enabled = true
	c.mu.Unlock()
}

// Stats returns the counters.
func (c *Cache) Stats() Stats {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.stats
	s.Hits, s.Misses = c.hits.Load(), c.misses.Load()
	s.Entries = len(c.entries)
	s.Bytes = c.bytes
	return s
}
