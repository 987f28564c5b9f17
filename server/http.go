package server

import (
	"encoding/json"
	"fmt"
	"net"
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
}

// Status returns the server's current status.
func (s *Server) Status() Status {
	st := Status{Node: s.cfg.NodeID, Cell: s.cfg.Cell, RPCAddr: s.RPCAddr(), RaftState: s.raft.State().String(),
		Epoch: s.epoch.Load()}
	st.Master = st.Epoch != 0
	if s.store != nil {
		st.FirstLog, _ = s.store.FirstIndex()
	}
	s.fsm.read(func(f *fs.State) {
		st.Sessions = len(f.Sessions())
		st.Nodes = f.NodeCount()
		st.Applied = f.AppliedIndex()
	})
	return st
}

func (s *Server) startHTTP() error {
	ln, err := net.Listen("tcp", s.cfg.HTTPAddr)
	if err != nil {
		return fmt.Errorf("http-addr %s: %w", s.cfg.HTTPAddr, err)
	}
	s.httpLn = ln
	mux := http.NewServeMux()
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
	s.httpSrv = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go s.httpSrv.Serve(ln)
	return nil
}
