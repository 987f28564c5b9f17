package bench

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chubby-dev/chubby/client"
)

// BenchmarkFanout: config fan-out with event fills (issue 13). One writer
// and N caching readers (each its own client.Client and TCP connection to
// a real one-server cell) that watch /ls/local/config for
// contents_modified. Each round the writer writes a new 2 KiB value; each
// reader's event brings the value into its cache before it is delivered,
// and a subscriber notes when that happened. After the round every reader
// reads the file: it must be a cache hit with the new value (a read that
// misses is counted in fill-miss/op, a wrong value fails the benchmark).
//
// Metrics: fill-p50-ms and fill-p99-ms over every reader of every round,
// from the write's return until that reader had the new value in its
// cache (0 when the event came before the write's reply); last-p50-ms and
// last-p99-ms, the same for the slowest reader of each round; and
// write-p50-ms (the write itself, invalidating N cachers).
//
//	go test ./testing/bench -run x -bench Fanout -count 3
func BenchmarkFanout(b *testing.B) {
	for _, n := range []int{100, 1000} {
		fanout(b, n)
	}
}

func fanout(b *testing.B, n int) {
	raiseFDLimit(b, uint64(4*n+1024))
	addr := startCell(b)
	ctx := context.Background()
	const path = "/ls/local/config"
	value := func(round int) []byte {
		v := bytes.Repeat([]byte("."), 2048)
		copy(v, fmt.Sprintf("round %d", round))
		return v
	}
	writer := dial(b, addr, 1)[0]
	if _, err := writer.WriteFile(ctx, path, value(0)); err != nil {
		b.Fatal(err)
	}
	readers := dialParallel(b, addr, n)
	defer closeAll(readers) // before the next size's readers, not at the end

	// A round's state: when each reader had the value, and how many have
	// not yet. The subscriber runs after the fill, before delivery.
	var (
		mu        sync.Mutex
		filledAt  []time.Time
		remaining atomic.Int64
		allIn     chan struct{}
	)
	handles := make([]*client.Handle, n)
	for i, c := range readers {
		h, err := c.Open(ctx, path, client.WithEvents(client.EventContentsModified))
		if err != nil {
			b.Fatal(err)
		}
		handles[i] = h
		cancel := c.Subscribe(func(e client.Event) {
			if e.Type != client.EventContentsModified || e.Path != path {
				return
			}
			now := time.Now()
			mu.Lock()
			if filledAt != nil && filledAt[i].IsZero() {
				filledAt[i] = now
				if remaining.Add(-1) == 0 {
					close(allIn)
				}
			}
			mu.Unlock()
		})
		defer cancel()
	}
	drain := func() { // Events is not read here: keep it from filling up
		for _, c := range readers {
			for len(c.Events()) > 0 {
				<-c.Events()
			}
		}
	}
	wh, err := writer.Open(ctx, path)
	if err != nil {
		b.Fatal(err)
	}
	round := 0
	b.Run(fmt.Sprintf("readers=%d", n), func(b *testing.B) {
		var fill, last, write []time.Duration
		var misses uint64
		for it := 0; it < b.N; it++ {
			round++
			want := value(round)
			mu.Lock()
			filledAt = make([]time.Time, n)
			remaining.Store(int64(n))
			allIn = make(chan struct{})
			done := allIn
			mu.Unlock()
			t0 := time.Now()
			if _, err := wh.SetContents(ctx, want); err != nil {
				b.Fatal(err)
			}
			t1 := time.Now()
			select {
			case <-done:
			case <-time.After(time.Minute):
				b.Fatalf("round %d: %d readers had no event after a minute", round, remaining.Load())
			}
			b.StopTimer()
			mu.Lock()
			slowest := time.Duration(0)
			for _, at := range filledAt {
				d := max(at.Sub(t1), 0)
				fill = append(fill, d)
				slowest = max(slowest, d)
			}
			filledAt = nil
			mu.Unlock()
			last = append(last, slowest)
			write = append(write, t1.Sub(t0))
			for i, h := range handles {
				before := readers[i].CacheStats().Misses
				data, _, err := h.GetContentsAndStat(ctx)
				if err != nil || !bytes.Equal(data, want) {
					b.Fatalf("reader %d after round %d: %.12q, %v", i, round, data, err)
				}
				misses += readers[i].CacheStats().Misses - before
			}
			drain()
			b.StartTimer()
		}
		b.ReportMetric(pctMS(fill, 0.5), "fill-p50-ms")
		b.ReportMetric(pctMS(fill, 0.99), "fill-p99-ms")
		b.ReportMetric(pctMS(last, 0.5), "last-p50-ms")
		b.ReportMetric(pctMS(last, 0.99), "last-p99-ms")
		b.ReportMetric(pctMS(write, 0.5), "write-p50-ms")
		b.ReportMetric(float64(misses)/float64(b.N*n), "fill-miss/op")
	})
}

// closeAll closes clients in parallel (each ends its session with a raft
// write).
func closeAll(cs []*client.Client) {
	var wg sync.WaitGroup
	for _, c := range cs {
		if c != nil {
			wg.Add(1)
			go func() { defer wg.Done(); c.Close() }()
		}
	}
	wg.Wait()
}
