package server

import (
	"crypto/tls"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/pprof"
	"time"

	"github.com/hashicorp/raft"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/chubby-dev/chubby/fs"
)

// Status is what /status reports.
type Status struct {
	Node      string `json:"node"`
	Cell      string `json:"cell"`
	RPCAddr   string `json:"rpc_addr"`
	RaftState string `json:"raft_state"`
	Master    bool   `json:"master"`
	Epoch     uint64 `json:"epoch"`
	Sessions  int    `json:"sessions"`
	Nodes     int    `json:"nodes"`
	Applied   uint64 `json:"applied_index"`
	// FirstLog is the oldest raft log entry kept: it moves past 1 once a
	// snapshot let the log be compacted.
	FirstLog uint64 `json:"first_log_index"`
	// Raft's view: the term, the last log index written here, the commit
	// index, the leader's name ("" if none known) and how long ago this
	// server last heard from the leader (0 on the leader, -1 never).
	Term          uint64 `json:"term"`
	LastLogIndex  uint64 `json:"last_log_index"`
	CommitIndex   uint64 `json:"commit_index"`
	Leader        string `json:"leader"`
	LastContactMS int64  `json:"last_contact_ms"`
}

// Status returns the server's current status.
func (s *Server) Status() Status {
	st := Status{Node: s.cfg.NodeID, Cell: s.cfg.Cell, RPCAddr: s.RPCAddr(), RaftState: s.raft.State().String(),
		Epoch: s.epoch.Load()}
	st.Master = st.Epoch != 0
	if s.store != nil {
		st.FirstLog, _ = s.store.FirstIndex()
	}
	st.Term, st.LastLogIndex, st.CommitIndex = s.raft.CurrentTerm(), s.raft.LastIndex(), s.raft.CommitIndex()
	_, leader := s.raft.LeaderWithID()
	st.Leader = string(leader)
	switch last := s.raft.LastContact(); {
	case s.raft.State() == raft.Leader:
		st.LastContactMS = 0
	case last.IsZero():
		st.LastContactMS = -1
	default:
		st.LastContactMS = time.Since(last).Milliseconds()
	}
	s.fsm.read(func(f *fs.State) {
		st.Sessions = f.SessionCount()
		st.Nodes = f.NodeCount()
		st.Applied = f.AppliedIndex()
	})
	return st
}

// serveHTTP serves the HTTP endpoint on the listener Start bound.
func (s *Server) serveHTTP() {
	ln := s.httpLn
	if s.tls != nil { // HTTPS with client certificates: see httpAuth
		ln = tls.NewListener(ln, s.tls.serverConfig(false))
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/{$}", s.serveStatusPage)
	mux.HandleFunc("/ls/", s.serveNodePage)
	mux.Handle("/metrics", promhttp.HandlerFor(s.metrics.reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("/status", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(s.Status())
	})
	if s.cfg.Pprof {
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) {
		if s.raft.State() == raft.Shutdown {
			http.Error(w, "shutting down", http.StatusServiceUnavailable)
			return
		}
		if s.raft.Leader() == "" {
			http.Error(w, "no master", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ok")
	})
	s.httpSrv = &http.Server{Handler: s.httpAuth(mux), ReadHeaderTimeout: 5 * time.Second}
	go s.httpSrv.Serve(ln)
}
