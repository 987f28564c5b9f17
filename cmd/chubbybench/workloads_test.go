package main

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/chubby-dev/chubby/client"
	"github.com/chubby-dev/chubby/testing/cell"
	"github.com/chubby-dev/chubby/wire"
)

// testOptions are a short run of workload name with n clients against
// addr: 1 s measured after 200 ms of warmup.
func testOptions(t *testing.T, name, addr string, n int) *options {
	t.Helper()
	w := lookupWorkload(name)
	if w == nil {
		t.Fatalf("no workload %q", name)
	}
	o := &options{
		workload: w, servers: []string{addr}, clients: n,
		duration: time.Second, warmup: 200 * time.Millisecond,
		rate: w.defRate, timeout: 10 * time.Second, quiet: true,
		cached: true, size: 100,
		mode: client.Exclusive, roundTimeout: 10 * time.Second,
	}
	if err := o.validate(); err != nil {
		t.Fatal(err)
	}
	return o
}

// runWorkload runs o's workload and checks what every run must: no
// error, ops > 0, errors == 0.
func runWorkload(t *testing.T, o *options) *Result {
	t.Helper()
	var stderr bytes.Buffer
	e := newEnv(o, &stderr)
	r, err := o.workload.run(context.Background(), e)
	e.close()
	if err != nil {
		t.Fatalf("%s: %v", o.workload.name, err)
	}
	if stderr.Len() > 0 {
		t.Errorf("%s: stderr: %s", o.workload.name, stderr.String())
	}
	t.Logf("%s: %d ops (%v), %d errors, p50 %v, extras %v", r.Workload, r.Ops(), r.PerClientOps, r.Errors, r.Latency.P50, r.Extras)
	if r.Ops() == 0 || r.Errors != 0 || r.Interrupted {
		t.Errorf("%s: ops %d errors %d (first: %s) interrupted %v; want ops > 0, no errors", r.Workload, r.Ops(), r.Errors, r.FirstError, r.Interrupted)
	}
	if len(r.PerClientOps) != o.clients || r.Latency.Count != int(r.Ops()) {
		t.Errorf("%s: %d per-client counts, %d latency samples for %d ops; want %d counts, a sample per op", r.Workload, len(r.PerClientOps), r.Latency.Count, r.Ops(), o.clients)
	}
	if r.Duration < o.duration {
		t.Errorf("%s: window %v, shorter than -duration %v", r.Workload, r.Duration, o.duration)
	}
	return r
}

// figure returns the workload figure key of r.
func figure(t *testing.T, r *Result, key string) any {
	t.Helper()
	for _, f := range r.Extras {
		if f.Key == key {
			return f.Value
		}
	}
	t.Fatalf("%s: no figure %q in %v", r.Workload, key, r.Extras)
	return nil
}

// TestWorkloads runs every workload for about a second against a
// one-server in-process cell, with a few clients.
func TestWorkloads(t *testing.T) {
	c := cell.Start(t)
	addr := c.Addr()

	t.Run("lock", func(t *testing.T) {
		r := runWorkload(t, testOptions(t, "lock", addr, 3))
		for i, n := range r.PerClientOps {
			if n == 0 {
				t.Errorf("client %d completed no cycle: the locks are contended?", i)
			}
		}
		// The run's files and directory are gone.
		cl := c.Dial(t, client.Config{})
		h, err := cl.Open(context.Background(), c.Path("chubbybench"))
		if err != nil {
			t.Fatal(err)
		}
		if names, err := h.ReadDir(context.Background()); err != nil || len(names) != 0 {
			t.Errorf("after the run, chubbybench/ holds %v (%v); want it empty", names, err)
		}
	})

	t.Run("contended", func(t *testing.T) {
		o := testOptions(t, "contended", addr, 3)
		o.hold = time.Millisecond // holds long enough to overlap if exclusion broke
		r := runWorkload(t, o)
		if mx, ov := figure(t, r, "max_holders"), figure(t, r, "overlaps"); mx != int64(1) || ov != int64(0) {
			t.Errorf("max_holders %v, overlaps %v: two clients held the lock at once", mx, ov)
		}
		if figure(t, r, "handoffs_per_s") != r.OpsPerSec() {
			t.Errorf("handoffs_per_s %v, ops_per_s %v", figure(t, r, "handoffs_per_s"), r.OpsPerSec())
		}
	})

	// The exclusion check sees holders overlap: with the lock taken shared,
	// it must.
	t.Run("contended-detects-overlap", func(t *testing.T) {
		o := testOptions(t, "contended", addr, 3)
		o.mode, o.hold = client.Shared, 20*time.Millisecond
		r := runWorkload(t, o)
		if mx, ov := figure(t, r, "max_holders").(int64), figure(t, r, "overlaps").(int64); mx < 2 || ov == 0 {
			t.Errorf("shared lock: max_holders %d, overlaps %d; the check should have seen holders overlap", mx, ov)
		}
	})

	t.Run("read-cached", func(t *testing.T) {
		o := testOptions(t, "read", addr, 2)
		o.rate = 1000 // cached reads cost no round trip: keep the loop from spinning a core
		r := runWorkload(t, o)
		if hits := figure(t, r, "cache_hits").(int64); hits == 0 {
			t.Errorf("cached reads: no cache hits")
		}
	})

	t.Run("read-uncached", func(t *testing.T) {
		o := testOptions(t, "read", addr, 2)
		o.cached, o.rate = false, 1000
		r := runWorkload(t, o)
		if hits := figure(t, r, "cache_hits").(int64); hits != 0 {
			t.Errorf("uncached reads: %d cache hits", hits)
		}
	})

	t.Run("write", func(t *testing.T) {
		o := testOptions(t, "write", addr, 2)
		o.size = 1000
		runWorkload(t, o)
	})

	t.Run("fanout", func(t *testing.T) {
		r := runWorkload(t, testOptions(t, "fanout", addr, 3))
		writes := figure(t, r, "writes").(int64)
		if writes == 0 || figure(t, r, "missed") != int64(0) {
			t.Fatalf("writes %d, missed %v", writes, figure(t, r, "missed"))
		}
		for i, n := range r.PerClientOps { // every reader read every write's generation
			if n != writes {
				t.Errorf("reader %d read %d of the %d writes' generations", i, n, writes)
			}
		}
		if r.Ops() != writes*int64(len(r.PerClientOps)) {
			t.Errorf("ops %d, want writes × readers = %d", r.Ops(), writes*int64(len(r.PerClientOps)))
		}
	})

	t.Run("sessions", func(t *testing.T) {
		r := runWorkload(t, testOptions(t, "sessions", addr, 4))
		if r.Ops() != 4 || figure(t, r, "sessions_lost") != int64(0) {
			t.Errorf("sessions: %d created, %v lost; want 4, 0", r.Ops(), figure(t, r, "sessions_lost"))
		}
	})

	// -conns below -clients: the sessions share the connections and renew
	// with KeepAliveMany calls only (counted by a proxy in front of the
	// cell).
	t.Run("sessions-shared", func(t *testing.T) {
		p := c.NewProxy(t)
		o := testOptions(t, "sessions", p.Addr(), 40)
		o.conns = 2
		r := runWorkload(t, o)
		if r.Ops() != 40 || figure(t, r, "sessions_lost") != int64(0) {
			t.Errorf("sessions: %d created, %v lost; want 40, 0", r.Ops(), figure(t, r, "sessions_lost"))
		}
		if ka, many := p.Count(wire.MKeepAlive), p.Count(wire.MKeepAliveMany); ka != 0 || many == 0 {
			t.Errorf("%d KeepAlive and %d KeepAliveMany calls; want KeepAliveMany only", ka, many)
		}
	})
	// -group: a SessionGroup per connection renews its sessions itself;
	// Close ends them all on the master.
	t.Run("sessions-group", func(t *testing.T) {
		p := c.NewProxy(t)
		o := testOptions(t, "sessions", p.Addr(), 40)
		o.conns = 2
		o.group = true
		r := runWorkload(t, o)
		if r.Ops() != 40 || figure(t, r, "sessions_lost") != int64(0) {
			t.Errorf("sessions: %d created, %v lost; want 40, 0", r.Ops(), figure(t, r, "sessions_lost"))
		}
		if ka, many := p.Count(wire.MKeepAlive), p.Count(wire.MKeepAliveMany); ka != 0 || many == 0 {
			t.Errorf("%d KeepAlive and %d KeepAliveMany calls; want KeepAliveMany only", ka, many)
		}
		if n := c.Status().Sessions; n != 0 {
			t.Errorf("%d sessions left on the master after the run", n)
		}
	})
	t.Run("lock-shared", func(t *testing.T) {
		o := testOptions(t, "lock", addr, 4)
		o.conns = 2
		runWorkload(t, o)
	})
}
