package main

import (
	"bytes"
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"
)

func sampleResult() *Result {
	return &Result{
		Workload:     "lock",
		Clients:      3,
		Duration:     2500 * time.Millisecond,
		Warmup:       time.Second,
		PerClientOps: []int64{10, 20, 30},
		Errors:       1,
		FirstError:   "boom",
		OpsMeaning:   "cycles",
		LatencyOf:    "cycle",
		Latency:      Summary{Count: 60, P50: 2 * time.Millisecond, P90: 3 * time.Millisecond, P99: 4500 * time.Microsecond, Max: 9 * time.Millisecond},
		Extras:       []Figure{{"overlaps", int64(0), "none"}},
	}
}

// commonKeys are the keys every JSON report has.
var commonKeys = []string{"workload", "clients", "duration_s", "ops", "per_client_ops", "ops_per_s", "errors", "p50_ms", "p90_ms", "p99_ms", "max_ms"}

// checkJSON decodes one report and checks its keys and that its numbers
// agree: ops is the sum of per_client_ops, ops_per_s is ops/duration_s.
func checkJSON(t *testing.T, out []byte, extra ...string) map[string]any {
	t.Helper()
	if bytes.Count(bytes.TrimSpace(out), []byte("\n")) != 0 {
		t.Errorf("not one line: %q", out)
	}
	var m map[string]any
	if err := json.Unmarshal(out, &m); err != nil {
		t.Fatalf("not JSON: %v: %q", err, out)
	}
	for _, k := range append(append([]string{}, commonKeys...), extra...) {
		if _, ok := m[k]; !ok {
			t.Errorf("no key %q in %s", k, out)
		}
	}
	var sum float64
	per, _ := m["per_client_ops"].([]any)
	for _, v := range per {
		sum += v.(float64)
	}
	ops, _ := m["ops"].(float64)
	if sum != ops {
		t.Errorf("ops %v, but per_client_ops %v sum to %v", ops, per, sum)
	}
	if c, _ := m["clients"].(float64); int(c) != len(per) {
		t.Errorf("clients %v, but %d per_client_ops", c, len(per))
	}
	d, _ := m["duration_s"].(float64)
	rate, _ := m["ops_per_s"].(float64)
	if d <= 0 || math.Abs(rate-ops/d) > 1e-9*math.Max(1, rate) {
		t.Errorf("ops_per_s %v, want ops/duration_s = %v/%v", rate, ops, d)
	}
	return m
}

func TestResultJSON(t *testing.T) {
	var b bytes.Buffer
	if err := sampleResult().WriteJSON(&b); err != nil {
		t.Fatal(err)
	}
	m := checkJSON(t, b.Bytes(), "overlaps", "first_error")
	for k, want := range map[string]any{"workload": "lock", "ops": 60.0, "ops_per_s": 24.0, "errors": 1.0, "p99_ms": 4.5, "max_ms": 9.0, "duration_s": 2.5, "first_error": "boom"} {
		if m[k] != want {
			t.Errorf("%s = %v, want %v", k, m[k], want)
		}
	}
	// Keys in report order: ops, then per_client_ops.
	if s := b.String(); strings.Index(s, `"ops"`) > strings.Index(s, `"per_client_ops"`) || strings.Index(s, `"workload"`) != 1 {
		t.Errorf("keys out of order: %s", s)
	}
	// An empty run still prints numbers, not NaN (which JSON cannot hold).
	b.Reset()
	if err := (&Result{Workload: "write"}).WriteJSON(&b); err != nil {
		t.Fatalf("empty result: %v", err)
	}
	if !strings.Contains(b.String(), `"per_client_ops":[]`) || !strings.Contains(b.String(), `"ops_per_s":0`) {
		t.Errorf("empty result: %s", b.String())
	}
}

func TestResultTable(t *testing.T) {
	var b bytes.Buffer
	if err := sampleResult().WriteTable(&b); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{
		"chubbybench lock: 3 clients, 2.5s measured after 1s warmup, closed loop",
		"FIGURE", "MEANING",
		"ops ", "60", "cycles",
		"per_client_ops", "10–30",
		"ops_per_s", "24.00",
		"errors", "p50_ms", "2.000", "p99_ms", "4.500", "max_ms", "9.000",
		"overlaps", "first_error", "boom",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("table has no %q:\n%s", want, out)
		}
	}
	r := sampleResult()
	r.Rate = 20
	b.Reset()
	r.WriteTable(&b)
	if !strings.Contains(b.String(), "at most 20 ops/s") {
		t.Errorf("table does not name the rate cap:\n%s", b.String())
	}
}
