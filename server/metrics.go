package server

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// metrics are the server's Prometheus series, on a registry of its own so
// several servers can live in one process (tests).
type metrics struct {
	reg           *prometheus.Registry
	calls         *prometheus.CounterVec
	badFrames     prometheus.Counter
	conns         prometheus.Gauge
	sessions      prometheus.Gauge
	keepAlives    prometheus.Counter
	created       prometheus.Counter
	expired       prometheus.Counter
	epoch         prometheus.Gauge
	applyLatency  prometheus.Histogram
	batchSize     prometheus.Histogram
	invalidations prometheus.Counter
	invalWait     prometheus.Histogram
	events        prometheus.Counter
	rejected      *prometheus.CounterVec
}

func newMetrics() *metrics {
	m := &metrics{
		reg:           prometheus.NewRegistry(),
		calls:         prometheus.NewCounterVec(prometheus.CounterOpts{Name: "chubby_rpc_calls_total", Help: "RPC calls received, by method."}, []string{"method"}),
		badFrames:     prometheus.NewCounter(prometheus.CounterOpts{Name: "chubby_rpc_bad_frames_total", Help: "Connections closed for malformed frames or unknown calls."}),
		conns:         prometheus.NewGauge(prometheus.GaugeOpts{Name: "chubby_rpc_connections", Help: "Open client connections."}),
		sessions:      prometheus.NewGauge(prometheus.GaugeOpts{Name: "chubby_sessions", Help: "Sessions with a lease on this master."}),
		keepAlives:    prometheus.NewCounter(prometheus.CounterOpts{Name: "chubby_keepalives_total", Help: "KeepAlive calls received."}),
		created:       prometheus.NewCounter(prometheus.CounterOpts{Name: "chubby_sessions_created_total", Help: "Sessions created."}),
		expired:       prometheus.NewCounter(prometheus.CounterOpts{Name: "chubby_sessions_expired_total", Help: "Sessions expired by this master."}),
		epoch:         prometheus.NewGauge(prometheus.GaugeOpts{Name: "chubby_master_epoch", Help: "Master epoch while serving, 0 otherwise."}),
		applyLatency:  prometheus.NewHistogram(prometheus.HistogramOpts{Name: "chubby_raft_apply_seconds", Help: "Time from propose to applied.", Buckets: prometheus.ExponentialBuckets(0.0002, 2, 14)}),
		invalidations: prometheus.NewCounter(prometheus.CounterOpts{Name: "chubby_cache_invalidations_total", Help: "Invalidations sent to caching sessions."}),
		invalWait:     prometheus.NewHistogram(prometheus.HistogramOpts{Name: "chubby_cache_invalidation_wait_seconds", Help: "Time a write waited for cachers to acknowledge.", Buckets: prometheus.ExponentialBuckets(0.0001, 2, 18)}),
		rejected:      prometheus.NewCounterVec(prometheus.CounterOpts{Name: "chubby_rejected_total", Help: "Connections and sessions refused at a limit (resource_exhausted), by limit."}, []string{"limit"}),
		events:        prometheus.NewCounter(prometheus.CounterOpts{Name: "chubby_events_total", Help: "Events queued for sessions."}),
		batchSize:     prometheus.NewHistogram(prometheus.HistogramOpts{Name: "chubby_raft_batch_commands", Help: "Commands per raft log entry (group commit).", Buckets: prometheus.ExponentialBuckets(1, 2, 10)}),
	}
	m.reg.MustRegister(m.calls, m.badFrames, m.conns, m.sessions, m.keepAlives, m.created, m.expired, m.epoch, m.applyLatency, m.batchSize, m.invalidations, m.invalWait, m.events, m.rejected,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}
