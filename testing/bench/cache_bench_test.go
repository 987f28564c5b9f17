package bench

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/chubby-dev/chubby/client"
)

// BenchmarkCachedRead: one client reads one file through a handle, from
// its cache (issue 4, acceptance 4: a hit is a map lookup under a lock, no
// syscall, no copy), from 1 and from 64 goroutines. Every read after the
// first is checked to be a hit.
func BenchmarkCachedRead(b *testing.B) {
	for _, g := range []int{1, 64} {
		b.Run(fmt.Sprintf("goroutines=%d", g), func(b *testing.B) {
			addr := startCell(b)
			c := dial(b, addr, 1)[0]
			ctx := context.Background()
			if _, err := c.WriteFile(ctx, "/ls/local/config", bytes.Repeat([]byte("x"), 1024)); err != nil {
				b.Fatal(err)
			}
			h, err := c.Open(ctx, "/ls/local/config")
			if err != nil {
				b.Fatal(err)
			}
			if _, _, err := h.GetContentsAndStat(ctx); err != nil { // fill
				b.Fatal(err)
			}
			before := c.CacheStats()
			b.ReportAllocs()
			b.ResetTimer()
			start := time.Now()
			var wg sync.WaitGroup
			errs := make(chan error, g)
			for w := 0; w < g; w++ {
				n := b.N / g
				if w < b.N%g {
					n++
				}
				wg.Add(1)
				go func(n int) {
					defer wg.Done()
					for i := 0; i < n; i++ {
						if _, _, err := h.GetContentsAndStat(ctx); err != nil {
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
			after := c.CacheStats()
			if misses := after.Misses - before.Misses; misses != 0 {
				b.Fatalf("%d of %d reads missed the cache", misses, b.N)
			}
			b.ReportMetric(float64(b.N)/elapsed.Seconds(), "reads/s")
		})
	}
}

// BenchmarkConfigDistribution: one writer and 1,000 caching sessions (each
// its own client.Client with its own TCP connection) that all hold
// /ls/local/config in their caches. Each round the writer writes a new
// value; the write returns only after the master has invalidated every
// session's entry. Then every reader reads until it sees the new value:
// its first read after the write misses and fetches it.
//
// Metrics, over the rounds: write-p50/p99-ms (write latency, including the
// invalidation of 1,000 sessions), all-p50/p99-ms (from the write's return
// until the last of the 1,000 sessions read the new value) and
// session-p50/p99-ms (the same per session). Readers are woken at the
// write's return rather than polling on a timer: on a two-core machine
// 1,000 pollers at millisecond intervals would dominate the CPU, and a
// coarser interval would dominate the figure.
func BenchmarkConfigDistribution(b *testing.B) {
	const sessions = 1000
	raiseFDLimit(b, 4*sessions+1024)
	addr := startCell(b)
	readers := dialParallel(b, addr, sessions)
	writer := dial(b, addr, 1)[0]
	ctx := context.Background()
	const path = "/ls/local/config"
	value := func(round int) []byte {
		v := bytes.Repeat([]byte("."), 2048)
		copy(v, fmt.Sprintf("round %d", round))
		return v
	}
	wh, err := writer.Open(ctx, path, client.Create())
	if err != nil {
		b.Fatal(err)
	}
	if _, err := wh.SetContents(ctx, value(0)); err != nil {
		b.Fatal(err)
	}
	handles := make([]*client.Handle, sessions)
	for i, c := range readers {
		if handles[i], err = c.Open(ctx, path); err != nil {
			b.Fatal(err)
		}
		if _, _, err := handles[i].GetContentsAndStat(ctx); err != nil {
			b.Fatal(err)
		}
	}
	round := 0
	b.Run(fmt.Sprintf("sessions=%d", sessions), func(b *testing.B) {
		var writeLat, allLat, sessLat []time.Duration
		for n := 0; n < b.N; n++ {
			round++
			want := value(round)
			prev := value(round - 1)
			// Every session serves the current value from its cache.
			for i, h := range handles {
				data, _, err := h.GetContentsAndStat(ctx)
				if err != nil || !bytes.Equal(data, prev) {
					b.Fatalf("session %d before round %d: %.12q, %v", i, round, data, err)
				}
			}
			t0 := time.Now()
			if _, err := wh.SetContents(ctx, want); err != nil {
				b.Fatal(err)
			}
			t1 := time.Now()
			seen := make([]time.Duration, sessions)
			var wg sync.WaitGroup
			errs := make(chan error, sessions)
			for i, h := range handles {
				wg.Add(1)
				go func(i int, h *client.Handle) {
					defer wg.Done()
					for {
						data, _, err := h.GetContentsAndStat(ctx)
						if err != nil {
							errs <- err
							return
						}
						if bytes.Equal(data, want) {
							seen[i] = time.Since(t1)
							return
						}
						if bytes.Equal(data, prev) {
							errs <- fmt.Errorf("session %d read the old value after the write returned", i)
							return
						}
					}
				}(i, h)
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				b.Fatal(err)
			}
			writeLat = append(writeLat, t1.Sub(t0))
			last := time.Duration(0)
			for _, d := range seen {
				last = max(last, d)
			}
			allLat = append(allLat, last)
			sessLat = append(sessLat, seen...)
		}
		b.ReportMetric(pctMS(writeLat, 0.5), "write-p50-ms")
		b.ReportMetric(pctMS(writeLat, 0.99), "write-p99-ms")
		b.ReportMetric(pctMS(allLat, 0.5), "all-p50-ms")
		b.ReportMetric(pctMS(allLat, 0.99), "all-p99-ms")
		b.ReportMetric(pctMS(sessLat, 0.5), "session-p50-ms")
		b.ReportMetric(pctMS(sessLat, 0.99), "session-p99-ms")
	})
}

// dialParallel dials n clients, 32 at a time, closed when the benchmark
// ends.
func dialParallel(b *testing.B, addr string, n int) []*client.Client {
	out := make([]*client.Client, n)
	errs := make(chan error, n)
	sem := make(chan struct{}, 32)
	var wg sync.WaitGroup
	for i := range out {
		wg.Add(1)
		sem <- struct{}{}
		go func(i int) {
			defer wg.Done()
			defer func() { <-sem }()
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			c, err := client.Dial(ctx, client.Config{Servers: []string{addr}})
			if err != nil {
				errs <- err
				return
			}
			out[i] = c
		}(i)
	}
	wg.Wait()
	close(errs)
	b.Cleanup(func() { closeAll(out) })
	for err := range errs {
		b.Fatal(err)
	}
	return out
}

// raiseFDLimit makes sure the process may open n files: each session is a
// TCP connection, and both its ends are in this process.
func raiseFDLimit(b *testing.B, n uint64) {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		b.Fatal(err)
	}
	if lim.Cur >= n {
		return
	}
	if lim.Max < n {
		b.Skipf("the open-file limit is %d (hard %d); this benchmark needs %d", lim.Cur, lim.Max, n)
	}
	lim.Cur = n
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		b.Fatalf("raise the open-file limit to %d: %v", n, err)
	}
}
