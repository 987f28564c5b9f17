// Package procnemesis is the process target of the nemesis core
// (testing/nemesis/core; issue 5, "proof under fault"): real chubbyd
// binaries on 127.0.0.1, a TCP proxy on every link, faults drawn from a
// seed and overlapping (core.NewSchedule with core.ProcessKinds, dealt),
// played by core.Run on this package's Target, and the core's checks of
// what the clients saw. testing/nemesis is the other target of the same
// core: an in-process cell.
//
//	seed ──core.NewSchedule(Bounds{Kinds: core.ProcessKinds, Deal: true})──▶ Schedule
//	   │ core.Run(t, Target, …): Inject at At · Undo at At+Hold · Heal
//	   ▼
//	Target (this package; core.Target): proc.Server Kill/Launch · Pause/Resume,
//	   Net.Contribute/Withdraw (cut, delay) · WorkerProc.Pause/Resume (SIGSTOP)
//
//	chubbyd n1 ◀────▶ chubbyd n2 ◀────▶ chubbyd n3 ◀────▶ (n1)
//	     raft: one netproxy.Link per ordered pair, Net.Raft[i][j];
//	     server i dials j through it (chubbyd -raft-route nJ=<link>)
//	         ▲
//	         │ RPC: one link per client and server, Net.Clients[name][j]
//	   ┌─────┴───────────────────┬─────────────────────────┐
//	lock0..lock2                reg0..reg2                 dur
//	the test binary re-executed core.Registers in the      the durability log
//	(WorkerEnv), a process each: test process: reads       in the test process:
//	core.LockCycle: Acquire →   (from the cache), writes, new files, one after
//	fenced GET → think → fenced read-then-CAS              the other
//	PUT+1 → Release; core.Events as JSON lines on stdout
//	   │ fenced GET/PUT over HTTP (fencedstore.Client; not proxied)
//	   ▼
//	fencedstore.Store, served by the test process: the counter behind
//	client/fence.Guard, its admitted operations logged
//
// # The cell
//
// Three chubbyd processes started by testing/proc (StartCell: -bootstrap-
// expect 3, n2 and n3 -join n1's gossip address). Server i reaches server
// j's raft transport only through the link Net.Raft[i][j]: chubbyd's
// -raft-route flag (proc.CellOptions.ServerArgs builds it at every start,
// restarts included). A link carries the connections its dialer opens: i's
// AppendEntries and RequestVote to j and j's answers, so cutting Raft[i][j]
// alone is a one-way fault. The harness checks at the start that the
// master's raft traffic flows through its links, and at the end that no
// server dialled a peer around them (raft logs it when a route is
// missing).
//
// Gossip (memberlist) is not proxied. It lets the servers find each other
// at the first start, shows member state, and would add a server missing
// from the raft configuration (all three are in it from the bootstrap); it
// never elects, commits, removes a server or expires a session
// (server/members.go), so it cannot carry what a cut raft link stops.
// Clients reach the servers' RPC ports only through their own links
// (client.Config.FixedServers), one per client and server.
//
// # Faults (core.Kind), and how Target injects and undoes each
//
//   - kill-server: SIGKILL of a server's process group (by its pid; the
//     master when Pick — Step.Target — says so); undone by starting it again on the same
//     data directory and ports (proc.Server.Launch: it waits until the
//     process listens, not for a master, which may not exist then).
//   - pause-server: SIGSTOP of a server (returns once every thread is
//     stopped); undone by SIGCONT.
//   - pause-client: SIGSTOP of a lock worker process — when Pick2 is even,
//     right after it read the counter from the store, so it sleeps holding
//     a value — for at least its TTL + grace + lock-delay + 1 s (up to 60 s
//     in the long run), so its session expires and the lock moves on;
//     undone by SIGCONT. The worker then writes its stale value, which the
//     cell (for its sequencer-fenced write) and the store's guard must
//     refuse.
//   - isolate-follower (a minority partition) and isolate-master (the
//     master of the moment cut off from the majority): every raft link
//     from and to the server cut.
//   - bridge (a majority split): the raft links between two servers cut
//     both ways; each still reaches the third, so each sees a majority but
//     not the same one.
//   - one-way: one raft link i→j cut, j→i up (master→follower when Pick
//     says so).
//   - delay-raft: every raft link of one server, or all of them, delayed.
//   - cut-client: one client's links cut — to every server, or (Pick2 odd)
//     to the master only.
//   - delay-client: every link of one client delayed.
//
// A cut is one of three netproxy modes, drawn per step: refuse (every
// connection reset, new ones reset at once), blackhole (closed; new ones
// accepted and swallowed) or stall (connections kept, nothing forwarded
// until the cut ends, then delivered). Network faults are contributions to
// sets of links (Net.Contribute): overlapping ones compose — a link takes
// the most severe active cut and the longest active delay — and undoing one
// (Net.Withdraw) leaves the others in force. Two process faults never hold
// the same process: a step whose target is taken moves to the next free
// one, or is skipped (logged and counted). Steps are undone at the end of
// their hold; core.Run (Target.Heal) leaves every link healed and every process
// running and continued whatever happens, and every process is killed by
// its pid and reaped in t.Cleanup (proc.Child, proc.Server), also when the
// test fails; the workers die with the test binary (Pdeathsig).
//
// # Workloads
//
//   - Lock workers (nLockWorkers processes): each runs core.LockCycle:
//     Acquire → fenced GET of the counter from the fenced store → think (up to 30 ms; one time in four
//     a CheckSequencer) → a write to the cell file /ls/local/fenced carrying
//     the sequencer (client.WithSequencer) → fenced PUT of the value + 1 to
//     Store → Release (a cell write that failed because the session had
//     ended is tried again through the next session with the old
//     sequencer: a zombie holder, which the cell must refuse unless the
//     sequencer is still valid), and writes
//     every step with its call and return times (CLOCK_MONOTONIC, one clock
//     for every process: MonoNow) to stdout. A worker whose session ended
//     dials a new one. The store (testing/fencedstore) embeds
//     client/fence.Guard; it answers 409 to a sequencer older than the
//     newest it has seen and logs what it admits.
//   - Register clients (in the test process): reads (answered from the
//     client cache when it can), writes of unique values, and read-then-CAS
//     on the content generation, on three files, each client through its
//     own links; they also read /ls/local/fenced, which only the lock
//     workers write. A client whose session ended dials a new one.
//   - The durability log: writes new files one after the other and keeps
//     the acknowledged ones.
//
// # Checks
//
//   - Registers: the history, with final reads after the heal, is
//     linearizable (linear.Check with core.CASRegisterModel);
//     failed reads are dropped, failed writes and CASes kept as unknown.
//     The lock workers' fenced cell writes are in it too (on their own
//     register; refused ones left out): a write the cell refused for its
//     sequencer must never be read.
//   - The lock: the workers' history is linearizable under linear.LockModel
//     (core.LockHistory says how events become operations).
//   - Fencing: core.CheckFencing — no stale sequencer admitted by the store,
//     generations monotonic and one holder per generation, no lost or
//     repeated increment, no two confirmed holders; core.CheckCellFencing — no
//     fenced cell write committed after a greater generation was granted.
//   - Durability: every acknowledged write of the durability log is there
//     at the end with its value (and the registers' final reads).
//   - Liveness after the heal (generous bounds, liveTimeout): the servers
//     agree on one master, the cell serves a write, and every client makes
//     progress again.
//
// A failure names the seed and the command that replays it; linear.Check
// writes porcupine's visualization (with the faults as annotations) and
// logs the window around the first operation it could not linearize.
//
// # TLS and ACLs
//
// TestProcNemesisTLS (issue 11) plays the same plan, workloads and checks
// on a secure cell: a PKI made with `chubbyd tls ca create`, `tls cert
// create` (servers n1..n3; clients admin, worker, intruder) and `chubbyd
// keygen`; every server with -tls-ca/-tls-cert/-tls-key and
// -gossip-key-file, so client RPC, raft (through the same proxies, which
// carry TLS bytes) and HTTP are mutual TLS. The register sessions, the
// durability log and the lock-worker processes are principal "worker",
// granted /ls/local/nemesis by admin (core.Grant); core.Intruder must be
// refused with permission denied there throughout the schedule.
//
// # Running
//
// `go test ./testing/procnemesis` plays the short plan: seeds 17 and 19,
// 10 s each (each draws every kind of fault, and a client pause aimed at a
// read), under a minute with process starts. Environment (the same variables as testing/nemesis):
//
//	CHUBBY_NEMESIS_LONG=1        20 schedules of 60 s, random seeds (logged),
//	                             longer holds and client pauses up to 60 s
//	CHUBBY_NEMESIS_SCHEDULES=N   override the number of schedules
//	CHUBBY_NEMESIS_SECONDS=N     override the length of each schedule
//	CHUBBY_NEMESIS_SEED=N        play seed N only (replay a failure)
//	CHUBBY_E2E_RACE=1            build chubbyd with the race detector
//
// Each schedule logs the faults injected (and skipped) by kind, and the
// plan their sum.
package procnemesis
