// Package server is chubbyd's core: a raft replica of the namespace state
// machine (package fs) and, while it is the raft leader, the master that
// serves clients. It owns the raft wiring and storage, the RPC listener and
// its dispatch table, and the master's in-memory state, none of which is
// replicated: session leases, KeepAlive long polls, which sessions cache
// and watch which nodes, blocked Acquires and lock-delay timers. The
// replicated state (nodes, locks, sessions, remembered calls) lives in
// fs.State; the master changes it only by proposing commands.
//
// # A call's path
//
//	client ──msgpack frames over TCP──▶ conn.serve (reader goroutine; internal/edgeread:
//	                                        │ one read per arrival, no failed read before a wait)
//	                                        │ known(method)?
//	                                        ▼
//	               dispatch: calls[method] (callSpec: inline? master? session? read? numbered?)
//	                                        │ precheck: serving master? the call's epoch?
//	                                        │           session has a lease? read: VerifyLeader
//	                                        ▼
//	               handle[A]: decode args ─▶ read if args say so ─▶ path of the cell? ─▶ handler
//	                                        │
//	       reads ◀── fsm.read (RLock) ──────┤
//	                                        │ writes: apply (session, call number, acked)
//	                                        ▼
//	               proposeWrite: tracker.beforeWrite(paths)   invalidate cachers, wait for acks
//	                                        ▼
//	               proposer.propose(Command{Now: clock})      group commit
//	                                        ▼
//	               raft.Apply ─▶ fsync ─▶ quorum ─▶ fsm.Apply ─▶ fs.State.Apply ─▶ []*Result
//	                                        ▼
//	               onApply: drop ended sessions' leases, publish events,
//	                        wake blocked Acquires, arm lock-delay timers
//	                                        ▼
//	               conn.reply (any goroutine; serialised per connection)
//
// # Files
//
//	server.go        the Server type, New, Start, Close and accessors
//	config.go        Config, DefaultConfig, Validate, Peer
//	raft.go          raft wiring: log and stable store, snapshots, transport, routes, bootstrap
//	raftstore.go     the raft log stores (-raft-log bolt|wal), the bolt → wal migration at start
//	master.go        the leadership loop: establish and revoke master, epochs, session expiry
//	leases.go        the lease table: Promote/Demote, the due heap and its timer, expired ids out-queue, stall credit
//	keepalive.go     the KeepAlive long poll and what its replies carry: invalidations, events,
//	                 the failover barrier (unflushed sessions)
//	invalidation.go  the tracker: cachers, uncachable nodes, beforeWrite (the invalidation protocol)
//	watches.go       event subscriptions and publishing applied changes as events
//	locks.go         blocked Acquires (lockWaits), lock-delay timers (lockDelays), apply effects
//	dispatch.go      the RPC dispatch table, precheck, the generic decode helper, apply
//	handlers.go      the RPC handlers, one per method
//	propose.go       the proposer (group commit) and proposeWrite (invalidate, then propose)
//	verify.go        the read verifier: leadership confirmed by a quorum before a read
//	stall.go         the stall monitor: notices this process stopped running for a while
//	members.go       gossip membership, bootstrap by expect count, the address book, reconcile
//	conn.go          the accept loop and one client connection: frames in, replies out
//	fsm.go           the raft.FSM adapter over fs.State
//	http.go          /status, /metrics, /healthz, the routes of the status page
//	statuspage.go    the status page at / and /ls/PATH (statuspage.html, embedded):
//	                 what it shows, gathered cheaply and bounded
//	journal.go       a ring of recent events (failovers, expiries, members) for the page
//	observe.go       raft observations: leader changes, peers, follower heartbeats failing
//	logstore.go      the raft log store wrapped to time writes (fsync latency)
//	metrics.go       the Prometheus series (README "Metrics" lists them)
//
// Components hold what they need, never the Server: the lease table a
// clock, a logger, a stallDetector and its metrics; the tracker a
// cacheSessions (the lease table in a server, a fake in its unit tests);
// the proposer a raftApplier; membership a Config, raftMembers and funcs.
// The Server builds and wires them in New and Start.
//
// # Identity and ACLs
//
// Each connection speaks for its principal (the TLS client certificate's
// common name; anonymous without TLS), and -acl-admins names the admins
// (without TLS everybody is one). apply stamps every command with the
// caller and its admin bit, and fs.State.Apply refuses a write the node's
// ACLs do not grant, atomically with the write. Reads (GetContents,
// GetStat, ReadDir, GetACL, an Open that does not create, events,
// CheckSequencer) are checked with fs.State.Access inside the fsm.read
// that answers them. Admins are never checked. A secure cell's first
// master proposes fs.InitACLs before it serves (initACLs), so a fresh
// cell denies everyone but the admins. A client's cache is not revoked by
// an ACL edit: what it cached before stays readable to it until the node
// is written or its lease ends (README, Known limits).
//
// # Leases and expiry
//
// Leases live only in the master's memory. A KeepAlive extends the session
// to its arrival + TTL, parks as a long poll (a struct and a runtime timer,
// no goroutine) and is answered after about TTL/3, or at once when the
// session's next KeepAlive arrives, or an invalidation is to be sent;
// answering does not extend the lease, so a session ends exactly TTL after
// its last KeepAlive arrived. A stream KeepAlive (wire.KeepAliveArgs.Stream,
// what a Client sends) is sent the session's events as partial answers
// while it stays parked, through the session's out-queue so that no
// answer overtakes another. No
// KeepAlive touches raft or disk. Leases come up in order of their ends
// from one heap with one timer (a KeepAlive only moves the end; the entry
// finds it moved and goes back in). A lease that ran out is handed out
// (Expired, TakeExpired) unless the stall monitor saw this process stall
// since the last renewal: then the lease gets back the time the stall took
// from it. How late the expiry timer itself runs is not looked at — a
// master with many leases to expire runs late without having stalled. The
// master loop takes the ids, confirms with VerifyLeader (once a batch)
// that it still leads, looks for a stall once more, and proposes
// OpEndSession{Expired: true} for each, up to a group-commit batch at once. Until that commits (or is
// abandoned), the session's calls answer unavailable, never expired.
//
// # Invalidation protocol
//
// A master serves reads from its memory and lets clients cache them, so
// before a write commits, every other session that may cache a node the
// write changes must have dropped it (DESIGN invariant 5):
//
//  1. under the tracker's lock: mark the paths uncachable, take their
//     cachers, register this write's round of invalidations
//  2. queue an invalidation for each cacher; this answers its parked
//     KeepAlive at once
//  3. wait, for each, until it acknowledges (the sequence number on its
//     next KeepAlive) or its lease as of step 2 runs out (its cache cannot
//     serve after that); also for the rounds of earlier writes of the same
//     paths still in flight, and for every session carried over from an
//     earlier master that has not talked to this one yet (unflushed: it
//     may cache anything)
//  4. propose the write; once applied, the paths are cachable again
//
// A read admitted while its path is uncachable is answered but marked not
// cacheable, and its session is not recorded as a cacher.
//
// # Group commit
//
// The proposer packs concurrent commands into one raft log entry (a
// msgpack stream of commands), so many calls share one log write, one
// fsync and one FSM dispatch. At most maxInflight entries are in raft at
// once; commands that arrive meanwhile queue and go out together in the
// next entry (up to maxBatchCmds commands or maxBatchBytes). A lone
// command goes out at once, so an idle cell pays no batching delay. The
// FSM answers an entry with one result per command, in order.
//
// # Bootstrap
//
// A server with raft state on disk never bootstraps. A new server forms a
// cell at once when it is alone (bootstrap-expect 1, nothing to join) or
// has static peers; otherwise it waits until bootstrap-expect servers of
// its cell have met by gossip, and all of them bootstrap the same
// configuration (exactly those servers, as voters). A server that sees a
// member already in a configuration waits for the master to add it; the
// master adds gossip members missing from the configuration (voters up to
// five, then non-voters), never servers an operator removed.
//
// Becoming master (establishMaster): a raft barrier, then OpNewEpoch
// through the log, then every session of the replicated state gets a
// lease of its TTL from now — the most any earlier master could have
// granted — and pending lock-delays are re-armed. Calls stamped with
// another epoch are refused with wrong_epoch and the client re-handshakes.
//
// # Exactly-once retries
//
// A client numbers each call that changes state; the number (and the
// lowest number it has not yet had a reply to, Acked) travels in the
// command. The state machine remembers each session's recent results by
// call number in the replicated state, so a retry after a lost reply or a
// failover gets the first outcome instead of acting twice, on whichever
// master it reaches; numbers below Acked are forgotten. Entries marked
// numbered in the dispatch table carry the number. A blocking Acquire is
// made idempotent by its wait id instead (its retry must find the wait as
// it is now), and session creation by the client's nonce.
//
// Storage: raft-boltdb (bbolt) log and stable store in the data directory
// with fsync on, file snapshots beside it.
package server
