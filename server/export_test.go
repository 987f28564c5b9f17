package server

import (
	"time"

	dto "github.com/prometheus/client_model/go"
)

// Barrier returns once every command proposed before it has been applied
// and its effects acted on (waiters woken, lock-delay timers armed): after
// it, a test may assert that something did not happen. A barrier is a raft
// entry but not a command: Status().Applied does not move.
func Barrier(s *Server) error { return s.raft.Barrier(10 * time.Second).Error() }

// ParkedKeepAlives is how many sessions have a KeepAlive parked on the
// master: a test moving the lease clock waits for every renewing client to
// be parked first, or a KeepAlive still on the wire would miss the step.
func ParkedKeepAlives(s *Server) int {
	s.leases.mu.Lock()
	defer s.leases.mu.Unlock()
	n := 0
	for _, l := range s.leases.m {
		if l.poll != nil {
			n++
		}
	}
	return n
}

// SetExpiring marks the expiry of session id as in flight, as the lease
// timer does before the master confirms its leadership and proposes the
// expiry, or clears the mark, as when that expiry is abandoned. It reports
// whether the master has a lease for the session.
func SetExpiring(s *Server, id uint64, on bool) bool {
	s.leases.mu.Lock()
	defer s.leases.mu.Unlock()
	l, ok := s.leases.m[id]
	if ok {
		l.ending = on
	}
	return ok
}

// RegisteredWaits is how many blocked Acquires are registered on s.
func RegisteredWaits(s *Server) int {
	s.waits.mu.Lock()
	defer s.waits.mu.Unlock()
	return len(s.waits.m)
}

// KeepAlivesReceived is the master's count of session renewals received
// (chubby_keepalives_total).
func KeepAlivesReceived(s *Server) float64 {
	var m dto.Metric
	if err := s.metrics.keepAlives.Write(&m); err != nil {
		panic(err)
	}
	return m.GetCounter().GetValue()
}
