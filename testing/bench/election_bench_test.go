package bench

import (
	"context"
	"testing"

	"github.com/chubby-dev/chubby/client"
	"github.com/chubby-dev/chubby/client/election"
)

// BenchmarkResignHandoff: two sessions take turns leading one election, each
// looping Campaign → Resign, on a one-server cell with fsync on. While one
// leads, the other waits in Campaign (queued on the master). The metric is
// the time from the start of one leader's Resign to the other's Campaign
// returning — the next leader acting, its record published (issue 14: p50
// at most 5 ms).
func BenchmarkResignHandoff(b *testing.B) {
	addr := startCell(b)
	clients := dial(b, addr, 2)
	ctx := context.Background()
	var take, give [2]func() error
	for i, c := range clients {
		e := election.New(c, "/ls/local/election", election.LockDelay(client.NoLockDelay))
		take[i] = func() error { _, err := e.Campaign(ctx, []byte("leader")); return err }
		give[i] = func() error { return e.Resign(ctx) }
	}
	handoffs(b, take, give)
}
