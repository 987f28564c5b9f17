package bench

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"slices"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/chubby-dev/chubby/client"
	"github.com/chubby-dev/chubby/server"
	"github.com/chubby-dev/chubby/testing/wait"
	"github.com/hashicorp/go-hclog"
)

func freeAddr(b *testing.B) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// benchServer starts one server with fsync on (unless BENCH_NOSYNC) on the
// given ports, quiet, closed when the benchmark ends.
func benchServer(b *testing.B, id, rpc, raftAddr string, peers []server.Peer, mods ...func(*server.Config)) *server.Server {
	cfg := server.DefaultConfig()
	cfg.NodeID, cfg.RPCAddr, cfg.RaftAddr, cfg.GossipAddr = id, rpc, raftAddr, freeAddr(b)
	cfg.DataDir = b.TempDir()
	cfg.HTTPAddr = ""
	cfg.StaticPeers = peers
	cfg.NoSync = os.Getenv("BENCH_NOSYNC") != ""
	cfg.Logger = hclog.New(&hclog.LoggerOptions{Output: io.Discard})
	for _, m := range mods {
		m(&cfg)
	}
	s, err := server.New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	if err := s.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	return s
}

// startCell starts a one-server cell with fsync on and returns its RPC address.
func startCell(b *testing.B, mods ...func(*server.Config)) string {
	s := benchServer(b, "bench", freeAddr(b), freeAddr(b), nil, mods...)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := s.WaitMaster(ctx); err != nil {
		b.Fatal(err)
	}
	return s.RPCAddr()
}

// startCell3 starts a three-server cell in this process: real raft over TCP
// between the servers, each with its own bbolt log (fsync on). It returns
// the RPC addresses.
func startCell3(b *testing.B) []string {
	var peers []server.Peer
	for i := 0; i < 3; i++ {
		peers = append(peers, server.Peer{ID: fmt.Sprintf("s%d", i), RPCAddr: freeAddr(b), RaftAddr: freeAddr(b)})
	}
	var servers []*server.Server
	for _, p := range peers {
		servers = append(servers, benchServer(b, p.ID, p.RPCAddr, p.RaftAddr, peers))
	}
	wait.For(b, 20*time.Second, "a master", func() bool {
		return slices.ContainsFunc(servers, (*server.Server).IsMaster)
	})
	return []string{peers[0].RPCAddr, peers[1].RPCAddr, peers[2].RPCAddr}
}

func dial(b *testing.B, addr string, n int) []*client.Client {
	return dialCell(b, []string{addr}, n)
}

func dialCell(b *testing.B, addrs []string, n int) []*client.Client {
	return dialWith(b, client.Config{Servers: addrs}, n)
}

// dialWith dials n sessions with cfg, closed when the benchmark ends.
func dialWith(b *testing.B, cfg client.Config, n int) []*client.Client {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	out := make([]*client.Client, n)
	for i := range out {
		c, err := client.Dial(ctx, cfg)
		if err != nil {
			b.Fatal(err)
		}
		out[i] = c
		b.Cleanup(func() { c.Close() })
	}
	return out
}

// pctMS is the p-quantile (0..1) of ds in milliseconds.
func pctMS(ds []time.Duration, p float64) float64 {
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return float64(s[int(p*float64(len(s)-1))].Microseconds()) / 1000
}

// latencies collects per-operation durations from many goroutines.
type latencies struct {
	mu sync.Mutex
	d  []time.Duration
}

func (l *latencies) add(ds []time.Duration) {
	l.mu.Lock()
	l.d = append(l.d, ds...)
	l.mu.Unlock()
}

func (l *latencies) report(b *testing.B, elapsed time.Duration, unit string) {
	if len(l.d) == 0 {
		return
	}
	sort.Slice(l.d, func(i, j int) bool { return l.d[i] < l.d[j] })
	pct := func(p float64) float64 {
		return float64(l.d[int(p*float64(len(l.d)-1))].Microseconds()) / 1000
	}
	b.ReportMetric(float64(len(l.d))/elapsed.Seconds(), unit+"/s")
	b.ReportMetric(pct(0.50), "p50-ms")
	b.ReportMetric(pct(0.99), "p99-ms")
}

// run spreads b.N operations over the workers and times each one.
func run(b *testing.B, workers int, op func(w, i int) error) {
	var lat latencies
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	b.ResetTimer()
	start := time.Now()
	for w := 0; w < workers; w++ {
		n := b.N / workers
		if w < b.N%workers {
			n++
		}
		wg.Add(1)
		go func(w, n int) {
			defer wg.Done()
			ds := make([]time.Duration, 0, n)
			for i := 0; i < n; i++ {
				t0 := time.Now()
				if err := op(w, i); err != nil {
					errs <- err
					return
				}
				ds = append(ds, time.Since(t0))
			}
			lat.add(ds)
		}(w, n)
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
	lat.report(b, elapsed, "ops")
}

// acquireRelease: each of n sessions runs blocking Acquire + Release cycles
// on a lock of its own (two durable raft commits per cycle, group-committed
// across sessions).
func acquireRelease(b *testing.B, addrs []string, n int) {
	acquireReleaseBy(b, dialCell(b, addrs, n))
}

// acquireReleaseBy runs the cycles of acquireRelease with one session of
// clients each.
func acquireReleaseBy(b *testing.B, clients []*client.Client) {
	n := len(clients)
	ctx := context.Background()
	handles := make([]*client.Handle, n)
	for i, c := range clients {
		h, err := c.Open(ctx, fmt.Sprintf("/ls/local/lock-%d", i), client.Create())
		if err != nil {
			b.Fatal(err)
		}
		handles[i] = h
	}
	run(b, n, func(w, i int) error {
		if err := handles[w].Acquire(ctx, client.Exclusive); err != nil {
			return err
		}
		return handles[w].Release(ctx)
	})
}

// raftLogs are the raft log stores the write benchmarks run on, side by
// side (store=bolt, store=wal): -raft-log.
var raftLogs = []string{server.RaftLogBolt, server.RaftLogWAL}

// withRaftLog sets the raft log store of a benchmark's servers.
func withRaftLog(kind string) func(*server.Config) {
	return func(cfg *server.Config) { cfg.RaftLog = kind }
}

// BenchmarkAcquireRelease: cycles on a one-server cell, on each raft log
// store.
func BenchmarkAcquireRelease(b *testing.B) {
	for _, n := range []int{1, 16, 64} {
		for _, store := range raftLogs {
			b.Run(fmt.Sprintf("sessions=%d/store=%s", n, store), func(b *testing.B) {
				acquireRelease(b, []string{startCell(b, withRaftLog(store))}, n)
			})
		}
	}
}

// BenchmarkAcquireRelease3: the same cycles on a three-server cell (every
// command committed by a quorum, fsync on every server).
func BenchmarkAcquireRelease3(b *testing.B) {
	for _, n := range []int{1, 64} {
		b.Run(fmt.Sprintf("sessions=%d", n), func(b *testing.B) {
			acquireRelease(b, startCell3(b), n)
		})
	}
}

// BenchmarkContendedHandoff: two sessions take turns on one lock, each
// looping Acquire → Release. While one holds, the other is blocked in
// Acquire on the master, which grants it in the same raft apply that commits
// the Release. The metric is the time from the start of one session's
// Release to the other's Acquire returning.
func BenchmarkContendedHandoff(b *testing.B) {
	addr := startCell(b)
	clients := dial(b, addr, 2)
	ctx := context.Background()
	var take, give [2]func() error
	for i, c := range clients {
		h, err := c.Open(ctx, "/ls/local/contended", client.Create())
		if err != nil {
			b.Fatal(err)
		}
		take[i] = func() error { return h.Acquire(ctx, client.Exclusive) }
		give[i] = func() error { return h.Release(ctx) }
	}
	handoffs(b, take, give)
}

// handoffs runs b.N turns of two workers passing one thing (a lock, a
// leadership) back and forth, each looping take → give, and reports the
// time from the start of one worker's give to the other's take returning.
func handoffs(b *testing.B, take, give [2]func() error) {
	var (
		mu       sync.Mutex
		lastGive time.Time // start of the latest give
		ds       = make([]time.Duration, 0, b.N)
		wg       sync.WaitGroup
		errs     = make(chan error, 2)
	)
	b.ResetTimer()
	start := time.Now()
	for w := 0; w < 2; w++ {
		n := b.N / 2
		if w == 0 {
			n += b.N % 2
		}
		wg.Add(1)
		go func(w, n int) {
			defer wg.Done()
			for i := 0; i < n; i++ {
				if err := take[w](); err != nil {
					errs <- err
					return
				}
				mu.Lock()
				if !lastGive.IsZero() {
					ds = append(ds, time.Since(lastGive))
				}
				lastGive = time.Now()
				mu.Unlock()
				if err := give[w](); err != nil {
					errs <- err
					return
				}
			}
		}(w, n)
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

// BenchmarkSetContents: durable 100-byte writes from one client, one at a
// time; each waits for its raft commit and fsync; on each raft log store.
func BenchmarkSetContents(b *testing.B) {
	for _, store := range raftLogs {
		b.Run("store="+store, func(b *testing.B) { setContents(b, startCell(b, withRaftLog(store))) })
	}
}

func setContents(b *testing.B, addr string) {
	c := dial(b, addr, 1)[0]
	ctx := context.Background()
	h, err := c.Open(ctx, "/ls/local/file", client.Create())
	if err != nil {
		b.Fatal(err)
	}
	data := make([]byte, 100)
	run(b, 1, func(w, i int) error {
		_, err := h.SetContents(ctx, data)
		return err
	})
}
