package server

import (
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/chubby-dev/chubby/session"
)

// TestJournalKeepsTheNewest: the journal returns the newest events first,
// stamped with its clock, and past journalSize forgets the oldest.
func TestJournalKeepsTheNewest(t *testing.T) {
	clk := session.NewManualClock(time.Unix(1_700_000_000, 0))
	j := newJournal(clk)
	if got := j.recent(10); len(got) != 0 {
		t.Fatalf("empty journal: %v", got)
	}
	for i := range journalSize + 5 {
		j.add("expiry", "session %d expired", i)
		clk.Advance(time.Second)
	}
	got := j.recent(3)
	for k, e := range got {
		i := journalSize + 4 - k
		if e.Text != fmt.Sprintf("session %d expired", i) || e.Kind != "expiry" || !e.At.Equal(time.Unix(1_700_000_000+int64(i), 0)) {
			t.Errorf("recent[%d] = %+v, want session %d at +%ds", k, e, i, i)
		}
	}
	all := j.recent(1000)
	if len(all) != journalSize || all[len(all)-1].Text != "session 5 expired" {
		t.Fatalf("%d events kept, oldest %q; want %d, oldest session 5", len(all), all[len(all)-1].Text, journalSize)
	}
}

// TestSummarize: the page's quantiles come from the buckets as
// histogram_quantile computes them, and Max is the highest bucket in use.
func TestSummarize(t *testing.T) {
	h := prometheus.NewHistogram(prometheus.HistogramOpts{Name: "x", Buckets: []float64{1, 2, 4}})
	if s := summarize(h); s.Count != 0 {
		t.Fatalf("empty: %+v", s)
	}
	for range 50 {
		h.Observe(0.5) // bucket ≤1
	}
	for range 50 {
		h.Observe(3) // bucket ≤4
	}
	s := summarize(h)
	if s.Count != 100 || s.P50 != 1 || s.Max != 4 || math.Abs(s.P99-3.96) > 1e-9 {
		t.Fatalf("summary %+v; want count 100, p50 1, p99 3.96, max 4", s)
	}
	h.Observe(10) // past the last bucket
	if s := summarize(h); !math.IsInf(s.Max, 1) {
		t.Fatalf("an observation past the buckets: max %v, want +Inf", s.Max)
	}
}
