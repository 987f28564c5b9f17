package main

import (
	"errors"
	"testing"
	"time"
)

func TestPercentile(t *testing.T) {
	hundred := make([]time.Duration, 100) // 1ms … 100ms
	for i := range hundred {
		hundred[i] = time.Duration(i+1) * time.Millisecond
	}
	for _, tc := range []struct {
		in   []time.Duration
		p    float64
		want time.Duration
	}{
		{nil, 50, 0},
		{[]time.Duration{7}, 1, 7},
		{[]time.Duration{7}, 99, 7},
		{hundred, 50, 50 * time.Millisecond},
		{hundred, 90, 90 * time.Millisecond},
		{hundred, 99, 99 * time.Millisecond},
		{hundred, 100, 100 * time.Millisecond},
		{hundred, 0.1, 1 * time.Millisecond},
		{[]time.Duration{1, 2, 3, 4}, 50, 2},  // nearest rank: ceil(0.5·4) = 2nd
		{[]time.Duration{1, 2, 3, 4}, 51, 3},  // ceil(2.04) = 3rd
		{[]time.Duration{1, 2, 3, 4}, 99, 4},  // never past the last
		{[]time.Duration{10, 20, 30}, 90, 30}, // ceil(2.7) = 3rd
	} {
		if got := percentile(tc.in, tc.p); got != tc.want {
			t.Errorf("percentile(%v, %v) = %v, want %v", tc.in, tc.p, got, tc.want)
		}
	}
}

func TestSummarize(t *testing.T) {
	// Unsorted in, sorted percentiles out.
	var in []time.Duration
	for i := 100; i >= 1; i-- {
		in = append(in, time.Duration(i)*time.Millisecond)
	}
	s := summarize(in)
	want := Summary{Count: 100, P50: 50 * time.Millisecond, P90: 90 * time.Millisecond, P99: 99 * time.Millisecond, Max: 100 * time.Millisecond}
	if s != want {
		t.Errorf("summarize = %+v, want %+v", s, want)
	}
	if s := summarize(nil); s != (Summary{}) {
		t.Errorf("summarize(nil) = %+v, want zero", s)
	}
}

// TestWorkerWindow: a worker counts operations only inside the measured
// window, and errors in every phase.
func TestWorkerWindow(t *testing.T) {
	e := &env{}
	w := &worker{run: e}
	w.observe(time.Millisecond) // warmup: not counted
	w.fail(errors.New("first"))
	e.phase.Store(phaseMeasure)
	w.observe(2 * time.Millisecond)
	w.observe(3 * time.Millisecond)
	w.fail(errors.New("second"))
	e.phase.Store(phaseDone)
	w.observe(4 * time.Millisecond) // after the end: not counted
	if w.ops != 2 || len(w.lat) != 2 || w.errs != 2 || w.firstErr.Error() != "first" {
		t.Errorf("worker = ops %d lat %v errs %d first %v; want 2 ops (2ms, 3ms), 2 errors, the first 'first'", w.ops, w.lat, w.errs, w.firstErr)
	}
	r := &Result{}
	collect(r, []*worker{w, {ops: 5, lat: []time.Duration{time.Second}, errs: 1}})
	if r.Ops() != 7 || r.Errors != 3 || r.Latency.Max != time.Second || r.Latency.Count != 3 || r.FirstError != "first" {
		t.Errorf("collect = ops %d errors %d latency %+v first %q", r.Ops(), r.Errors, r.Latency, r.FirstError)
	}
}
