// Package cell is an in-process chubby cell for the project's own tests: one
// real server.Server (hashicorp/raft with a raft-boltdb log on a t.TempDir(),
// fsync on, real TCP on 127.0.0.1 free ports), an injectable clock for every
// lease and lock-delay decision, hclog lines routed to t.Log, and tools to
// reach it:
//
//	test ──Dial──▶ client.Client ──────────────┐
//	     ──NewProxy──▶ Proxy (break, heal,      │ TCP
//	                   drop frames or replies,  │
//	                   count calls)             ┤
//	     ──DialRaw──▶ RawConn (hand-made frames)┤
//	                                            ▼
//	                               server.Server (master) ── raft ── bbolt (TempDir)
//	                                      ▲
//	     ──Clock──▶ session.ManualClock / StallClock (Advance, Stall)
//	                SkewClock (real time: SetRate, Jump, Freeze/Unfreeze)
//
// Start waits until the server serves as master; Restart (Stop, then Resume)
// closes it and starts it again on the same data dir and ports; everything is
// torn down by t.Cleanup. Dial returns a client.Client of the cell;
// NewRawSession a wire-level session that sends no KeepAlive unless told to.
// WithManualClock gives the server a session.ManualClock (Manual returns it),
// whose Advance fires every timer punctually at its own deadline; a
// StallClock can in addition simulate a paused process whose timers fire
// late (Stall). A SkewClock runs on real time for programs that run on it
// (the nemesis's servers and clients) and can be skewed meanwhile: its rate
// changed (drift), jumped forward, frozen and thawed (a stopped process),
// its timers honouring every change.
//
// StartCluster runs a replicated cell instead: n servers in the process,
// each with its own raft log (fsync on) and RPC port, replicating over
// hashicorp/raft's in-memory transport, listed to each other as static
// peers (no gossip):
//
//	client ──▶ Proxy(i) ──▶ server i ──┐  raft over raft.InmemTransport:
//	client ──▶ Proxy(j) ──▶ server j ──┼─ Partition(groups...), Isolate(i),
//	client ──▶ Proxy(k) ──▶ server k ──┘  Cut(links...) one way, Heal()
//
// Master and WaitMaster find the one serving master (among a group, while
// an isolated old master may still believe it is one); Kill crashes a
// server (its raft links cut first, so it cannot hand leadership over),
// Stop shuts it down gracefully, Restart brings it back on its data dir and
// addresses. Cut cuts chosen raft links in one direction (a filter on the
// receiving transport: see links.go for why InmemTransport's Disconnect is
// not a one-way cut); cuts compose with each other and with Partition.
// Pause stops a server as SIGSTOP would (links cut, its client proxies
// held, its lease clock frozen), StallLeaseClock stalls only its lease side
// (clock frozen, client proxies held, raft running), SetDiskDelay slows
// every write to its raft log (through server.Config.WrapLogStore).
// WithSkewClocks gives each server its own SkewClock (SkewClock(i)).
//
// A Proxy per server cuts or silences client links (Break, Blackhole),
// loses chosen replies after the server applied the call (DropReply), the
// way to make a client retry a call that already took effect, and lets a
// test observe the replies its client gets (OnReply). On a cell with TLS
// (DevTLS's files in server.Config.TLS) ProxiesAs makes a client's proxies
// TLS ends on both hops (ProxyTLS: the server's certificate towards the
// client, the client's towards the server), so the same faults apply to
// its frames and the server sees the client's principal. A multi-server cell
// runs on the real clock unless WithClock or WithSkewClocks is given.
//
// testing/wait polls a condition: use it only to wait for real
// goroutines (a raft apply, a TCP round trip), never for a lease or a
// lock-delay to run out — drive those with the clock. WaitApplied waits for
// the next raft command to reach the state machine.
package cell
