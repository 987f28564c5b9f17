package client

// Reads a proxy serves its clients from its own session's cache.

import (
	"context"
	"fmt"

	"github.com/chubby-dev/chubby/cache"
	"github.com/chubby-dev/chubby/wire"
)

// CachedRead reads path with the client's own session through its cache,
// as a Handle opened on any instance would: from the cache while the local
// lease is valid and the master has not invalidated the entry, otherwise
// from the master, filling the cache. m is wire.MGetContents or
// wire.MGetStat (a stat has no data). It is the read a proxy serves its
// clients with (Chubby §3.1): the master counts the proxy's session among
// the node's cachers, so a write commits only once the proxy dropped its
// entry, and a read answered from it is as fresh as one from the master.
// It fails rather than wait when the session is not safe.
func (c *Client) CachedRead(ctx context.Context, m wire.Method, path string) ([]byte, Stat, error) {
	if st := c.State(); st != SessionSafe {
		return nil, Stat{}, fmt.Errorf("%w: the session is %v", ErrUnavailable, st)
	}
	h := &Handle{c: c, path: path}
	var v cache.Value
	var err error
	switch m {
	case wire.MGetContents:
		v, err = read[contentsReply](ctx, h, "read", cache.Contents, m)
	case wire.MGetStat:
		v, err = read[statReply](ctx, h, "stat", cache.StatOnly, m)
	default:
		return nil, Stat{}, fmt.Errorf("CachedRead: %v is not a read", m)
	}
	return v.Data, v.Stat, err
}
