package server

import (
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/chubby-dev/chubby/session"
)

// logSummary turns a flood of like events (a million sessions expiring)
// into one line per kind per interval: each event is logged at debug level
// with its details, and the count of each kind at its own level once the
// interval after the first of them has passed. Nothing runs while nothing
// happens.
type logSummary struct {
	log      hclog.Logger
	clock    session.Clock
	interval time.Duration

	mu     sync.Mutex
	counts map[summaryKey]int
	armed  bool
}

type summaryKey struct {
	level hclog.Level
	msg   string
}

// summaryInterval is how often a flood of like events is summarised.
const summaryInterval = 10 * time.Second

func newLogSummary(log hclog.Logger, clock session.Clock, interval time.Duration) *logSummary {
	return &logSummary{log: log, clock: clock, interval: interval, counts: map[summaryKey]int{}}
}

// add records one event: msg with args at debug level now, and counted
// under (level, msg) for the summary.
func (s *logSummary) add(level hclog.Level, msg string, args ...any) {
	s.log.Debug(msg, args...)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.counts[summaryKey{level, msg}]++
	if !s.armed {
		s.armed = true
		s.clock.AfterFunc(s.interval, s.flush)
	}
}

// flush logs the counts gathered since the last flush.
func (s *logSummary) flush() {
	s.mu.Lock()
	counts := s.counts
	s.counts = map[summaryKey]int{}
	s.armed = false
	s.mu.Unlock()
	for k, n := range counts {
		s.log.Log(k.level, k.msg, "count", n, "interval", s.interval)
	}
}
