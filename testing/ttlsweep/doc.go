// Command ttlsweep measures the session-TTL trade-off (issue 16) against a
// real chubbyd: a short TTL frees a dead holder's locks sooner, but revokes
// live sessions that merely paused or met a slow network, and costs the
// master more KeepAlives. For every TTL of -ttls it runs -runs times, each
// run against a fresh chubbyd with a data directory of its own, and
// reports each quantity as the median over the runs.
//
//	go run ./testing/ttlsweep                       # the full sweep (~30 min)
//	go run ./testing/ttlsweep -ttls 1s,2s -runs 1 -duration 15s -sessions 100 -procs 4
//	go run ./testing/ttlsweep -ttls 12s -runs 1 -duration 10m -sessions 1000 -skip-kill
//	go run ./testing/ttlsweep -chubbyd /path/to/old/chubbyd -out /tmp/before
//
// The last but one is the stability check: TTL 12 s, pauses and jitter,
// 1,000 sessions for 10 minutes; it prints the false revocations it saw.
// Everything runs on 127.0.0.1, every wait is bounded, and child
// processes and temporary directories are removed at the end (also on
// SIGINT; a SIGKILLed sweep takes its children with it).
//
// # One run
//
//	sweep ── go build ./cmd/chubbyd (or -chubbyd) ── chubbyd -data-dir fresh, free loopback ports
//	  │
//	  ├─ (a) kill → grant, -kills times
//	  │      holder child ── Dial(TTL) ─ Open(Create) ─ Acquire(NoLockDelay) ─ prints "held ttl_ms=N"
//	  │      waiter (this process, default TTL) ── Acquire on the same lock, blocks
//	  │      when the master has counted the waiter's Acquire: sleep U[0, TTL), SIGKILL the holder,
//	  │      time until the waiter's Acquire returns = kill → grant
//	  │
//	  └─ (b)+(c) -sessions sessions in -procs worker children, all through one
//	         netproxy.Link with Jitter ─▶ chubbyd
//	         idle: chubbyd's CPU for 3 s with no session (the baseline)
//	         window: from "the master counts every session" to -duration + -settle later
//	           pauser: per worker, Exp(-pause-every) apart, SIGSTOP for a
//	                   lognormal length (-pause-median, -pause-p99, -pause-max), SIGCONT
//	           read at both ends: chubby_sessions_expired_total, chubby_keepalives_total
//	                   (chubbyd's /metrics), utime+stime of chubbyd (/proc/PID/stat)
//	         a worker whose session expires reports it and dials a new one
//
// Children are this program re-executed with CHUBBY_TTLSWEEP_CHILD set to
// their JSON configuration (a holder or a worker); they stop when their
// stdin closes and die with the sweep (proc.StartProcess).
//
// # What is measured
//
// (a) kill → grant, lock-delay 0. The master extends a lease to now + TTL
// when a KeepAlive arrives (never when it answers one), and a client sends
// a KeepAlive at least every renewal interval (session.RenewInterval, at
// most a third of the TTL). A SIGKILLed holder's session therefore ends
// TTL after its last KeepAlive arrived, which was at most an interval
// before the kill: kill → grant is in [2/3 TTL, TTL] plus the expiry's own
// path (lease timer, leadership check, raft commit, grant: a few
// milliseconds). late_s (kill → grant − granted TTL) is expected in
// [−TTL/3, 0] plus those milliseconds. The phase of the kill is uniform in
// [0, TTL) after the waiter is queued, so over the KeepAlive cycle it is
// uniform too. late_s uses the granted TTL (ttl_granted_s), which differs
// from the asked one when the cell clamps it to its bounds (session.MinTTL,
// session.MaxTTL). Run against an older chubbyd (-chubbyd), which also
// extended the lease when it answered a parked KeepAlive, late_s is up to
// a hold (0.4 TTL) positive.
//
// (b) false revocations per session-hour. Nobody is killed in (b), so
// every session the master expires is a false revocation: the rise of
// chubby_sessions_expired_total over the window divided by -sessions ×
// the window in hours. The workers' own count (an expired event or an end
// of the KeepAlive loop in the expired state) is the cross-check
// (client_expiries in the runs file), and jeopardies are counted too. A
// session that expired is replaced at once, so the population stays
// -sessions. The window starts once the master counts all -sessions
// sessions (replacements of sessions that expired while the others were
// created included). The smallest non-zero rate a run can show is one
// expiry in its session-hours; a rate of 0 means below that, which the
// plot draws at half of it.
//
// Jeopardy comes before expiry. A client's local lease runs from the send
// time of the KeepAlive whose answer renewed it, less a drift margin. The
// client sends the next KeepAlive a renewal interval (≤ TTL/3) after the
// last even while that one is parked, and the master answers the parked
// one when the next arrives; so the answer that renews the lease past a
// send comes at most two intervals and one round trip after it: the two
// chunks of that round trip share a margin of about TTL/3 − drift. (Before
// issue 16 the client waited for each answer, which the master held
// TTL/3 ± 20 %: two holds and two round trips, four chunks sharing about
// TTL/5.) The master expires a session only when no KeepAlive of it arrives
// for a whole TTL: one chunk (or a pause) of about 2/3 TTL. Jeopardies per
// session-hour are in the points file and panel (b): a session in
// jeopardy has its locks reported possibly lost.
//
// (c) master cost: chubbyd's CPU time (user + system, /proc/PID/stat in
// USER_HZ = 100 ticks per second) over the window, in CPU-seconds per
// second, and the rise of chubby_keepalives_total per second, both scaled
// to 1,000 sessions. The window includes the settle time. The master's
// idle CPU (no sessions, measured for 3 s before the workers start) is in
// the runs file as master_cpu_idle_s_per_s: with few sessions it is a
// noticeable part of the per-1,000 figure, which scales it up too.
//
// # The fault models
//
// Pauses stand for stop-the-world events of a client process: GC, a
// descheduled container, swap. Each worker process is stopped as a whole
// (all its sessions at once, as a pause would), at exponential intervals
// of mean -pause-every (5 s), for a lognormal length with median
// -pause-median (30 ms) and 99th percentile -pause-p99 (1 s), capped at
// -pause-max (3 s). What was applied (SIGSTOP sent to SIGCONT sent) is
// reported as p50/p99.
//
// Network jitter: every chunk the proxy reads, in either direction, waits
// a lognormal time with median -jitter-median (2 ms) and 99th percentile
// -jitter-p99 (200 ms), capped at -jitter-max (1 s), and never overtakes
// the chunk ahead of it (netproxy.Link.Jitter). One chunk in ten waits
// 25 ms or more, one in a hundred 200 ms, one in a thousand about 900 ms:
// a network that is mostly fast with a heavy tail, such as a lost segment
// recovered by a retransmission timeout (200 ms minimum on Linux, 1 s
// initially), which also holds back what follows it. The samples drawn in
// the window are reported as p50/p99. Only the workers go through the
// proxy; the kill measurement talks to chubbyd directly, so its numbers
// are the lease mechanics without network noise.
//
// # Output
//
// In -out (default docs/): ttl-sweep.csv, one row per TTL with the medians
// (ttl_s, ttl_granted_s, kill_to_grant_s_median, late_s_median,
// false_revocations_per_session_hour, master_cpu_per_1000_sessions,
// keepalives_per_s_per_1000_sessions, sessions, duration_s — the median
// window —, runs); ttl-sweep-runs.csv, every run's raw values (the kills,
// server and client expiries, jeopardies, CPU seconds, KeepAlives, the
// sessions gauge at both ends, the applied pause and jitter percentiles);
// and ttl-sweep.png, three panels against the TTL on a log axis. A value
// not measured is an empty field. The CSV files are rewritten after every
// run, so an interrupted sweep keeps what it measured. A summary table
// goes to stdout.
//
// # Caveats
//
// Everything shares one machine: the workers, the proxy (in this process)
// and chubbyd compete for the same cores, so at short TTLs and many
// sessions the load itself can delay KeepAlives and count as false
// revocations, and chubbyd's stall detector (a timer 500 ms late gives
// sessions a fresh lease instead of expiring them) may forgive some. The
// runs file's jeopardies and the CPU figure show when that happens.
package main
