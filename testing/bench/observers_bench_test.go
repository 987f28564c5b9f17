package bench

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chubby-dev/chubby/client"
	"github.com/chubby-dev/chubby/client/election"
	"github.com/chubby-dev/chubby/testing/proc"
)

// BenchmarkObserverCost: what N observers of an election cost the master,
// against N idle sessions (issue 14: "10,000 observers cost the master no
// more than 10,000 idle sessions"). Each mode runs a fresh chubbyd process
// (fsync on), opens N sessions from this process (their KeepAlives at the
// default TTL) and — in the observers mode — has each follow an election
// with Observe (a watch on the directory and the leader's record cached).
// After a settling time it measures the master's CPU time over a window of
// steady state, and its resident memory and Go heap in use at the end. The observers mode then changes
// the leader and times how long every observer takes to see it.
//
// N is CHUBBY_BENCH_SESSIONS (default 10000), the window
// CHUBBY_BENCH_WINDOW (default 20s). Run it once per mode:
//
//	go test -run XXX -bench ObserverCost -benchtime 1x -timeout 30m ./testing/bench
func BenchmarkObserverCost(b *testing.B) {
	n := envInt(b, "CHUBBY_BENCH_SESSIONS", 10000)
	window := 20 * time.Second
	if v := os.Getenv("CHUBBY_BENCH_WINDOW"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			b.Fatal(err)
		}
		window = d
	}
	for _, mode := range []string{"idle", "observers"} {
		b.Run(fmt.Sprintf("%s=%d", mode, n), func(b *testing.B) {
			s := proc.StartServer(b, proc.Options{LogLevel: "info"})
			pid := s.PID(b)
			clients := dialParallel(b, s.RPCAddr, n)
			const dir = "/ls/local/observed"
			var leader *election.Election
			var changes []<-chan election.Leader
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if mode == "observers" {
				// The leader's session outlives the load of setting up n
				// sessions in this one process.
				lc, err := client.Dial(ctx, client.Config{Servers: []string{s.RPCAddr}, SessionTTL: time.Minute})
				if err != nil {
					b.Fatal(err)
				}
				defer lc.Close()
				leader = election.New(lc, dir)
				if _, err := leader.Campaign(ctx, []byte("first")); err != nil {
					b.Fatal(err)
				}
				changes = make([]<-chan election.Leader, n)
				var wg sync.WaitGroup
				sem := make(chan struct{}, 32)
				for i, c := range clients {
					wg.Add(1)
					sem <- struct{}{}
					go func() {
						defer wg.Done()
						defer func() { <-sem }()
						changes[i] = election.New(c, dir).Observe(ctx)
						for l := range changes[i] {
							if string(l.Value) == "first" {
								return
							}
						}
						b.Errorf("observer %d: Observe ended before it saw the leader", i)
					}()
				}
				wg.Wait()
			}
			time.Sleep(5 * time.Second) // settle: the dial burst's KeepAlives even out
			cpu0 := procCPU(b, pid)
			t0 := time.Now()
			time.Sleep(window)
			cpu := procCPU(b, pid) - cpu0
			elapsed := time.Since(t0)
			b.ReportMetric(float64(cpu.Milliseconds())/elapsed.Seconds(), "master-cpu-ms/s")
			b.ReportMetric(float64(procRSS(b, pid))/(1<<20), "master-rss-MB")
			// Heap in use: the live state, less what the setup's burst left
			// in the process's resident memory.
			b.ReportMetric(s.Metric(b, "go_memstats_heap_inuse_bytes")/(1<<20), "master-heap-inuse-MB")
			b.ReportMetric(s.Metric(b, "chubby_keepalives_total")/float64(time.Since(t0).Seconds()+5), "keepalives/s")
			if mode != "observers" {
				return
			}
			// A leader change reaches every observer: the record's
			// invalidation and the event, to each of n sessions.
			nc, err := client.Dial(ctx, client.Config{Servers: []string{s.RPCAddr}, SessionTTL: time.Minute})
			if err != nil {
				b.Fatal(err)
			}
			defer nc.Close()
			next := election.New(nc, dir)
			done := make(chan *election.Term, 1)
			go func() {
				t, err := next.Campaign(ctx, []byte("second"))
				if err != nil {
					b.Error(err)
				}
				done <- t
			}()
			start := time.Now()
			if err := leader.Resign(ctx); err != nil {
				b.Fatal(err)
			}
			ds := make([]time.Duration, n)
			var wg sync.WaitGroup
			for i, ch := range changes {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for l := range ch {
						if string(l.Value) == "second" {
							ds[i] = time.Since(start)
							return
						}
					}
				}()
			}
			wg.Wait()
			<-done
			slices.Sort(ds)
			b.ReportMetric(float64(ds[n/2].Microseconds())/1000, "change-seen-p50-ms")
			b.ReportMetric(float64(ds[n*99/100].Microseconds())/1000, "change-seen-p99-ms")
			b.ReportMetric(float64(ds[n-1].Microseconds())/1000, "change-seen-max-ms")
		})
	}
}

func envInt(b *testing.B, name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		b.Fatalf("%s=%q: want a positive count", name, v)
	}
	return n
}

// procCPU is the process's user and system CPU time so far (Linux).
func procCPU(b *testing.B, pid int) time.Duration {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		b.Fatal(err)
	}
	// Fields after the command name (which is in parentheses): utime and
	// stime are the 14th and 15th fields, in clock ticks (USER_HZ = 100).
	rest := strings.Fields(string(data[strings.LastIndexByte(string(data), ')')+2:]))
	ut, _ := strconv.ParseInt(rest[11], 10, 64)
	st, _ := strconv.ParseInt(rest[12], 10, 64)
	return time.Duration(ut+st) * 10 * time.Millisecond
}

// procRSS is the process's resident memory in bytes (Linux).
func procRSS(b *testing.B, pid int) int64 {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		b.Fatal(err)
	}
	for _, l := range strings.Split(string(data), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == "VmRSS:" {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			return kb << 10
		}
	}
	b.Fatal("no VmRSS")
	return 0
}
