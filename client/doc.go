// Package client is the Go client of a chubby cell.
//
//	c, err := client.Dial(ctx, client.Config{Servers: []string{"127.0.0.1:7100"}})
//	defer c.Close()                                  // ends the session, releases its locks
//	h, err := c.Open(ctx, "/ls/local/jobs/lock", client.Create())
//	err = h.Acquire(ctx, client.Exclusive)           // blocks; the master queues us
//	seq, _ := h.Sequencer()                          // fencing token for downstream writes
//	select { case <-h.LockLost(): /* stop using the resource */ default: }
//	err = h.Release(ctx)
//
// or, to run work only while the lock is held:
//
//	err = h.RunLocked(ctx, client.Exclusive, func(ctx context.Context, seq client.Sequencer) error {
//		return work(ctx, seq) // ctx is done the moment the lock may be lost
//	})
//
// A Client is one session. Dial finds the master (any server answers Hello
// with the master's address), creates the session and starts the KeepAlive
// loop: a KeepAlive is always parked on the master, which answers it after
// about a third of the TTL or as soon as the next one arrives, or with an
// invalidation, and which sends it the session's events meanwhile without
// ending it (a stream KeepAlive; a Pool's KeepAliveMany does not stream);
// the loop sends the next when the answer comes or a renewal interval (at
// most TTL/3) after the last, whichever is first. The local lease starts
// when a KeepAlive was sent and is shortened by a drift margin, so it ends
// before the master's. When it ends without a renewal the session is in
// jeopardy: every held lock's LockLost channel is closed (and RunLocked's
// context cancelled) and EventJeopardy is delivered; the loop keeps
// reconnecting with jittered backoff for the grace period (45 s) and then
// reports EventSafe or EventExpired.
//
// The Clients of one process share a connection to each server (one per
// *tls.Config: processPool), their calls and replies travelling together;
// Config.OwnConnection gives a Client its own, and a Pool renews its
// Clients' sessions together.
//
//	Dial ─► connect (discovery.go: Hello to one server at a time, in a random
//	  │      order, the next after a refusal or 150 ms; the master's connection
//	  │      kept) ─► CreateSession ─► go keepAliveLoop
//	  ▼
//	keepAliveLoop (keepalive.go)            calls (calls.go)
//	  KeepAlive parked on the master          do: numbered call, acked mark,
//	  reply ─► invalidate cache, events,        retried on the master found by
//	           renew local lease                the loop; same number on retry
//	  no reply by lease end ─► jeopardy:      Open/reads (open.go, handle.go):
//	    cache off, locks lost (locks.go),       cache first (cache.go), then do
//	    EventJeopardy, reconnect with Backoff  Acquire/Release/RunLocked (locks.go)
//	  grace ends / master says so ─► expired   Members/RemoveServer (operator.go)
//
// Files: client.go the Client, Dial and Close; config.go Config,
// DefaultConfig, Validate, Backoff and the lock-delay values; discovery.go
// finding the master; calls.go call numbering and retries; keepalive.go
// renewal, jeopardy, expiry and events; lease.go the local lease
// (SessionState from sent time, TTL, drift margin and grace, on package
// session's arithmetic); session.go SessionState and Session; open.go and handle.go nodes; cache.go the cache's use; locks.go
// locks and RunLocked; operator.go membership; conn.go one multiplexed TCP
// connection; pool.go connections shared by Clients.
//
// Lock-delay values, in Config.LockDelay and the LockDelay option alike: 0
// means the default (Config.LockDelay, itself DefaultLockDelay when 0),
// NoLockDelay means none. They are translated to the wire in one place.
//
// Handles are bound to the instance of the node they opened: once it is
// deleted, calls fail with ErrStaleHandle. Errors wrap the sentinels of this
// package (re-exported from fs), so errors.Is works across the wire.
//
// Package fence holds the guard that downstream stores embed to reject stale
// sequencers without a round trip.
package client
