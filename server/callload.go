package server

import "sync/atomic"

// callLoad counts the calls the server runs (not inline ones: KeepAlive,
// Hello) and the sends of events and KeepAlive answers to sessions, and
// how many of them started while another was running, for the chubbyd
// processor controller (internal/procs): a client that waits for each
// answer before its next call finds the server running nothing else, and
// one processor serves it sooner than two; calls that overlap, and a
// write's event sent to a hundred readers, are served sooner by every
// processor (issue 13).
type callLoad struct {
	running           atomic.Int64
	started, overlaps atomic.Uint64
}

// enter counts a call starting; the returned func, safe to call more than
// once, counts it ended: call it before the reply is sent (a client's next
// call may arrive as soon as it is) or when the call parks.
func (l *callLoad) enter() (leave func()) {
	l.started.Add(1)
	if l.running.Add(1) > 1 {
		l.overlaps.Add(1)
	}
	var left atomic.Bool
	return func() {
		if left.CompareAndSwap(false, true) {
			l.running.Add(-1)
		}
	}
}

// CallLoad reports the calls and sends to sessions started since the
// server was made and how many of them started while another was
// running. Calls that wait for a lock grant stop counting as running
// while they wait; a send counts from the moment it is queued.
func (s *Server) CallLoad() (calls, overlapped uint64) {
	return s.load.started.Load(), s.load.overlaps.Load()
}
