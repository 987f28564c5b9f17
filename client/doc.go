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
// A Client is one session. Dial finds the master (any server answers Hello
// with the master's address), creates the session and starts the KeepAlive
// loop: one KeepAlive is always parked on the master, which answers it after
// about a third of the TTL. The local lease starts when a KeepAlive was sent
// and is shortened by a drift margin, so it ends before the master's. When it
// ends without a renewal the session is in jeopardy: every held lock's
// LockLost channel is closed and EventJeopardy is delivered; the loop keeps
// reconnecting with jittered backoff for the grace period (45 s) and then
// reports EventSafe or EventExpired.
//
// Handles are bound to the instance of the node they opened: once it is
// deleted, calls fail with ErrStaleHandle. Errors wrap the sentinels of this
// package (re-exported from fs), so errors.Is works across the wire.
//
// Package fence holds the guard that downstream stores embed to reject stale
// sequencers without a round trip.
package client
