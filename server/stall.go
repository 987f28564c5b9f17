package server

import (
	"slices"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/chubby-dev/chubby/session"
)

// stallThreshold: a timer that fires this late means the master
// itself was stalled (GC, SIGSTOP, a slow disk); the session is given a fresh
// lease instead of being expired for the master's own pause.
const stallThreshold = 500 * time.Millisecond

// stallTick is how often the stall monitor looks at the clock.
const stallTick = 100 * time.Millisecond

// stallMonitor notices that this process stopped running for a while (a GC
// pause, SIGSTOP, a starved CPU, a disk that blocked the runtime): it ticks
// every stallTick and records a stall when a tick came stallThreshold late.
// It measures the scheduling delay of its own tick, nothing else: the
// master's lease timers firing late because it has many leases to expire
// is not a stall (issue 17, finding 3). Lease expiry consults it, so
// sessions whose leases ran out while the master itself could not answer
// their KeepAlives get back the lease time the stall ate instead of being
// expired for the master's own pause (DESIGN hazard etcd #15247).
type stallMonitor struct {
	clock session.Clock
	log   hclog.Logger
	done  <-chan struct{} // closed when the server shuts down

	mu       sync.Mutex
	lastTick time.Time
	stalls   []stall // recent stalls, oldest first, at most maxStalls
}

// stall is a time this process did not run, as the monitor saw it: from its
// last punctual tick to the late one.
type stall struct{ start, end time.Time }

// maxStalls bounds the stalls remembered; a lease looks only at the stalls
// since its last renewal.
const maxStalls = 256

// start arms the monitor. It re-arms itself from its own callback (an
// AfterFunc, so a ManualClock runs every tick in order as it advances).
func (m *stallMonitor) start() {
	m.mu.Lock()
	m.lastTick = m.clock.Now()
	m.mu.Unlock()
	m.clock.AfterFunc(stallTick, m.tick)
}

func (m *stallMonitor) tick() {
	select {
	case <-m.done:
		return
	default:
	}
	defer m.clock.AfterFunc(stallTick, m.tick)
	now := m.clock.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	if gap := now.Sub(m.lastTick); gap > stallThreshold {
		if len(m.stalls) == maxStalls {
			m.stalls = append(m.stalls[:0], m.stalls[1:]...)
		}
		m.stalls = append(m.stalls, stall{start: m.lastTick, end: now})
		m.log.Warn("this server stalled; leases that ran out meanwhile get back the time the stall took", "stalled_for", gap)
	}
	m.lastTick = now
}

// stallsSince returns the stalls that ended after since, oldest first,
// with the one the process is only now coming out of (the monitor has not
// ticked through it yet) last.
func (m *stallMonitor) stallsSince(now, since time.Time) []stall {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []stall
	for i := len(m.stalls) - 1; i >= 0 && m.stalls[i].end.After(since); i-- {
		out = append(out, m.stalls[i])
	}
	slices.Reverse(out)
	if now.Sub(m.lastTick) > stallThreshold {
		out = append(out, stall{start: m.lastTick, end: now})
	}
	return out
}
