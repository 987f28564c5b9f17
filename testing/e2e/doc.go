// Package e2e holds end-to-end tests of the real chubbyd and chubbysh
// binaries: real processes, real TCP on 127.0.0.1, real fsync, driven the
// way CONTRACT.md promises to users and scripts (flags, exit codes, one-line
// errors, -json objects). The harness is testing/proc.
//
//	test                              checks (CONTRACT.md, DESIGN.md, Chubby paper)
//	TestNamespace                     ls/stat/cat/write/cas/mkdir/create/rm, bad paths (exit 1),
//	                                  usage (exit 2), unreachable cell (exit 3), session
//	TestJSONOneObjectPerCommand       -json: exactly one object on one line per command, also failures
//	TestLocks                         trylock, held elsewhere, script lock/seq/unlock, checkseq, shared
//	TestLockDelayAfterHolderKilled    §2.4 lock-delay: SIGKILLed holder → grant after TTL + delay
//	TestFencing                       §2.4 sequencers: write -seq admitted only while the lock is held
//	TestLockRunsCommand               lock -- CMD: $CHUBBY_SEQUENCER, CMD's exit code, release
//	TestLockLostKillsCommand          master paused → CMD stopped before the lock can move; exit 3
//	TestEphemeral                     ephemeral files end with their session (clean end, SIGKILL+TTL)
//	TestRestartKeepsState             durability across SIGTERM and SIGKILL restarts (invariant 7)
//	TestRestartLockSurvives           §2.8 a session rides out a quick master restart, lock kept
//	TestGarbageOnRPCPort              invariant 9: garbage on the RPC port harms nobody
//	TestBadCallsGetClearErrors        invariant 9: malformed frames and calls get clear errors
//	TestChubbydFlags                  chubbyd -h, refused flags, -cell, a taken port
//	TestCellMasterKill                §2.8 three servers: SIGKILL the master; new master in seconds,
//	                                  sessions and locks kept, blocked waiter granted, acked writes kept
//	TestCellMasterPause               §2.9, invariant 6: SIGSTOP the master for 2x TTL; sessions kept,
//	                                  the old master answers nothing stale, one master
//	TestCellRestartAll                SIGTERM all three, start all three: nodes, locks, sessions kept
//	TestCellAddRemove                 a fourth server joins as a voter, remove-server; writes go on
//	TestKillToGrant                   issue 16: 20 SIGKILLed holders; grant ≤ TTL + lock-delay + 100 ms
//	                                  after the kill, never before the holder's lease ended
//	TestCellFailoverTimes             CHUBBY_FAILOVER_RUNS=N: SIGKILL → first write, N runs and median
//	TestBackupRestore                 issue 15: snapshot save, wipe, chubbyd restore, start: permanent
//	                                  nodes back, old sequencer invalid, damaged backups refused
//	TestBackupRestoreCell             the same for three servers: restore one, two join with -join;
//	                                  every node on every replica
//
// The tests wait on leases and lock-delays, not on CPU, so TestMain lets
// them all run in parallel (unless -test.parallel is given); each has its
// own chubbyd. CHUBBY_E2E_RACE=1 builds the binaries with the race
// detector, and a data race reported by a server fails its test.
package e2e
