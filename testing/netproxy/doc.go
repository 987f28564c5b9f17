// Package netproxy is a byte-level TCP proxy for one network link, with
// faults: the process-level tests put one Link on every link they want to
// break (each ordered pair of servers for raft, each client↔server pair)
// and point the two ends at it instead of at each other.
//
//	dialer ──TCP──▶ Link (127.0.0.1:port) ──TCP──▶ target
//	                 │ Up        forward both ways (after Delay)
//	                 │ Cut(Refuse)     reset every connection; accept new
//	                 │                 ones and reset them at once
//	                 │ Cut(Blackhole)  close every connection; accept new
//	                 │                 ones and swallow what they send,
//	                 │                 never reaching the target
//	                 │ Cut(Stall)      keep every connection but forward
//	                 │                 nothing either way; new ones wait,
//	                 │                 undialled, until Up
//	                 │ Delay(d)   every chunk is written d after it was read
//	                 │ Jitter(f)  ... and a further f() (one sample per
//	                 │            chunk, never before the chunk ahead of it)
//	                 └ Close      stop listening, close everything, wait
//
// A Link knows nothing of what it carries: it never drops or reorders bytes
// inside a connection (that would corrupt a framed stream); it closes
// connections, holds them, or delays them. Stall is what a silent partition
// or a lost route looks like to TCP: the bytes sent meanwhile arrive at Up,
// as retransmissions would, unless an end gave up on the connection first.
// Refuse is a peer that resets (RST) every connection; Blackhole is a
// route that loses every packet after the handshake (which the proxy
// completes): a connection seems to open, and nothing ever comes back.
//
// A Link's direction is the direction of the connections it carries: the
// end that dials is upstream. A one-way fault between two raft servers is
// a Cut on the link i→j only, while j→i (the connections j dials to i)
// stays up.
package netproxy
