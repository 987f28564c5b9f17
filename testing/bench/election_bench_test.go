package bench

import (
	"context"
	"sync"
	"testing"
	"time"

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
	var (
		mu         sync.Mutex
		lastResign time.Time // start of the latest Resign
		ds         = make([]time.Duration, 0, b.N)
		wg         sync.WaitGroup
		errs       = make(chan error, 2)
	)
	b.ResetTimer()
	start := time.Now()
	for w, c := range clients {
		n := b.N / 2
		if w == 0 {
			n += b.N % 2
		}
		e := election.New(c, "/ls/local/election", election.LockDelay(client.NoLockDelay))
		wg.Add(1)
		go func(n int) {
			defer wg.Done()
			for i := 0; i < n; i++ {
				if _, err := e.Campaign(ctx, []byte("leader")); err != nil {
					errs <- err
					return
				}
				mu.Lock()
				if !lastResign.IsZero() {
					ds = append(ds, time.Since(lastResign))
				}
				lastResign = time.Now()
				mu.Unlock()
				if err := e.Resign(ctx); err != nil {
					errs <- err
					return
				}
			}
		}(n)
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
	var lat latencies
	lat.add(ds)
	lat.report(b, elapsed, "handoffs")
}
