// Package nemesis injects faults into an in-process replicated cell
// (testing/cell.Cluster) on a schedule drawn from a seed, while workloads run
// against it, and checks the workloads' histories (issue 5, first slice).
//
//	seed ──NewSchedule──▶ Schedule: [gap, fault, hold]…   (printed with the seed)
//	                          │ Run (test goroutine)
//	                          ▼
//	      cell.Cluster: Kill/Restart · Isolate(follower) · Isolate(master) · Heal
//	      LockWorker.Pause/Resume (its proxies go silent, it stops mid-increment)
//	                          ▲
//	  register clients ───────┤ read · write · read+CAS (cache on) ──▶ Recorder ──▶ porcupine (CASRegisterModel)
//	  lock clients (proxied) ─┘ lock → fenced read → fenced write+1 → release ──▶ Store (fence.Guard) ──▶ CheckLocks
//
// Faults, one at a time, each undone before the next gap: KillRestart (any
// server, the master included), IsolateFollower (a minority partition),
// IsolateMaster (the majority partitioned from the master), PauseHolder (a
// lock client stopped between reading the counter and writing it back, its
// links silent, past its session TTL + grace + lock-delay). Run always ends
// with the cell healed and every server running.
//
// Checks:
//   - Registers: the history of reads, writes and CASes (SetContentsIf on the
//     content generation read together with the value; values unique) is
//     linearizable per file (CASRegisterModel). Failed reads are dropped;
//     failed writes and CASes are kept with unknown outcome.
//   - Fencing: CheckLocks — see its comment for the five exact assertions
//     (admitted generations never decrease; one hold per generation; the
//     admitted writes are exactly 1..k, each after its own hold's read of
//     one less, and the counter ends at k; generations follow grant order;
//     no hold is granted before an earlier hold's successful Release).
//   - Liveness: after the schedule the healed cell serves a write, and both
//     workloads made progress.
//
// Running: `go test ./testing/nemesis` plays the short plan (seeds 4, 7, 14,
// 6 s each; chosen so that together they draw every fault). Environment:
//
//	CHUBBY_NEMESIS_LONG=1        20 schedules of 60 s, random seeds (logged)
//	CHUBBY_NEMESIS_SCHEDULES=N   override the number of schedules
//	CHUBBY_NEMESIS_SECONDS=N     override the length of each schedule
//	CHUBBY_NEMESIS_SEED=N        play seed N only (replay a failure)
//
// A failure names its seed and the command to replay it; a
// non-linearizable register history also writes porcupine's visualization
// (testing/linear.Check).
package nemesis
