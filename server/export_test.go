package server

import "time"

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
