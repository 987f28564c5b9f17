// Package session holds the lease arithmetic that the master and the client
// share: TTL negotiation, the drift margin that keeps the client's local
// lease (client/lease.go) inside the master's, the grace period, the
// KeepAlive hold time with jitter and the jittered exponential backoff used
// between failed renewals; and the injected Clock with its test clocks
// (ManualClock, SkewClock).
//
// Everything here is pure: time comes from an injected Clock, so tests drive
// leases with a ManualClock instead of sleeping.
//
//	client                                   master
//	  sentAt ── KeepAlive ───────────────────▶ lease := arrival+TTL
//	                                          hold ≈ TTL/3 ± 20 %
//	  local := sentAt+TTL-drift ◀── reply ──── (lease unchanged)
//	  next KeepAlive sent at once ──────────▶ lease := arrival+TTL
//
// The client's local lease (client/lease.go) starts when the KeepAlive was
// sent and is shortened by a drift margin, so it always ends before the master's view of
// the same lease (invariant 3 of DESIGN.md). The master extends the lease
// only when a KeepAlive arrives, never when it answers one, so a session
// whose client died ends exactly TTL after its last KeepAlive arrived. Since
// a KeepAlive is always parked, the master's lease has between TTL-hold and
// TTL left at any moment: a client survives any pause shorter than about
// two thirds of its TTL, and some up to a whole TTL. When it ends the client is in
// jeopardy; it keeps trying for the grace period and then is either safe
// again or expired.
package session
