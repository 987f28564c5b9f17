// Package cache is the client's consistent, write-through cache of file
// contents, metadata, directory listings and absence (Chubby §2.5).
//
// An entry may be served only while the session's local lease is valid and
// no invalidation for its node has arrived since it was filled:
//
//	read:  tok := c.Begin() ── RPC ──▶ reply ──▶ c.Put(key, value, tok)
//	                                   (dropped if any invalidation or flush
//	                                    happened after Begin)
//	serve: c.Get(key, now) — a hit only if now < lease end and enabled
//	KeepAlive reply with invalidations ──▶ c.InvalidateAt(seq, paths) ──▶ ack
//	event with contents (numbered n)  ──▶ c.Refill(key, value, n)
//	                                   (refused if an invalidation of the
//	                                    path numbered above n arrived, or
//	                                    the entry is as new, or writing)
//	jeopardy ──▶ c.Disable() (flush, serve nothing) ; safe ──▶ c.Enable()
//	master failover ──▶ c.Flush()
//
// The cache is bounded (entries and bytes, least recently used first out)
// and counts hits, misses and invalidations. It is pure: the caller passes
// the time, so tests use a manual clock.
package cache
