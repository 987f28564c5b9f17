// Package cell is an in-process chubby cell for the project's own tests: one
// real server.Server (hashicorp/raft with a raft-boltdb log on a t.TempDir(),
// fsync on, real TCP on 127.0.0.1 free ports), an injectable clock for every
// lease and lock-delay decision, hclog lines routed to t.Log, and tools to
// reach it:
//
//	test ──Dial──▶ client.Client ──────────────┐
//	     ──NewProxy──▶ Proxy (break, heal,      │ TCP
//	                   drop frames, count calls)┤
//	     ──DialRaw──▶ RawConn (hand-made frames)┤
//	                                            ▼
//	                               server.Server (master) ── raft ── bbolt (TempDir)
//	                                      ▲
//	     ──Clock──▶ session.ManualClock / StallClock (Advance, Stall)
//
// Start waits until the server serves as master; Restart (Stop, then Resume)
// closes it and starts it again on the same data dir and ports; everything is
// torn down by t.Cleanup. Dial returns a client.Client of the cell;
// NewRawSession a wire-level session that sends no KeepAlive unless told to.
// WithManualClock gives the server a session.ManualClock (Manual returns it),
// whose Advance fires every timer punctually at its own deadline; a
// StallClock can in addition simulate a paused process whose timers fire
// late (Stall).
//
// WaitFor polls a condition with short sleeps: use it only to wait for real
// goroutines (a raft apply, a TCP round trip), never for a lease or a
// lock-delay to run out — drive those with the clock. WaitApplied waits for
// the next raft command to reach the state machine.
package cell
