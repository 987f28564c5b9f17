// Package nemesis is the in-process target of the nemesis core
// (testing/nemesis/core): it injects faults into an in-process replicated
// cell (testing/cell.Cluster) on a schedule drawn from a seed, while the
// core's workloads run against it, and checks their histories with the
// core's checkers (issue 5, proof under fault).
//
//	seed ──core.NewSchedule(Bounds{Kinds: core.InProcessKinds})──▶ episodes  (printed with the seed)
//	                          │ core.Run(t, Target, …): Settle · Inject at At · Undo at At+Hold · Heal
//	                          ▼
//	  Target (this package; core.Target):
//	    cell.Cluster (cell.WithSkewClocks): Kill/Restart · Cut(links, one way or both) ·
//	      Pause (SIGSTOP) · StallLeaseClock · SkewClock.SetRate · SetDiskDelay
//	    client lease clocks (cell.SkewClock): Jump · SetRate
//	    LockWorker.Pause/Resume (links silent, lease clock frozen, stopped mid-increment)
//	                          ▲                       every client goes through cell proxies
//	  core.Registers ─────────┤ read · write · read+CAS (cache on) ──▶ linear.Recorder ──▶ porcupine (core.CASRegisterModel)
//	  LockWorker (goroutine) ─┘ core.LockCycle: lock → fenced read → (check seq) → fenced write+1 → release
//	                              ├─▶ fencedstore.Store (in memory, fence.Guard) ──▶ core.CheckFencing
//	                              └─▶ core.Events ──▶ core.LockHistory ──▶ porcupine (linear.LockModel)
//
// testing/procnemesis is the other target of the same core: chubbyd
// processes behind TCP proxies.
//
// Faults. Server faults come in episodes: a healthy gap, then one to three
// faults, each starting while an earlier one of the episode is still
// active, so they overlap (a drift on one server while a partition and a
// slow disk are active). Client faults run on a track of their own, across
// the episodes. At most one fault of each kind is active at a time, and at
// most one of KillServer and PauseServer (a majority keeps running); a
// target that conflicts with an active fault when the step runs (the master
// to pause is the server already stalled) moves to the next server, or the
// step is skipped and counted as such. Every fault is undone by the end of
// the schedule; Run then heals the cell, restarts what is down and sets
// every clock back to real speed.
//
//   - kill-server: a server (any, or the master of the moment) is killed —
//     raft links cut first, as SIGKILL — and restarted on its data dir.
//   - isolate-follower: a follower is cut off from the others both ways.
//   - isolate-master: the master is cut off from the others both ways.
//   - split-random: the servers are split into 2 or 3 random groups, both
//     ways: a majority and a minority, or no majority at all.
//   - master-one-way: the master cannot send to the others, but receives
//     everything (cell.OutLinks).
//   - one-way: a single raft link i→j is cut, one way.
//   - pause-server: cell.Cluster.Pause, what SIGSTOP does: all raft links
//     cut both ways, the server's client links held (frames wait, as in a
//     stopped process's socket buffers), its lease clock frozen; on resume
//     the clock jumps by the pause and every timer that fell due fires.
//   - server-clock-jump: cell.Cluster.StallLeaseClock: the server's lease
//     clock stands still and its client links are held while its raft runs
//     on; at the end the clock jumps forward by the hold and its lease
//     timers fire late at once — a master stalled on fsync or CPU. Sessions
//     must get a fresh lease, not be expired for the master's own stall
//     (DESIGN hazard etcd #15247). A server's clock only jumps this way:
//     lease clocks are monotonic, and a forward jump without the time
//     having passed would be a clock running fast beyond any margin.
//   - server-drift: a server's lease clock runs at 1±r, r ≤ MaxDrift (0.9 %),
//     within what session.DriftMargin (2 % of the TTL + 10 ms) allows for.
//   - slow-disk: every write to a server's raft log is delayed (5 ms up to
//     300 ms, 500 ms in the long run): a slow fsync.
//   - pause-client: a lock client stopped between reading the counter and
//     writing it back, its links silent and its lease clock frozen (on
//     resume the clock jumps by the pause), for a hold drawn from past its
//     TTL + grace + lock-delay up to min(60 s, what the schedule has left).
//   - client-clock-jump: a client's lease clock jumps forward (up to 3 s
//     for a lock client: past its TTL + grace; up to 15 s for a register
//     client: past its TTL, within its grace). Only forward: the client
//     believes more time passed, so its local lease ends early.
//   - client-drift: a client's lease clock runs at 1±r, r ≤ MaxDrift.
//
// Raft always runs on the real clock; jumps and drift act on the lease
// clocks (server.Config.Clock, client.Config.Clock). Before each episode
// Run waits for exactly one master (at most 20 s: a liveness check).
//
// Checks:
//   - Registers: the history of reads, writes and CASes (SetContentsIf on
//     the content generation read together with the value; values unique)
//     is linearizable per file (CASRegisterModel), with the client cache
//     on. Failed reads are dropped; failed writes and CASes are kept with
//     unknown outcome. No register client may lose its session.
//   - Fencing: core.CheckFencing — see its comment for the five exact
//     assertions (admitted generations never decrease, each that of its
//     hold; one holder per generation; the admitted writes are exactly
//     1..k, each after its own hold's read of one less, and the counter
//     ends at k; generations follow grant order; no hold is granted before
//     an earlier hold's successful Release).
//   - Locks: the lock clients' Acquires (granted with a generation, failed,
//     or of unknown outcome), Releases, CheckSequencers of their own
//     sequencer, and the end of each session (Lost: from the last time the
//     client knew it alive — a call or KeepAlive that succeeded — to when
//     a server told it the session had expired, or open-ended if none did)
//     are linearizable under linear.LockModel (core.LockHistory).
//   - Liveness: one master before each episode; after the schedule the
//     healed cell serves a write, and both workloads made progress.
//
// Work assignment (issue 14): TestNemesisAssign plays a schedule while
// three client/assign members share six items through their own proxies,
// each incrementing the counters of the items it owns in a fenced store per
// item with the item's sequencer (paused mid-increment by pause-client, and
// rejoining when that ends their session); it checks every item's history
// with CheckFencing, that the healed group owns every item once, and that a
// member killed after the schedule has its items owned again within TTL +
// lock-delay + 1 s. TestUnfencedAssignPauseLosesIncrement is its negative
// control.
//
// TLS and ACLs (issue 11): TestNemesisTLS plays the same plan, workloads
// and checks on a cell whose servers have TLS (cell.DevTLS) and ACLs on.
// Every client reaches the servers through its own TLS proxies
// (cell.Cluster.ProxiesAs: a TLS end on both hops, so frame faults and
// OnReply work as on plain links; raft stays the harness's in-memory
// transport). The workload clients are the non-admin principal "worker",
// granted read, write and change-ACL on /ls/local/nemesis by admin
// (core.Grant); core.Intruder, principal "intruder", tries to read, write
// and create there every 200 ms during the schedule and must be refused
// with permission denied each time (and at least once).
//
// Running: `go test ./testing/nemesis` plays the short plan (seeds 1, 6,
// 8, 9 s each: together they draw every kind; TestShortPlanDrawsEveryKind
// keeps it so) in about 30 s. Environment:
//
//	CHUBBY_NEMESIS_LONG=1        20 schedules of 60 s, random seeds (logged),
//	                             longer gaps and holds (up to 6 s; pauses of
//	                             lock clients up to 60 s)
//	CHUBBY_NEMESIS_SCHEDULES=N   override the number of schedules
//	CHUBBY_NEMESIS_SECONDS=N     override the length of each schedule
//	CHUBBY_NEMESIS_SEED=N        play seed N only (replay a failure)
//
// Each schedule logs what it injected (and skipped) by kind, and the test
// logs the totals over the plan. A failure names its seed and the command
// to replay it; a non-linearizable history also writes porcupine's
// visualization, with the nemesis's steps as annotations (testing/linear.Check).
package nemesis
