// Command chubbybench is a load tool for a chubby cell, over the Go client
// (package client) only:
//
//	chubbybench WORKLOAD -cell ADDRS [-clients N] [-conns N] [-duration DUR] [-rate R] [-json]
//
// Workloads: lock, contended, read, write, fanout, sessions;
// `chubbybench -h` and `chubbybench WORKLOAD -h` explain each and what its
// figures mean. Exit codes: 0 ok; 1 the run failed; 2 usage error.
//
// A run, for every workload but sessions:
//
//	parse (main.go) ─▶ workload.run (wl_*.go)
//	                     dial -clients sessions (env.dialAll), make the run's
//	                     directory and files (env.makeDir, env.file)
//	                     env.loop: one goroutine per client ──▶ Limiter.Wait ──▶ op ──▶ worker.observe / fail
//	                               env.timeline: warmup ─▶ measured window ─▶ done (phase)
//	                     collect the workers' records into a Result (stats.go)
//	                   ─▶ env.close: delete the files, close the sessions
//	                   ─▶ Result.WriteTable or WriteJSON (result.go)
//
// Each worker (stats.go) is one client's record, written only by its own
// goroutine: operations and latencies that completed inside the measured
// window, and errors (warmup included). The Limiter (limiter.go) spaces
// operation starts across all clients; percentiles are nearest-rank.
package main
