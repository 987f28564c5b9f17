// Package failover holds the in-process tests of a replicated cell under
// faults (issue 3, acceptance point 2): three real server.Server instances
// in one process (testing/cell.StartCluster: raft over hashicorp/raft's
// in-memory transport, a raft-boltdb log with fsync per server, real TCP for
// clients), with raft links cut and healed between servers, servers killed
// and restarted, and client replies lost on the way by a frame proxy.
//
// Each test names the behaviour it checks, from the Chubby paper (§2.8 fail-
// overs, §2.9 KeepAlives and grace), DESIGN.md's invariants and hazards, and
// issue 3:
//
//	TestIsolatedMasterStopsServing    one master, linearizable reads across a partition (invariants 5, 6)
//	TestUnawareOldMasterServesNoReads reads are quorum-checked, not trusted to raft's leader lease
//	TestMinorityPartition             a follower cut off: service continues, it catches up
//	TestSessionsSurviveFailover       sessions, locks and blocked Acquires survive the master's crash (§2.8)
//	TestJeopardyLooksForNewMaster     a client whose master goes silent finds the new one in its grace period
//	TestExactlyOnceLostReplies        a retried call after a lost reply is applied once (etcd #22082)
//	TestExactlyOnceAcrossFailover     ... also when the retry reaches a new master
//	TestFailoversBoundDeadSession     repeated failovers cannot keep a dead session alive (etcd #9888)
//
// Everything runs on the real clock (a multi-server cell has no shared
// manual clock): TTLs are short where a test waits for one.
package failover
