package server

import (
	"sync"
	"time"

	"github.com/hashicorp/raft"
)

// raftWatch turns raft's observations into what an operator sees: leader
// changes (chubby_leader_changes_total and the journal), servers added to
// or removed from the configuration, and — on the leader — heartbeats to a
// follower failing and resuming, which is how the master knows a follower
// is down and since when.
type raftWatch struct {
	self string
	j    *journal
	m    *metrics
	obs  *raft.Observer
	ch   chan raft.Observation
	stop chan struct{}
	done chan struct{}

	mu sync.Mutex
	// failing: followers whose heartbeats from this leader fail, with the
	// leader's last contact with each (zero: never).
	failing map[string]heartbeatFailure
}

// heartbeatFailure is a follower this leader cannot reach.
type heartbeatFailure struct {
	Since       time.Time // the first failure of this run
	LastContact time.Time // the leader's last successful contact
}

// startObserver registers the raft observer; stopRaft stops it.
func (s *Server) startObserver() {
	w := &raftWatch{self: s.cfg.NodeID, j: s.journal, m: s.metrics, ch: make(chan raft.Observation, 64),
		stop: make(chan struct{}), done: make(chan struct{}), failing: map[string]heartbeatFailure{}}
	w.obs = raft.NewObserver(w.ch, false, func(o *raft.Observation) bool {
		switch o.Data.(type) {
		case raft.LeaderObservation, raft.PeerObservation, raft.FailedHeartbeatObservation, raft.ResumedHeartbeatObservation:
			return true
		}
		return false
	})
	s.raft.RegisterObserver(w.obs)
	s.watch = w
	go w.loop()
}

// stopObserver ends the observer's goroutine; raft must still exist.
func (s *Server) stopObserver() {
	if s.watch == nil {
		return
	}
	s.raft.DeregisterObserver(s.watch.obs)
	close(s.watch.stop)
	<-s.watch.done
}

func (w *raftWatch) loop() {
	defer close(w.done)
	for {
		select {
		case <-w.stop:
			return
		case o := <-w.ch:
			w.handle(o.Data)
		}
	}
}

func (w *raftWatch) handle(data any) {
	switch d := data.(type) {
	case raft.LeaderObservation:
		w.m.leaderChanges.Inc()
		if d.LeaderID == "" {
			w.j.add("leader", "no raft leader")
		} else {
			w.j.add("leader", "%s is the raft leader", d.LeaderID)
		}
		if string(d.LeaderID) != w.self {
			w.mu.Lock()
			w.failing = map[string]heartbeatFailure{}
			w.mu.Unlock()
		}
	case raft.PeerObservation:
		if d.Removed {
			w.j.add("member", "%s removed from the raft configuration", d.Peer.ID)
		} else {
			w.j.add("member", "%s added to the raft configuration (%s)", d.Peer.ID, d.Peer.Suffrage)
		}
	case raft.FailedHeartbeatObservation:
		w.m.hbFailures.Inc()
		w.mu.Lock()
		_, already := w.failing[string(d.PeerID)]
		if !already {
			w.failing[string(d.PeerID)] = heartbeatFailure{Since: time.Now(), LastContact: d.LastContact}
		}
		w.mu.Unlock()
		if !already {
			w.j.add("heartbeat", "heartbeats to %s failing", d.PeerID)
		}
	case raft.ResumedHeartbeatObservation:
		w.mu.Lock()
		_, was := w.failing[string(d.PeerID)]
		delete(w.failing, string(d.PeerID))
		w.mu.Unlock()
		if was {
			w.j.add("heartbeat", "heartbeats to %s resumed", d.PeerID)
		}
	}
}

// failures returns the followers whose heartbeats fail now (on the leader).
func (w *raftWatch) failures() map[string]heartbeatFailure {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make(map[string]heartbeatFailure, len(w.failing))
	for id, f := range w.failing {
		out[id] = f
	}
	return out
}
