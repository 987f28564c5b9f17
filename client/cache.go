package client

// The client cache as the client uses it: lookups, the brackets around a
// write, the instance check, and its counters.

import (
	"fmt"

	"github.com/chubby-dev/chubby/cache"
	"github.com/chubby-dev/chubby/fs"
	"github.com/chubby-dev/chubby/wire"
)

// CacheStats are the client cache's counters.
type CacheStats struct {
	Hits          uint64 `json:"hits"`
	Misses        uint64 `json:"misses"`
	Entries       int    `json:"entries"`
	Bytes         int    `json:"bytes"`
	Invalidations uint64 `json:"invalidations"`
	// Refills counts entries filled from the contents an event carried
	// (a watched file's new value, with its contents_modified event).
	Refills uint64 `json:"refills"`
}

// CacheStats returns the client cache's counters.
func (c *Client) CacheStats() CacheStats {
	s := c.cache.Stats()
	return CacheStats{Hits: s.Hits, Misses: s.Misses, Entries: s.Entries, Bytes: s.Bytes, Invalidations: s.Invalidations, Refills: s.Refills}
}

// cached answers a lookup of key from the cache; a stat is also answered by
// the stat of a Contents entry.
func (c *Client) cached(key cache.Key) (cache.Value, bool) {
	now := c.clock.Now()
	if v, ok := c.cache.Get(key, now); ok || key.Kind != cache.StatOnly {
		return v, ok
	}
	return c.cache.Get(cache.Key{Path: key.Path, Kind: cache.Contents}, now)
}

// cachedStat answers a stat of path from the cache.
func (c *Client) cachedStat(path string) (cache.Value, bool) {
	return c.cached(cache.Key{Path: path, Kind: cache.StatOnly})
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

// refill installs the contents a contents_modified event carries, before
// the event is delivered, so that a read right after it is a cache hit.
// Only for a node some handle still watches with contents; cache.Refill
// refuses contents older than what the cache knows (see server/fill.go
// for why this keeps DESIGN invariant 5).
func (c *Client) refill(ev wire.Event) {
	c.mu.Lock()
	want := c.watches[ev.Path]&wire.EvContents != 0
	c.mu.Unlock()
	if !want {
		return
	}
	v := cache.Value{Data: ev.Contents.Data, Stat: ev.Contents.Stat}
	c.cache.Refill(cache.Key{Path: ev.Path, Kind: cache.Contents}, v, ev.Contents.InvalSeq)
}
