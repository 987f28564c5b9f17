package main

// The workload table and the help that explains it.

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strings"
)

// workload is one kind of load chubbybench can put on a cell.
type workload struct {
	name    string
	summary string // one line, for chubbybench -h
	// help explains what the workload does and what its figures mean, for
	// chubbybench WORKLOAD -h.
	help        string
	defClients  int
	minClients  int
	clientsHelp string
	defRate     float64
	rateHelp    string
	flags       func(fl *flag.FlagSet, o *options) // the workload's own flags
	run         func(ctx context.Context, e *env) (*Result, error)
}

const defaultRateHelp = "cap on operations started per second, all clients together (0: closed loop, each client starts its next operation when the last returns)"

// workloads is the table, in the order -h lists them.
var workloads = []*workload{
	{
		name:    "lock",
		summary: "each client Acquires and Releases a lock of its own, in a loop (uncontended)",
		help: `Each client (its own session) opens a lock file of its own and runs
Acquire(exclusive) + Release cycles on it, one after the other. Nobody
contends: this is the cost of taking and freeing a lock (two durable raft
commits per cycle, batched across clients).

  ops          Acquire+Release cycles completed in the measured window
  ops_per_s    cycles per second, all clients together
  p50_ms ...   latency of one cycle, Acquire's call to Release's return`,
		defClients: 1, minClients: 1, clientsHelp: "clients, each with a lock of its own",
		defRate: 0, rateHelp: defaultRateHelp,
		run: runLock,
	},
	{
		name:    "contended",
		summary: "every client takes one lock in turn: hand-off latency and hand-offs/s",
		help: `Every client (its own session) opens the same lock file and loops:
Acquire(exclusive), hold it for -hold, Release. Waiters queue at the master,
which grants the lock to the next waiter as the holder's Release commits.
The tool checks mutual exclusion as it goes: each holder counts itself in
and out of the critical section.

  ops              hand-offs: acquisitions that followed a Release (the
                   run's first acquisition is not one)
  ops_per_s        hand-offs per second (also handoffs_per_s)
  p50_ms ...       hand-off latency: from the start of one holder's Release
                   to the next holder's Acquire returning
  handoffs_to_other_client
                   hand-offs to a different client than the last holder
  max_holders      most clients ever inside the critical section at once
                   (1 unless mutual exclusion broke)
  overlaps         acquisitions that found another holder inside (0 unless
                   mutual exclusion broke)`,
		defClients: 4, minClients: 2, clientsHelp: "clients taking the one lock in turn (at least 2)",
		defRate: 0, rateHelp: defaultRateHelp,
		flags: func(fl *flag.FlagSet, o *options) {
			fl.DurationVar(&o.hold, "hold", 0, "how long each holder keeps the lock")
		},
		run: runContended,
	},
	{
		name:    "read",
		summary: "every client reads one small file, from its cache (-cached, the default) or the master",
		help: `One small file (-size bytes) is written, then every client (its own
session) opens it and calls GetContentsAndStat in a loop. With -cached
(the default) the reads are answered from the client cache while the
session's lease is valid, so this measures the client; with -cached=false
the file is opened with client.NoCache and every read is a call to the
master.

  ops          reads completed in the measured window
  p50_ms ...   latency of one GetContentsAndStat
  cache_hits, cache_misses
               the client caches' counters over the measured window`,
		defClients: 1, minClients: 1, clientsHelp: "clients reading the file",
		defRate: 0, rateHelp: defaultRateHelp,
		flags: func(fl *flag.FlagSet, o *options) {
			fl.BoolVar(&o.cached, "cached", true, "read through the client cache (false: open with client.NoCache, every read goes to the master)")
			fl.IntVar(&o.size, "size", 100, "size of the file in bytes")
		},
		run: runRead,
	},
	{
		name:    "write",
		summary: "each client SetContents a file of its own, one write at a time (durable writes)",
		help: `Each client (its own session) writes -size bytes to a file of its own
with SetContents, one write after the other. A write returns once its raft
entry is committed and fsynced, so this measures durable write latency and
how the master batches concurrent writes.

  ops          writes completed in the measured window
  p50_ms ...   latency of one SetContents`,
		defClients: 1, minClients: 1, clientsHelp: "clients, each writing a file of its own",
		defRate: 0, rateHelp: defaultRateHelp,
		flags: func(fl *flag.FlagSet, o *options) {
			fl.IntVar(&o.size, "size", 100, "bytes per write")
		},
		run: runWrite,
	},
	{
		name:    "fanout",
		summary: "one writer, -clients caching readers watching the file: how long until every reader has each write",
		help: `Config fan-out. One writer session (besides the -clients readers) writes
a small file (-size bytes) -rate times a second. Every reader (its own
session) opens the file with WithEvents(contents_modified) through its
cache; on each event it calls GetContentsAndStat and notes when that read
returned the write's content generation. The writer waits until every
reader has the generation (or 10 s, counting the rest as missed) before the
next write, so each write is one round.

  ops              deliveries: a reader read a write's generation (ideally
                   writes × readers)
  p50_ms ...       per-reader delay: from the write's return to that
                   reader's read returning the new generation (0 if the
                   event came before the write's reply)
  writes, writes_per_s
                   rounds completed in the measured window
  last_reader_p50_ms ...
                   the delay of the slowest reader of each write
  write_p50_ms ... latency of the write itself (it commits only once every
                   reader's cached copy is invalidated)
  missed           reader×write pairs not delivered within 10 s (counted in
                   errors too)`,
		defClients: 10, minClients: 1, clientsHelp: "readers (the writer is one more session)",
		defRate: 50, rateHelp: "writes per second (0: the next write as soon as every reader has the last)",
		flags: func(fl *flag.FlagSet, o *options) {
			fl.IntVar(&o.size, "size", 100, "size of the file in bytes")
		},
		run: runFanout,
	},
	{
		name:    "sessions",
		summary: "create -clients sessions, hold them for -duration: creation rate and sessions lost",
		help: `Creates -clients sessions (each a client.Client: on its own connection,
16 being created at a time; with -conns N over N shared connections, 256
at a time; at most -rate a second), then holds them all for -duration
while their KeepAlive loops renew them. -warmup does not apply. With
-server-metrics, server_cpu_cores and server_rss_mb cover the hold.
With -group the sessions are not Clients: each connection (-conns, or one
per 1,000 sessions) is a client.SessionGroup, one loop renewing all of its
sessions with KeepAliveMany and bringing them all to a new master in one
call after a failover — the protocol's multi-session form, what a process
holding many idle sessions uses instead of a goroutine per session.

  ops              sessions created (per_client_ops: 1 for each)
  duration_s       creation time plus the hold (ops_per_s = ops/duration_s)
  p50_ms ...       latency of one session creation (client.Dial)
  create_s         time to create them all
  creates_per_s    ops / create_s: the creation rate
  sessions_lost    sessions that ended (expired) before the end of the hold
                   (counted by -fail-on-error)`,
		defClients: 100, minClients: 1, clientsHelp: "sessions to create and hold",
		defRate: 0, rateHelp: "cap on sessions created per second (0: no cap)",
		flags: func(fl *flag.FlagSet, o *options) {
			fl.BoolVar(&o.group, "group", false, "hold the sessions in a client.SessionGroup per connection (-conns, or one per 1,000 sessions) instead of a client.Client each")
		},
		run: runSessions,
	},
}

func lookupWorkload(name string) *workload {
	for _, w := range workloads {
		if w.name == name {
			return w
		}
	}
	return nil
}

func workloadNames() []string {
	var ns []string
	for _, w := range workloads {
		ns = append(ns, w.name)
	}
	return ns
}

const commonFigures = `Every report has these figures (the table shows each with its meaning; -json
prints one object with the same keys):

  workload, clients, duration_s, warmup_s, rate
               what ran: duration_s is the measured window, after warmup_s
  ops          operations completed in the measured window (what one is
               depends on the workload); per_client_ops lists each client's
               (JSON; the table shows the fewest and most), and ops is their sum
  ops_per_s    ops / duration_s
  errors       failed operations, warmup included (first_error: the first)
  p50_ms, p90_ms, p99_ms, max_ms
               latency percentiles (nearest rank) of the workload's latency
               sample, in milliseconds
`

func printUsage(w io.Writer) {
	fmt.Fprintf(w, `usage: chubbybench WORKLOAD -cell ADDRS [-clients N] [-conns N] [-duration DUR] [-rate R] [-json] [flags]

A load tool for a chubby cell over the Go client. Each client is its own
session (a client.Client), on its own connection unless -conns makes them
share. A run dials the clients,
loads the cell for -warmup (not counted), then for -duration (measured),
and prints one summary table on stdout (one JSON object with -json). A
progress bar shows on stderr when it is a terminal (not with -quiet).

Workloads:
`)
	for _, wl := range workloads {
		fmt.Fprintf(w, "  %-10s %s\n", wl.name, wl.summary)
	}
	fmt.Fprintf(w, `
Common flags (chubbybench WORKLOAD -h lists them all, with the workload's own):
  -cell ADDRS      comma-separated RPC addresses of servers of the cell
                   (default $CHUBBY_CELL, else 127.0.0.1:7100)
  -clients N       clients (sessions)
  -conns N         connections they share (0: one per client); each client is
                   still its own session, and a connection's sessions renew
                   together in one KeepAliveMany call
  -duration DUR    measured window (default 10s); -warmup DUR before it (1s)
  -rate R          cap on operations started per second, all clients together
                   (0: closed loop; fanout: writes per second, default 50)
  -ttl DUR         session TTL to ask for; -timeout DUR to reach the cell (10s)
  -json            one JSON object instead of the table
  -server-metrics URL  a server's /metrics (chubbyd -http-addr): report its
                   CPU over the measured window and its memory
  -no-cache        clients without a cache (client.Config.DisableCache): the
                   master never makes them cachers, and after a failover
                   writes do not wait for them to reach the new master
  -cpuprofile F    write chubbybench's own CPU profile to F
  -quiet           no progress bar
  -fail-on-error   exit 1 if any operation failed

%s
Files are made in a directory of their own, /ls/CELL/chubbybench/WORKLOAD-ID,
deleted at the end.

Exit codes: 0 ok; 1 the run failed (the cell could not be reached, the run
was interrupted, or errors with -fail-on-error); 2 usage error.

Example:
  chubbybench lock -cell 127.0.0.1:7100 -clients 4 -duration 3s
`, commonFigures)
}

func printWorkloadUsage(w io.Writer, wl *workload, fl *flag.FlagSet) {
	fmt.Fprintf(w, "usage: chubbybench %s -cell ADDRS [flags]\n\n%s\n\n%s\nFlags:\n", wl.name, wl.help, strings.TrimSpace(commonFigures)+"\n")
	fl.SetOutput(w)
	fl.PrintDefaults()
}
