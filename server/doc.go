// Package server is chubbyd's core: a raft replica of the namespace state
// machine (package fs) and, while it is the raft leader, the master that
// serves clients.
//
//	client ──msgpack frames over TCP──▶ conn.serve ─▶ dispatch (one table: calls)
//	                                         │ precheck: master? epoch? session alive?
//	          reads ◀── fsm.read (RLock) ────┤
//	          writes ── propose(Command{Now: clock}) ─▶ raft.Apply (group commit, fsync)
//	                                                      ▼
//	                                   fsm.Apply ─▶ fs.State.Apply ─▶ Result
//	                                                      ▼ onApply: wake blocked Acquires,
//	                                                        arm lock-delay timers, drop leases
//
// Leases live only in the master's memory (leaseTable): a KeepAlive extends
// the session to now+TTL, parks as a long poll (a struct and a runtime timer,
// no goroutine) and is answered after about TTL/3 with a fresh lease. No
// KeepAlive touches raft or disk. When a lease's timer fires, the master
// confirms it is still the leader (VerifyLeader) and proposes an explicit
// OpEndSession{Expired: true}; a timer that fires far too late means the
// master itself stalled, and the session gets a fresh lease instead.
//
// Becoming master (establishMaster): barrier, then OpNewEpoch through the
// log, then every session of the replicated state gets a lease of its TTL
// from now — the most any earlier master could have granted — and pending
// lock-delays are re-armed. Calls stamped with another epoch are refused with
// wrong_epoch and the client re-handshakes.
//
// Storage: raft-boltdb (bbolt) log and stable store in the data directory
// with fsync on, file snapshots beside it. Concurrent commands are
// group-committed by raft (BatchApplyCh, MaxAppendEntries), so many calls
// share one fsync.
package server
