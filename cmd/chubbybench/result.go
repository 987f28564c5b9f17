package main

// The report of a run: one summary table, or one JSON object (-json).

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// Result is what a run measured.
type Result struct {
	Workload string
	Clients  int
	// Duration is the measured window: after the warmup, until the run
	// ended (shorter than -duration if it was interrupted).
	Duration time.Duration
	Warmup   time.Duration
	Rate     float64 // the -rate cap (0: closed loop)
	// RateOf names what -rate paces, in the heading ("" : ops).
	RateOf string
	// PerClientOps are the operations each client completed in the
	// measured window; their sum is the run's ops.
	PerClientOps []int64
	// Errors counts failed operations, warmup included.
	Errors     int64
	FirstError string
	// OpsMeaning says what one operation is; LatencyOf what one latency
	// sample times.
	OpsMeaning, LatencyOf string
	Latency               Summary
	// Extras are the workload's own figures, in report order.
	Extras      []Figure
	Interrupted bool
}

// Figure is one workload-specific figure of a Result.
type Figure struct {
	Key     string // the JSON key, also the table's label
	Value   any    // int64, float64, bool or string
	Meaning string
}

func (r *Result) rateOf() string {
	if r.RateOf == "" {
		return "ops"
	}
	return r.RateOf
}

// Ops is the number of operations completed in the measured window.
func (r *Result) Ops() int64 {
	var n int64
	for _, c := range r.PerClientOps {
		n += c
	}
	return n
}

// OpsPerSec is Ops over the measured window (0 for an empty window).
func (r *Result) OpsPerSec() float64 { return perSec(r.Ops(), r.Duration) }

func perSec(n int64, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return float64(n) / d.Seconds()
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// latencyFigures are the four figures of s under keys prefix_p50_ms, ….
func latencyFigures(prefix string, s Summary, of string) []Figure {
	return []Figure{
		{prefix + "_p50_ms", ms(s.P50), "median " + of},
		{prefix + "_p90_ms", ms(s.P90), "90th percentile"},
		{prefix + "_p99_ms", ms(s.P99), "99th percentile"},
		{prefix + "_max_ms", ms(s.Max), "slowest"},
	}
}

// figures lists every figure of the report in order: the common ones, then
// the workload's.
func (r *Result) figures() []Figure {
	fs := []Figure{
		{"workload", r.Workload, ""},
		{"clients", int64(r.Clients), "sessions driving the load, each its own client.Client and connection"},
		{"duration_s", r.Duration.Seconds(), fmt.Sprintf("measured window (after %v warmup)", r.Warmup)},
		{"warmup_s", r.Warmup.Seconds(), "not measured"},
		{"rate", r.Rate, "cap on " + r.rateOf() + " started per second, all clients together (0: closed loop)"},
		{"ops", r.Ops(), r.OpsMeaning},
		{"ops_per_s", r.OpsPerSec(), "ops / duration_s"},
		{"errors", r.Errors, "failed operations, warmup included"},
		{"p50_ms", ms(r.Latency.P50), "median " + r.LatencyOf},
		{"p90_ms", ms(r.Latency.P90), "90th percentile"},
		{"p99_ms", ms(r.Latency.P99), "99th percentile"},
		{"max_ms", ms(r.Latency.Max), "slowest"},
	}
	fs = append(fs, r.Extras...)
	if r.FirstError != "" {
		fs = append(fs, Figure{"first_error", r.FirstError, ""})
	}
	if r.Interrupted {
		fs = append(fs, Figure{"interrupted", true, "the run was stopped before its end"})
	}
	return fs
}

// MarshalJSON writes one object whose keys are in report order, with
// per_client_ops after ops.
func (r *Result) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	put := func(k string, v any) error {
		if b.Len() > 1 {
			b.WriteByte(',')
		}
		kb, _ := json.Marshal(k)
		vb, err := json.Marshal(v)
		if err != nil {
			return fmt.Errorf("%s: %w", k, err)
		}
		b.Write(kb)
		b.WriteByte(':')
		b.Write(vb)
		return nil
	}
	for _, f := range r.figures() {
		if err := put(f.Key, f.Value); err != nil {
			return nil, err
		}
		if f.Key == "ops" {
			per := r.PerClientOps
			if per == nil {
				per = []int64{}
			}
			if err := put("per_client_ops", per); err != nil {
				return nil, err
			}
		}
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// WriteJSON prints r as one JSON object on one line.
func (r *Result) WriteJSON(w io.Writer) error {
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", b)
	return err
}

// WriteTable prints r as the summary table: one figure a line, its JSON
// key, value and meaning.
func (r *Result) WriteTable(w io.Writer) error {
	loop := "closed loop"
	if r.Rate > 0 {
		loop = fmt.Sprintf("at most %g %s/s", r.Rate, r.rateOf())
	}
	fmt.Fprintf(w, "chubbybench %s: %d clients, %s measured after %v warmup, %s\n\n",
		r.Workload, r.Clients, fmtSeconds(r.Duration), r.Warmup, loop)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "FIGURE\tVALUE\tMEANING\n")
	for _, f := range r.figures() {
		switch f.Key {
		case "workload", "clients", "duration_s", "warmup_s", "rate":
			continue // in the heading
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\n", f.Key, fmtValue(f.Key, f.Value), f.Meaning)
		if f.Key == "ops" && len(r.PerClientOps) > 1 {
			lo, hi := slices.Min(r.PerClientOps), slices.Max(r.PerClientOps)
			fmt.Fprintf(tw, "per_client_ops\t%d–%d\tfewest–most ops of one client\n", lo, hi)
		}
	}
	return tw.Flush()
}

func fmtSeconds(d time.Duration) string {
	return strings.TrimSuffix(strings.TrimRight(fmt.Sprintf("%.2f", d.Seconds()), "0"), ".") + "s"
}

func fmtValue(key string, v any) string {
	switch v := v.(type) {
	case float64:
		if strings.HasSuffix(key, "_ms") {
			return fmt.Sprintf("%.3f", v)
		}
		if strings.HasSuffix(key, "_s") {
			return fmt.Sprintf("%.2f", v)
		}
		if strings.HasSuffix(key, "_cores") {
			return fmt.Sprintf("%.3f", v)
		}
		return fmt.Sprintf("%.1f", v)
	case string:
		return v
	default:
		return fmt.Sprint(v)
	}
}
