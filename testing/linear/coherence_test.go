package linear

// Coherence of the client cache (issue 4, acceptance 1; DESIGN invariant 5;
// Chubby §2.9): several clients read a few files through their caches while
// others write them, and watchers read each file as its contents_modified
// event arrives (served from the contents the event brought), every read
// and write is recorded — a read answered
// from a cache is an operation like any other — and porcupine checks that
// the history is linearizable: no read returns a value older than one a
// completed write (or an earlier read) established.

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chubby-dev/chubby/client"
	"github.com/chubby-dev/chubby/proxy"
	"github.com/chubby-dev/chubby/testing/cell"
	"github.com/chubby-dev/chubby/testing/leak"
	"go.uber.org/goleak"
)

// TestMain fails the package if a test leaves a goroutine behind, except the
// waiter on a raft future stranded on a killed master (hashicorp/raft never
// answers a VerifyLeader that lands in its buffered channel as it shuts
// down; the read itself gives up when the server closes, Server.awaitRaft);
// and porcupine's workers after a check's timeout (a history it could not
// decide in time, which the test skips): told to stop, each finishes the
// model step it is in first, and a lock model's step over a long history
// outlasted goleak's retries in CI on a loaded machine.
func TestMain(m *testing.M) {
	leak.VerifyTestMain(m,
		goleak.IgnoreAnyFunction("github.com/anishathalye/porcupine.checkParallel.func1"))
}

// runFor is how long each coherence test drives its workload; set
// CHUBBY_LINEAR_DURATION (a Go duration) to run longer.
func runFor(t *testing.T) time.Duration {
	if v := os.Getenv("CHUBBY_LINEAR_DURATION"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			t.Fatalf("CHUBBY_LINEAR_DURATION: %v", err)
		}
		return d
	}
	return 5 * time.Second
}

// workload describes a cell to run the coherence workload on.
type workload struct {
	dial func(t *testing.T, cfg client.Config) *client.Client
	path func(name string) string
	// nemesis, if set, runs alongside the workload (it returns before the
	// deadline) and may note what it did on rec.
	nemesis func(t *testing.T, rec *Recorder, deadline time.Time)
	// plainReaders are clients that only read, with handles opened
	// NoCache: through a proxy, its own cache answers them.
	plainReaders int
}

const (
	nKeys        = 3
	nReaders     = 4 // clients that only read, caching
	nWatchers    = 2 // clients that read each file right after its contents_modified event (filled from the event)
	nWriters     = 2 // clients that write, and read concurrently through their own cache
	opTimeout    = 20 * time.Second
	readerPause  = time.Millisecond
	writerPause  = 8 * time.Millisecond
	minHitFactor = 0.3 // at least this fraction of the readers' reads must be cache hits
)

// runCoherence runs the workload for d and checks the history.
func runCoherence(t *testing.T, w workload, d time.Duration) {
	keys := make([]string, nKeys)
	setup := w.dial(t, client.Config{})
	for i := range keys {
		keys[i] = w.path(fmt.Sprintf("k%d", i))
		if _, err := setup.WriteFile(ctxT(t), keys[i], nil); err != nil {
			t.Fatal(err)
		}
	}
	readers := make([]*client.Client, nReaders)
	for i := range readers {
		readers[i] = w.dial(t, client.Config{})
	}
	writers := make([]*client.Client, nWriters)
	for i := range writers {
		writers[i] = w.dial(t, client.Config{})
	}
	watchers := make([]*client.Client, nWatchers)
	for i := range watchers {
		watchers[i] = w.dial(t, client.Config{})
	}
	plain := make([]*client.Client, w.plainReaders)
	for i := range plain {
		plain[i] = w.dial(t, client.Config{DisableCache: true})
	}
	// Handles opened before recording starts (Open is cached too, but not
	// an operation on the registers).
	handles := func(cl *client.Client, opts ...client.OpenOption) []*client.Handle {
		hs := make([]*client.Handle, len(keys))
		for i, k := range keys {
			h, err := cl.Open(ctxT(t), k, opts...)
			if err != nil {
				t.Fatal(err)
			}
			hs[i] = h
		}
		return hs
	}

	rec := NewRecorder()
	deadline := time.Now().Add(d)
	var (
		wg            sync.WaitGroup
		reads, writes atomic.Int64
		readerReads   atomic.Int64 // reads by the read-only clients
		failed        atomic.Int64
	)
	// reader runs reads by porcupine client id on cl's handles until the
	// deadline. Hits are counted per read only where the goroutine is the
	// client's only reader (then the client's hit counter is its own).
	reader := func(id int, cl *client.Client, hs []*client.Handle, countHits bool, rng *rand.Rand) {
		defer wg.Done()
		for time.Now().Before(deadline) {
			k := rng.IntN(len(hs))
			before := cl.CacheStats().Hits
			op := rec.Begin(id, Read(keys[k]))
			ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
			data, _, err := hs[k].GetContentsAndStat(ctx)
			cancel()
			var meta any
			if countHits {
				if cl.CacheStats().Hits > before {
					meta = "cache hit"
				} else {
					meta = "from the master"
				}
			}
			op.Read(string(data), err, meta)
			reads.Add(1)
			if countHits {
				readerReads.Add(1)
			}
			if err != nil {
				failed.Add(1)
				t.Logf("client %d: read %s: %v", id, keys[k], err)
			}
			time.Sleep(time.Duration(rng.Int64N(int64(readerPause)))) // think time
		}
	}
	// watcher reads a file the moment its contents_modified event is
	// delivered: the read is usually answered by the contents the event
	// brought into the cache (issue 13), so the history checks that those
	// are never older than a write that returned.
	watcher := func(id int, cl *client.Client, hs []*client.Handle) {
		defer wg.Done()
		byPath := map[string]int{}
		for i, k := range keys {
			byPath[k] = i
		}
		for time.Now().Before(deadline) {
			var e client.Event
			select {
			case e = <-cl.Events():
			case <-time.After(time.Until(deadline)):
				return
			}
			k, ok := byPath[e.Path]
			if !ok || e.Type != client.EventContentsModified {
				continue
			}
			op := rec.Begin(id, Read(keys[k]))
			ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
			data, _, err := hs[k].GetContentsAndStat(ctx)
			cancel()
			op.Read(string(data), err, "after its event")
			reads.Add(1)
			if err != nil {
				failed.Add(1)
				t.Logf("client %d: read %s after its event: %v", id, keys[k], err)
			}
		}
	}
	writer := func(id int, cl *client.Client, hs []*client.Handle, rng *rand.Rand) {
		defer wg.Done()
		for n := 0; time.Now().Before(deadline); n++ {
			k := rng.IntN(len(hs))
			v := fmt.Sprintf("w%d-%d", id, n)
			op := rec.Begin(id, Write(keys[k], v))
			ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
			var err error
			if n%2 == 0 {
				_, err = hs[k].SetContents(ctx, []byte(v))
			} else {
				_, err = cl.WriteFile(ctx, keys[k], []byte(v))
			}
			cancel()
			op.Wrote(err)
			writes.Add(1)
			if err != nil {
				failed.Add(1)
				t.Logf("client %d: write %s: %v", id, keys[k], err)
			}
			time.Sleep(time.Duration(rng.Int64N(int64(writerPause)))) // think time
		}
	}
	id := 0
	hitsBefore := make([]uint64, nReaders)
	for i, cl := range readers {
		hitsBefore[i] = cl.CacheStats().Hits
		wg.Add(1)
		go reader(id, cl, handles(cl), true, rand.New(rand.NewPCG(uint64(id), 1)))
		id++
	}
	for _, cl := range writers {
		hs := handles(cl)
		wg.Add(2)
		go writer(id, cl, hs, rand.New(rand.NewPCG(uint64(id), 2)))
		go reader(id+1, cl, hs, false, rand.New(rand.NewPCG(uint64(id+1), 3)))
		id += 2
	}
	for _, cl := range watchers {
		wg.Add(1)
		go watcher(id, cl, handles(cl, client.WithEvents(client.EventContentsModified)))
		id++
	}
	for _, cl := range plain {
		wg.Add(1)
		go reader(id, cl, handles(cl, client.NoCache()), false, rand.New(rand.NewPCG(uint64(id), 4)))
		id++
	}
	if w.nemesis != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w.nemesis(t, rec, deadline)
		}()
	}
	wg.Wait()

	var hits uint64
	for i, cl := range readers {
		hits += cl.CacheStats().Hits - hitsBefore[i]
	}
	var refills uint64
	for _, cl := range watchers {
		refills += cl.CacheStats().Refills
	}
	t.Logf("%d reads (%d by read-only clients, %d of them cache hits), %d writes, %d failed, %d entries filled from events", reads.Load(), readerReads.Load(), hits, writes.Load(), failed.Load(), refills)
	Check(t, RegisterModel, rec.History(), rec.Annotations()...)
	if frac := float64(hits) / float64(readerReads.Load()); frac < minHitFactor {
		t.Fatalf("only %.0f%% of the readers' reads were cache hits; the test did not exercise the cache", 100*frac)
	}
	if writes.Load() < 50 {
		t.Fatalf("only %d writes: the workload did not run", writes.Load())
	}
	if refills == 0 {
		t.Fatal("no watcher's cache was filled from an event; the test did not exercise event fills")
	}
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	t.Cleanup(cancel)
	return ctx
}

// TestCacheCoherence runs the workload on a one-server cell.
func TestCacheCoherence(t *testing.T) {
	c := cell.Start(t)
	runCoherence(t, workload{
		dial: func(t *testing.T, cfg client.Config) *client.Client { return c.Dial(t, cfg) },
		path: func(name string) string { return c.Path(name) },
	}, runFor(t))
}

// TestCacheCoherenceAcrossFailover runs the workload on a three-server cell
// whose master is killed mid-run (and later restarted): clients that cached
// under the old master must not serve those entries once the new master
// commits writes (they flush on seeing the new epoch, and the new master
// waits for every session to talk to it or expire before committing).
func TestCacheCoherenceAcrossFailover(t *testing.T) {
	c := cell.StartCluster(t, 3)
	d := runFor(t) + 3*time.Second // time for the failover itself
	runCoherence(t, workload{
		dial: func(t *testing.T, cfg client.Config) *client.Client { return c.Dial(t, cfg) },
		path: func(name string) string { return c.Path(name) },
		nemesis: func(t *testing.T, rec *Recorder, deadline time.Time) {
			time.Sleep(time.Until(deadline) / 4) // the schedule: kill a quarter into the run
			m := c.Master(t)
			at := rec.Now()
			c.Kill(t, m)
			nm := c.WaitMaster(t, others(c, m))
			rec.Note("nemesis", fmt.Sprintf("node%d killed; node%d master", m, nm), at, rec.Now())
			t.Logf("killed the master node%d; node%d is master after %.0f ms", m, nm, float64(rec.Now()-at)/1e6)
			time.Sleep(time.Until(deadline) / 3) // the schedule: restart a third of the rest later
			at = rec.Now()
			c.Restart(t, m)
			rec.Note("nemesis", fmt.Sprintf("node%d restarted", m), at, rec.Now())
		},
	}, d)
}

func others(c *cell.Cluster, i int) []int {
	var out []int
	for j := 0; j < c.N(); j++ {
		if j != i {
			out = append(out, j)
		}
	}
	return out
}

// TestCacheCoherenceThroughProxies runs the workload with every client
// going through one of two chubbyproxies (package proxy) in front of a
// three-server cell; a quarter into the run one proxy is killed, and its
// clients go on through the other with their sessions and caches. Reads
// answered from caches kept coherent through a proxy (invalidations and
// event fills travel in the proxy's KeepAliveMany replies) must still be
// linearizable, and so must the reads of clients that do not cache, which
// the proxies answer from their own caches.
func TestCacheCoherenceThroughProxies(t *testing.T) {
	c := cell.StartCluster(t, 3)
	var ps []*proxy.Proxy
	var addrs []string
	for range 2 {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		p, err := proxy.Start(ctx, proxy.Config{Cell: c.Addrs(), Listen: "127.0.0.1:0", Logger: c.Logger()})
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { p.Close() })
		ps = append(ps, p)
		addrs = append(addrs, p.Addr())
	}
	d := runFor(t) + 3*time.Second // time for the clients to move over
	runCoherence(t, workload{
		dial: func(t *testing.T, cfg client.Config) *client.Client {
			cfg.Servers, cfg.FixedServers = addrs, true
			return c.Dial(t, cfg)
		},
		path: func(name string) string { return c.Path(name) },
		nemesis: func(t *testing.T, rec *Recorder, deadline time.Time) {
			time.Sleep(time.Until(deadline) / 4)
			at := rec.Now()
			ps[0].Close()
			rec.Note("nemesis", "proxy 0 killed", at, rec.Now())
		},
		plainReaders: 2,
	}, d)
	var hits uint64
	for i, p := range ps {
		st := p.CacheStats()
		t.Logf("proxy %d: %d uncached reads answered from its cache, %d forwarded", i, st.Hits, st.Forwarded)
		hits += st.Hits
	}
	if hits == 0 {
		t.Fatal("no proxy answered a read from its own cache; the test did not exercise it")
	}
}
