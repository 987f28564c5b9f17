package hostile

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/chubby-dev/chubby/client"
	"github.com/chubby-dev/chubby/fs"
	"github.com/chubby-dev/chubby/testing/cell"
	"github.com/chubby-dev/chubby/testing/proc"
	"github.com/chubby-dev/chubby/testing/wait"
	"github.com/chubby-dev/chubby/wire"
)

// TestQueuedAcquiresDoNotStall replays issue 17, finding 1 for locks: tens
// of thousands of blocked Acquires queued on one held lock. A session may
// wait on a lock once (a second blocking Acquire of the same lock is
// refused lock_held), so the queue is made of 50,000 sessions, each with
// one blocking Acquire, sent over 50 raw connections without waiting for
// replies. Bound: a second session's writes take at most 100 ms at the
// 99th percentile while the queue builds and while it stands, and the
// queue's head is granted when the holder lets go.
func TestQueuedAcquiresDoNotStall(t *testing.T) {
	n := scale(50_000, 10_000)
	const conns = 50
	// The sessions are created as fast as the raw clients can: the
	// per-master CreateSession rate limit (5,000 a second) is not what is
	// tested here.
	s := proc.StartServer(t, proc.Options{LogLevel: "info", ExtraArgs: []string{"-create-session-rate", "1000000"}})
	by := newBystander(t, s)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	lock := root + "/lock"
	// The holder is a session of its own: the bystander only writes.
	holder, err := newBystander(t, s).cl.Open(ctx, lock, client.Create())
	if err != nil {
		t.Fatal(err)
	}
	if err := holder.Acquire(ctx, client.Exclusive); err != nil {
		t.Fatal(err)
	}

	queued := make(chan struct{})
	var floodErr error
	var created, sent time.Duration
	go func() {
		defer close(queued)
		start := time.Now()
		raws := make([]*cell.RawConn, conns)
		sessions := make([][]wire.CreateSessionReply, conns)
		var wg sync.WaitGroup
		var mu sync.Mutex
		fail := func(err error) {
			mu.Lock()
			floodErr = err
			mu.Unlock()
		}
		for c := range conns {
			raws[c] = cell.DialRawTo(t, s.RPCAddr)
			wg.Go(func() {
				r := raws[c]
				if _, err := r.Hello(); err != nil {
					fail(err)
					return
				}
				per := n / conns
				got, err := pipeline(r, per, func(int) (wire.Request, any) {
					return stamp(r, wire.MCreateSession), wire.CreateSessionArgs{TTL: int64(time.Minute)}
				}, func(resp *wire.Response) {
					var rep wire.CreateSessionReply
					if cell.DecodeResult(resp, &rep) == nil {
						sessions[c] = append(sessions[c], rep)
					}
				})
				if err == nil && got[""] != per {
					err = fmt.Errorf("CreateSession replies %v, want %d successes", got, per)
				}
				if err != nil {
					fail(err)
				}
			})
		}
		wg.Wait()
		created = time.Since(start)
		if floodErr != nil {
			return
		}
		for c := range conns {
			wg.Go(func() {
				r := raws[c]
				err := send(r, len(sessions[c]), func(i int) (wire.Request, any) {
					ss := sessions[c][i]
					req := wire.Request{Method: wire.MAcquire, Epoch: r.Epoch, Session: ss.Session, Secret: ss.Secret}
					return req, wire.AcquireArgs{Path: lock, Mode: fs.Exclusive, Wait: true, WaitID: 1}
				})
				if err != nil {
					fail(err)
				}
			})
		}
		wg.Wait()
		if floodErr != nil {
			return
		}
		// Queued: the master counts them as waiters.
		if !wait.Until(time.Minute, wait.Every(500*time.Millisecond, func() bool {
			return s.Metric(t, "chubby_lock_waiters") >= float64(n)
		})) {
			fail(fmt.Errorf("%v lock waiters after a minute, want %d", s.Metric(t, "chubby_lock_waiters"), n))
		}
		sent = time.Since(start)
	}()
	// The bystander writes while the queue builds and for a second after.
	by.writeUntil(t, root+"/other", queued, time.Second)
	if floodErr != nil {
		t.Fatalf("flood: %v", floodErr)
	}
	t.Logf("%d sessions created over %d connections in %v; their %d blocking Acquires of one held lock all queued %v after the start",
		n, conns, created.Round(time.Millisecond), n, sent.Round(time.Millisecond))
	t.Logf("second session's writes while the queue built and stood: %s", &by.lat)
	wantP99(t, &by.lat, fmt.Sprintf("second session's writes beside %d queued Acquires", n))

	// The holder lets go: the queue's head is granted, the rest still wait.
	start := time.Now()
	if err := holder.Release(ctx); err != nil {
		t.Fatal(err)
	}
	wait.For(t, 30*time.Second, "the head of the queue to be granted", func() bool {
		return s.Metric(t, "chubby_lock_waiters") == float64(n-1)
	})
	t.Logf("release → head of a %d-long queue granted (seen in /metrics) in %v", n, time.Since(start).Round(time.Millisecond))
}
