// Package core is the one nemesis (issue 5, proof under fault): what both
// fault-injection harnesses share — the schedules of faults drawn from a
// seed, the loop that plays them on a Target, the workloads and their
// histories, and the checkers. The two targets are testing/nemesis (an
// in-process cell, testing/cell) and testing/procnemesis (chubbyd
// processes behind TCP proxies).
//
//	Plan (CHUBBY_NEMESIS_*) ──seeds──▶ NewSchedule(seed, Bounds)
//	    Bounds.Kinds: InProcessKinds (episodes) | ProcessKinds (Deal: dealt)
//	                          │ Schedule: Steps {At, Hold, Kind, Target, Pick2, …}
//	                          ▼
//	Run(t, Target, Schedule, Noter) ── at At: Settle (before an episode),
//	    Inject(step) → Fault{What, Undo}; at At+Hold: Undo; at the end: Heal
//	                          │ Tally (ran / skipped by Kind); notes → annotations
//	                          ▼
//	Target ◀── testing/nemesis.Target     (cell.Cluster, proxies, skew clocks)
//	       ◀── testing/procnemesis.Target (chubbyd processes, netproxy links,
//	                                       lock-worker processes)
//
//	Registers.RunReader / RunWriter (RegClient: Handles | procnemesis.Sess)
//	    read · write · read+CAS ──▶ linear.Recorder ──▶ porcupine (CASRegisterModel)
//	LockCycle (in-process goroutine | worker process)
//	    Acquire → fenced Read (fencedstore) → think → CheckSequencer?
//	    → BeforeWrite → fenced Write+1 → Release ──▶ Events
//	        ├─ HoldsFrom + CounterSnapshot(store) ──▶ CheckFencing
//	        ├─ CellWritesFrom ──▶ CheckCellFencing (process target)
//	        └─ LockHistory ──▶ porcupine (linear.LockModel)
//
// The Target interface is what a harness implements to be played on:
// Servers (the cell's size), Inject (start a step's fault and say how to
// undo it, or why it was skipped: every candidate busy), Settle (wait for
// one master before an episode; the in-process target checks liveness
// there, the process target does not wait) and Heal (undo what is left and
// leave every link up, every server running and continued, every client
// resumed and every clock at real speed).
//
// Kinds are one vocabulary (Kind, named by a table); each target injects
// its list, in the order its schedules draw from: the in-process cell
// draws episodes (a healthy gap, then overlapping server faults, with
// client faults on a track of their own), the process cell deals kinds
// from a shuffled deck (every kind in each run of len(Kinds) steps). The
// same seed and Bounds give the same schedule.
//
// Checks (see each function's comment for the exact assertions):
//   - CASRegisterModel: registers with read, write and compare-and-set on
//     the content generation, values unique, per file; failed reads are
//     dropped, failed writes and CASes kept with unknown outcome.
//   - CheckFencing: the store never admitted a stale sequencer,
//     generations are monotonic and one holder per generation, no lost or
//     repeated increment, generations follow grant order, no two confirmed
//     holders.
//   - CheckCellFencing: no sequencer-fenced cell write committed after a
//     greater generation was granted.
//   - LockHistory under linear.LockModel: the lock's Acquires, Releases,
//     CheckSequencers and session ends are linearizable.
package core
