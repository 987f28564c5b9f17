package bench

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/chubby-dev/chubby/client"
	"github.com/chubby-dev/chubby/fs"
	"github.com/chubby-dev/chubby/testing/cell"
	"github.com/chubby-dev/chubby/wire"
)

// BenchmarkWriteBesidePipeline (issue 17, finding 1): one raw session
// pipelines 25,000 SetContents to one file without waiting for replies
// while a second session writes another file in a loop. Reported: the
// second session's write latency (p50/p99/max, ms) and the time the
// pipeline took. Before the fixes the pipeline took 26 s and stalled the
// second session's writes for up to 26 s.
func BenchmarkWriteBesidePipeline(b *testing.B) {
	const n = 25_000
	c := cell.Start(b)
	cl := c.Dial(b, client.Config{})
	ctx := context.Background()
	hot := c.Path("hot")
	if _, err := cl.WriteFile(ctx, hot, []byte("x")); err != nil {
		b.Fatal(err)
	}
	var lat []time.Duration
	var pipeline time.Duration
	call := uint64(0)
	r := c.NewRawSession(b, 30*time.Second)
	b.ResetTimer()
	for range b.N {
		done := make(chan struct{})
		go func() {
			defer close(done)
			start := time.Now()
			ids := make([]uint64, 0, n)
			for range n {
				call++
				id, err := r.WriteFrame(wire.Request{Method: wire.MSetContents, Epoch: r.Epoch, Session: r.Session, Secret: r.Secret, Call: call},
					wire.SetContentsArgs{Path: hot, Data: []byte("y")})
				if err != nil {
					break
				}
				ids = append(ids, id)
			}
			for _, id := range ids {
				r.Await(id, time.Minute)
			}
			pipeline += time.Since(start)
		}()
		lat = append(lat, writesBeside(b, cl, c.Path("other"), done, 0)...)
	}
	b.StopTimer()
	reportOther(b, lat)
	b.ReportMetric(pipeline.Seconds()/float64(b.N), "pipeline-s")
}

// writesBeside writes path through cl in a loop until busy is closed and
// for tail after, and returns each write's latency: what a second session
// sees while another one loads the cell.
func writesBeside(b *testing.B, cl *client.Client, path string, busy <-chan struct{}, tail time.Duration) []time.Duration {
	var lat []time.Duration
	var until time.Time
	for until.IsZero() || time.Now().Before(until) {
		select {
		case <-busy:
			until, busy = time.Now().Add(tail), nil // a nil channel never fires again
		default:
		}
		start := time.Now()
		if _, err := cl.WriteFile(context.Background(), path, []byte("z")); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(start))
	}
	return lat
}

// reportOther reports the second session's latencies.
func reportOther(b *testing.B, lat []time.Duration) {
	slices.Sort(lat)
	ms := func(q float64) float64 { return float64(lat[int(q*float64(len(lat)-1))]) / 1e6 }
	b.ReportMetric(ms(0.50), "other-p50-ms")
	b.ReportMetric(ms(0.99), "other-p99-ms")
	b.ReportMetric(ms(1), "other-max-ms")
}

// BenchmarkWriteBesideAcquireFlood (issue 17, finding 1): one raw session
// sends 50,000 blocking Acquires of a lock another client holds, without
// waiting for replies (the first queues; a session may wait once per lock,
// so the rest are refused lock_held), while a second session writes
// another file in a loop. Reported: the second session's write latency
// while the flood is sent and for a second after.
func BenchmarkWriteBesideAcquireFlood(b *testing.B) {
	const n = 50_000
	c := cell.Start(b)
	cl := c.Dial(b, client.Config{})
	ctx := context.Background()
	lock := c.Path("lock")
	h, err := cl.Open(ctx, lock, client.Create())
	if err != nil {
		b.Fatal(err)
	}
	if err := h.Acquire(ctx, client.Exclusive); err != nil {
		b.Fatal(err)
	}
	var lat []time.Duration
	wid := uint64(0)
	b.ResetTimer()
	for range b.N {
		r := c.NewRawSession(b, time.Minute)
		flood := make(chan struct{})
		go func() {
			defer close(flood)
			for range n {
				wid++
				if _, err := r.WriteFrame(wire.Request{Method: wire.MAcquire, Epoch: r.Epoch, Session: r.Session, Secret: r.Secret, Call: wid},
					wire.AcquireArgs{Path: lock, Mode: fs.Exclusive, Wait: true, WaitID: wid}); err != nil {
					return
				}
			}
		}()
		lat = append(lat, writesBeside(b, cl, c.Path("other"), flood, time.Second)...)
		r.Close()
	}
	b.StopTimer()
	reportOther(b, lat)
}
