package server

import (
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
// every stallTick and records when a tick came stallThreshold late. Lease
// expiry consults it, so sessions whose leases ran out while the master
// itself could not answer their KeepAlives get a fresh lease instead of
// being expired for the master's own pause (DESIGN hazard etcd #15247).
type stallMonitor struct {
	clock session.Clock
	log   hclog.Logger
	done  <-chan struct{} // closed when the server shuts down

	mu       sync.Mutex
	lastTick time.Time
	stallEnd time.Time // when the latest stall was noticed
}

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
		m.stallEnd = now
		m.log.Warn("this server stalled; sessions whose leases ran out meanwhile get a fresh lease", "stalled_for", gap)
	}
	m.lastTick = now
}

// stalledSince reports whether the process stalled after since, or is only
// now coming out of a stall the monitor has not ticked through yet.
func (m *stallMonitor) stalledSince(now, since time.Time) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return now.Sub(m.lastTick) > stallThreshold || m.stallEnd.After(since)
}
