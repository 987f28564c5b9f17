package main

// Latency statistics: the per-client record of a run and the percentiles
// of the report.

import (
	"math"
	"slices"
	"time"
)

// Summary is what the report says of a set of latency samples.
type Summary struct {
	Count              int
	P50, P90, P99, Max time.Duration
}

// summarize sorts samples in place and returns their percentiles.
func summarize(samples []time.Duration) Summary {
	slices.Sort(samples)
	s := Summary{Count: len(samples)}
	if len(samples) == 0 {
		return s
	}
	s.P50 = percentile(samples, 50)
	s.P90 = percentile(samples, 90)
	s.P99 = percentile(samples, 99)
	s.Max = samples[len(samples)-1]
	return s
}

// percentile returns the p-th percentile (0 < p ≤ 100) of sorted by the
// nearest-rank method: the smallest sample that at least p % of the samples
// do not exceed. It is a sample, never an interpolation; 0 for no samples.
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	rank := int(math.Ceil(p / 100 * float64(len(sorted))))
	rank = min(max(rank, 1), len(sorted))
	return sorted[rank-1]
}

// worker is one client's record of a run: only its own goroutine writes
// it, and the run reads it once every worker has stopped.
type worker struct {
	id       int
	ops      int64
	errs     int64
	firstErr error
	lat      []time.Duration
	run      *env
}

// observe counts one completed operation with latency d, if it completed
// inside the measured window (not in the warmup, not after the end).
func (w *worker) observe(d time.Duration) {
	if w.run.measuring() {
		w.record(d)
	}
}

// record counts one operation with latency d; the caller has checked that
// it belongs to the measured window.
func (w *worker) record(d time.Duration) {
	w.ops++
	w.lat = append(w.lat, d)
	w.run.liveOps.Add(1)
}

// fail counts a failed operation, in the warmup as in the measured window.
func (w *worker) fail(err error) {
	w.errs++
	if w.firstErr == nil {
		w.firstErr = err
	}
	w.run.liveErrs.Add(1)
}

// collect fills r's counters and latency figures from the workers' records.
func collect(r *Result, ws []*worker) {
	var all []time.Duration
	r.PerClientOps = make([]int64, len(ws))
	for i, w := range ws {
		r.PerClientOps[i] = w.ops
		r.Errors += w.errs
		all = append(all, w.lat...)
		if w.firstErr != nil && r.FirstError == "" {
			r.FirstError = w.firstErr.Error()
		}
	}
	r.Latency = summarize(all)
}
