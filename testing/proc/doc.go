// Package proc is a process-level harness: it builds the real chubbyd and
// chubbysh binaries once per test binary, runs chubbyd servers on free
// loopback ports with their own data directories, and runs chubbysh the way a
// user or a script does — one-shot, with a script on stdin, or in the
// background while the test does something else (a lock holder, a waiter).
//
//	test ──► Build (go build, once) ──► bin/chubbyd, bin/chubbysh
//	  │
//	  ├─ StartServer ─► chubbyd -node-id -data-dir -rpc-addr -raft-addr
//	  │                         -gossip-addr -http-addr   (stderr → log file)
//	  │     ready: /status says master, then `chubbysh -json session` exits 0
//	  │     Stop (SIGTERM+wait) · Kill (SIGKILL) · Pause/Resume (SIGSTOP/CONT)
//	  │     Restart (same data dir, same ports) · Launch (start again, ready
//	  │     once it listens: no master needed, for a partitioned cell)
//	  │
//	  ├─ StartCell(t, n, opts) ─► n1..nN with -bootstrap-expect N, n2.. -join n1's
//	  │     gossip address; ready: every server's Hello names a master, then a
//	  │     chubbysh session through it · Cell.Master / WaitMaster (one master
//	  │     by /status, named by every live server's Members) · AddServer (-join,
//	  │     default -bootstrap-expect) · StopAll / StartAll · Cell.Sh & co with
//	  │     -cell listing every server · per-server Kill/Stop/Pause/Resume/Restart
//	  │     · CellOptions.ServerArgs: per-server flags built at each start
//	  │     (e.g. -raft-route through proxies)
//	  ├─ DialRaw, Hello, Members     the wire protocol to ONE server (no
//	  │                              following the master): its own view, or
//	  │                              calls stamped with an old epoch
//	  ├─ Server.Sh(t, args...)       chubbysh -cell ADDR args...  → Result
//	  ├─ Server.ShStdin(t, in, ...)  the same with a script on stdin
//	  ├─ Server.StartSh(t, args...)  in the background → *Shell: stdout lines
//	  │                              with arrival times, stdin, signals, exit
//	  └─ StartChild(t, name, cmd, onLine)  any other helper process (the test
//	                                 binary re-executed as a client worker):
//	                                 stdout lines to a callback, stdin,
//	                                 Pause/Resume, Wait, Kill
//	                                 (StartProcess, Suspend/Continue and
//	                                 BuildCommands: the same for a program
//	                                 that is not a test, errors returned)
//
// Everything listens on 127.0.0.1. Every process the harness starts runs in
// its own process group and is killed (the group, by the process's id) in
// t.Cleanup; a test that failed gets the tail of each chubbyd log and each
// background shell's stderr in its output.
//
// Use Main from the test package's TestMain so the binaries' temporary
// directory is removed when the test binary ends.
package proc
