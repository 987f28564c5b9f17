package server

import (
	"math"
	"sort"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	dto "github.com/prometheus/client_model/go"

	"github.com/chubby-dev/chubby/fs"
)

// metrics are the server's Prometheus series, on a registry of its own so
// several servers can live in one process (tests). README.md ("Metrics")
// documents every series; deploy/alerts.yml and deploy/grafana-dashboard.json
// use them, and TestDeployReferencesExportedMetrics checks that every name
// they use is one of these.
type metrics struct {
	reg           *prometheus.Registry
	calls         *prometheus.CounterVec
	denied        *prometheus.CounterVec
	badFrames     prometheus.Counter
	conns         prometheus.Gauge
	sessions      prometheus.Gauge
	keepAlives    prometheus.Counter
	urgentKA      prometheus.Counter
	leaseUsed     prometheus.Histogram
	created       prometheus.Counter
	expired       prometheus.Counter
	epoch         prometheus.Gauge
	serving       prometheus.Gauge
	applyLatency  prometheus.Histogram
	logStore      prometheus.Histogram
	batchSize     prometheus.Histogram
	invalidations prometheus.Counter
	invalWait     prometheus.Histogram
	invalWaiting  prometheus.Gauge
	events        prometheus.Counter
	rejected      *prometheus.CounterVec
	lockWait      prometheus.Histogram
	delayBlocks   prometheus.Counter
	leaderChanges prometheus.Counter
	failover      prometheus.Histogram
	hbFailures    prometheus.Counter
}

// deniedReasons are the wire codes counted in chubby_calls_denied_total:
// calls the server refused to carry out, as opposed to calls that ran and
// reported an outcome (no such node, lock held, CAS mismatch).
var deniedReasons = map[string]bool{
	"wrong_epoch":        true,
	"not_master":         true,
	"session_expired":    true,
	"resource_exhausted": true,
	"bad_request":        true,
	"bad_path":           true,
	"too_large":          true,
	"permission_denied":  true,
	"unavailable":        true,
}

func newMetrics() *metrics {
	m := &metrics{
		reg:           prometheus.NewRegistry(),
		calls:         prometheus.NewCounterVec(prometheus.CounterOpts{Name: "chubby_rpc_calls_total", Help: "RPC calls received, by method."}, []string{"method"}),
		denied:        prometheus.NewCounterVec(prometheus.CounterOpts{Name: "chubby_calls_denied_total", Help: "Calls refused without being carried out, by reason (the wire error code: wrong_epoch, not_master, session_expired, resource_exhausted, bad_request, bad_path, too_large, permission_denied, unavailable)."}, []string{"reason"}),
		badFrames:     prometheus.NewCounter(prometheus.CounterOpts{Name: "chubby_rpc_bad_frames_total", Help: "Connections closed for malformed frames or unknown calls."}),
		conns:         prometheus.NewGauge(prometheus.GaugeOpts{Name: "chubby_rpc_connections", Help: "Open client connections."}),
		sessions:      prometheus.NewGauge(prometheus.GaugeOpts{Name: "chubby_sessions", Help: "Sessions with a lease on this master (0 on other servers)."}),
		keepAlives:    prometheus.NewCounter(prometheus.CounterOpts{Name: "chubby_keepalives_total", Help: "Session renewals received: a KeepAlive call, or a session of a KeepAliveMany call."}),
		urgentKA:      prometheus.NewCounter(prometheus.CounterOpts{Name: "chubby_keepalives_urgent_total", Help: "KeepAlives sent urgent: the client's local lease had run out (jeopardy) or it had just reconnected (a failover)."}),
		leaseUsed:     prometheus.NewHistogram(prometheus.HistogramOpts{Name: "chubby_keepalive_lease_used_ratio", Help: "How much of its TTL a session had used when its KeepAlive arrived (time since its previous KeepAlive on this master / TTL). Healthy clients renew near 0.27-0.33; past 0.67 a client is likely in jeopardy; 1 is expiry.", Buckets: []float64{0.1, 0.2, 0.3, 0.35, 0.4, 0.5, 0.6, 0.67, 0.8, 0.9, 1}}),
		created:       prometheus.NewCounter(prometheus.CounterOpts{Name: "chubby_sessions_created_total", Help: "Sessions created."}),
		expired:       prometheus.NewCounter(prometheus.CounterOpts{Name: "chubby_sessions_expired_total", Help: "Sessions expired by this master (their lease ran out)."}),
		epoch:         prometheus.NewGauge(prometheus.GaugeOpts{Name: "chubby_master_epoch", Help: "Master epoch while serving, 0 otherwise."}),
		serving:       prometheus.NewGauge(prometheus.GaugeOpts{Name: "chubby_master_serving", Help: "1 while this server serves as master, 0 otherwise; the cell's sum is 1 when it has a master."}),
		applyLatency:  prometheus.NewHistogram(prometheus.HistogramOpts{Name: "chubby_raft_apply_seconds", Help: "Raft commit latency: time from propose to applied (log write, fsync, quorum, FSM).", Buckets: prometheus.ExponentialBuckets(0.0002, 2, 14)}),
		logStore:      prometheus.NewHistogram(prometheus.HistogramOpts{Name: "chubby_raft_log_store_seconds", Help: "Time to write a batch of raft log entries to the log store, fsync included.", Buckets: prometheus.ExponentialBuckets(0.0001, 2, 16)}),
		invalidations: prometheus.NewCounter(prometheus.CounterOpts{Name: "chubby_cache_invalidations_total", Help: "Invalidations sent to caching sessions."}),
		invalWait:     prometheus.NewHistogram(prometheus.HistogramOpts{Name: "chubby_cache_invalidation_wait_seconds", Help: "Time a write waited for cachers to acknowledge its invalidations (or their leases to run out) before it was proposed.", Buckets: prometheus.ExponentialBuckets(0.0001, 2, 18)}),
		invalWaiting:  prometheus.NewGauge(prometheus.GaugeOpts{Name: "chubby_writes_waiting_invalidation", Help: "Writes waiting now for cachers to acknowledge invalidations."}),
		rejected:      prometheus.NewCounterVec(prometheus.CounterOpts{Name: "chubby_rejected_total", Help: "Connections and sessions refused at a limit (resource_exhausted), by limit."}, []string{"limit"}),
		events:        prometheus.NewCounter(prometheus.CounterOpts{Name: "chubby_events_total", Help: "Events queued for sessions."}),
		batchSize:     prometheus.NewHistogram(prometheus.HistogramOpts{Name: "chubby_raft_batch_commands", Help: "Commands per raft log entry (group commit).", Buckets: prometheus.ExponentialBuckets(1, 2, 10)}),
		lockWait:      prometheus.NewHistogram(prometheus.HistogramOpts{Name: "chubby_lock_wait_seconds", Help: "Time a blocked Acquire waited on this master, from queued to granted.", Buckets: prometheus.ExponentialBuckets(0.001, 2, 18)}),
		delayBlocks:   prometheus.NewCounter(prometheus.CounterOpts{Name: "chubby_lock_delay_blocks_total", Help: "Acquires held back by a lock-delay: queued on, or refused at, a free lock whose holder's session expired."}),
		leaderChanges: prometheus.NewCounter(prometheus.CounterOpts{Name: "chubby_leader_changes_total", Help: "Raft leader changes this server observed (including to no leader)."}),
		failover:      prometheus.NewHistogram(prometheus.HistogramOpts{Name: "chubby_failover_seconds", Help: "On a new master: time from its last contact with the previous leader to serving as master.", Buckets: prometheus.ExponentialBuckets(0.05, 2, 10)}),
		hbFailures:    prometheus.NewCounter(prometheus.CounterOpts{Name: "chubby_raft_heartbeat_failures_total", Help: "Heartbeats from this leader to a follower that failed."}),
	}
	m.reg.MustRegister(m.calls, m.denied, m.badFrames, m.conns, m.sessions, m.keepAlives, m.urgentKA, m.leaseUsed, m.created, m.expired,
		m.epoch, m.serving, m.applyLatency, m.logStore, m.batchSize, m.invalidations, m.invalWait, m.invalWaiting, m.events, m.rejected,
		m.lockWait, m.delayBlocks, m.leaderChanges, m.failover, m.hbFailures,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	// Label values known in advance appear at 0, so rate() and alerts see
	// them before the first one happens.
	for r := range deniedReasons {
		m.denied.WithLabelValues(r)
	}
	for _, l := range []string{"connections", "sessions"} {
		m.rejected.WithLabelValues(l)
	}
	return m
}

// lease returns the series the lease table updates.
func (m *metrics) lease() leaseMetrics {
	return leaseMetrics{sessions: m.sessions, keepAlives: m.keepAlives, invalidations: m.invalidations,
		urgent: m.urgentKA, leaseUsed: m.leaseUsed}
}

// countDenied counts a call refused with err, if its code is a denial.
func (m *metrics) countDenied(code string) {
	if deniedReasons[code] {
		m.denied.WithLabelValues(code).Inc()
	}
}

// histSummary is what the status page shows of a histogram: how many
// observations and estimates of a few quantiles (from the buckets, as
// Prometheus' histogram_quantile does), since the server started.
type histSummary struct {
	Count         uint64
	P50, P99, Max float64 // Max: the upper bound of the highest non-empty bucket
	Sum           float64
}

// summarize reads a histogram's buckets.
func summarize(h prometheus.Histogram) histSummary {
	var pm dto.Metric
	if err := h.Write(&pm); err != nil || pm.Histogram == nil {
		return histSummary{}
	}
	hh := pm.Histogram
	s := histSummary{Count: hh.GetSampleCount(), Sum: hh.GetSampleSum()}
	if s.Count == 0 {
		return s
	}
	bs := hh.GetBucket()
	sort.Slice(bs, func(i, j int) bool { return bs[i].GetUpperBound() < bs[j].GetUpperBound() })
	q := func(q float64) float64 {
		rank := q * float64(s.Count)
		prevBound, prevCount := 0.0, 0.0
		for _, b := range bs {
			c := float64(b.GetCumulativeCount())
			if c >= rank {
				if c == prevCount {
					return b.GetUpperBound()
				}
				return prevBound + (b.GetUpperBound()-prevBound)*(rank-prevCount)/(c-prevCount)
			}
			prevBound, prevCount = b.GetUpperBound(), c
		}
		return math.Inf(1) // past the highest bucket
	}
	s.P50, s.P99 = q(0.5), q(0.99)
	s.Max = math.Inf(1)
	for _, b := range bs {
		if b.GetCumulativeCount() == s.Count {
			s.Max = b.GetUpperBound()
			break
		}
	}
	return s
}

// stateCollector exports gauges computed at scrape time: the replicated
// state's lock counts (one pass over the nodes; every server has them) and
// the master's sessions by lease state (one pass over the leases; 0 on
// other servers).
type stateCollector struct {
	locks                  func() fs.LockSummary
	leases                 func() leaseStates
	held, waiters, inDelay *prometheus.Desc
	byState                *prometheus.Desc
}

func newStateCollector(locks func() fs.LockSummary, leases func() leaseStates) *stateCollector {
	return &stateCollector{locks: locks, leases: leases,
		held:    prometheus.NewDesc("chubby_locks_held", "Locks with a holder, by mode.", []string{"mode"}, nil),
		waiters: prometheus.NewDesc("chubby_lock_waiters", "Blocked Acquires queued on all locks.", nil, nil),
		inDelay: prometheus.NewDesc("chubby_lock_delays_active", "Free locks inside a lock-delay (their holder's session expired).", nil, nil),
		byState: prometheus.NewDesc("chubby_sessions_by_state", "Sessions with a lease on this master by state: safe (renewed within 2/3 of its TTL), late (not: its client is likely in jeopardy), unflushed (carried over from an earlier master, not heard from yet), expiring.", []string{"state"}, nil),
	}
}

func (c *stateCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.held
	ch <- c.waiters
	ch <- c.inDelay
	ch <- c.byState
}

func (c *stateCollector) Collect(ch chan<- prometheus.Metric) {
	sum := c.locks()
	ch <- prometheus.MustNewConstMetric(c.held, prometheus.GaugeValue, float64(sum.Exclusive), "exclusive")
	ch <- prometheus.MustNewConstMetric(c.held, prometheus.GaugeValue, float64(sum.Shared), "shared")
	ch <- prometheus.MustNewConstMetric(c.waiters, prometheus.GaugeValue, float64(sum.Waiters))
	ch <- prometheus.MustNewConstMetric(c.inDelay, prometheus.GaugeValue, float64(sum.DelayedCount))
	st := c.leases()
	for _, s := range []struct {
		name string
		n    int
	}{{"safe", st.Safe}, {"late", st.Late}, {"unflushed", st.Unflushed}, {"expiring", st.Expiring}} {
		ch <- prometheus.MustNewConstMetric(c.byState, prometheus.GaugeValue, float64(s.n), s.name)
	}
}
