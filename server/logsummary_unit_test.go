package server

import (
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/chubby-dev/chubby/session"
)

// lines are the buffer's log lines.
func (s *syncBuffer) lines() []string { return strings.Split(strings.TrimSpace(s.String()), "\n") }

// TestExpiryFloodIsSummarised (issue 17, finding 5): a thousand expiries
// make one INFO line with their count, once per interval, and a line per
// session only at debug level.
func TestExpiryFloodIsSummarised(t *testing.T) {
	clk := session.NewManualClock(unitStart)
	var out syncBuffer
	log := hclog.New(&hclog.LoggerOptions{Output: &out, Level: hclog.Info})
	s := newLogSummary(log, clk, summaryInterval)
	for id := range 1000 {
		s.add(hclog.Info, "sessions expired", "session", id)
	}
	if got := out.String(); got != "" {
		t.Fatalf("logged before the interval ended: %q", out.lines())
	}
	clk.Advance(summaryInterval)
	lines := out.lines()
	if len(lines) != 1 || !strings.Contains(lines[0], "[INFO]  sessions expired: count=1000") {
		t.Fatalf("after the interval: %q; want one INFO line with count=1000", lines)
	}
	clk.Advance(time.Hour) // nothing happened: nothing logged
	if n := len(out.lines()); n != 1 {
		t.Fatalf("%d lines after a quiet hour", n)
	}

	var dbg syncBuffer
	s = newLogSummary(hclog.New(&hclog.LoggerOptions{Output: &dbg, Level: hclog.Debug}), clk, summaryInterval)
	s.add(hclog.Info, "sessions expired", "session", 42)
	if l := dbg.lines(); len(l) != 1 || !strings.Contains(l[0], "[DEBUG] sessions expired: session=42") {
		t.Fatalf("debug line of one expiry: %q", l)
	}
}

// TestStallFreshLeasesSummarised: sessions given a fresh lease after a
// master stall are one WARN line, not one each.
func TestStallFreshLeasesSummarised(t *testing.T) {
	clk := session.NewManualClock(unitStart)
	var out syncBuffer
	m := newMetrics()
	stall := &fakeStall{}
	lt := newLeaseTable(clk, hclog.New(&hclog.LoggerOptions{Output: &out, Level: hclog.Info}), stall,
		m.lease())
	for id := uint64(1); id <= 200; id++ {
		lt.add(clk.Now(), id, unitTTL, nil, "")
	}
	stall.add(clk.Now(), clk.Now().Add(time.Second)) // the monitor saw the process stall
	clk.Advance(unitTTL)
	wantExpired(t, lt)
	if got := out.String(); got != "" {
		t.Fatalf("logged before the interval ended: %q", got)
	}
	clk.Advance(summaryInterval)
	lines := out.lines()
	if len(lines) != 1 || !strings.Contains(lines[0], "[WARN]  leases ran out while the master stalled; sessions given back the time the stall took: count=200") {
		t.Fatalf("log: %q; want one WARN line with count=200", lines)
	}
}
