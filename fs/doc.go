// Package fs is the namespace state machine of a chubby cell: files and
// directories under /ls/<cell>, each node also a reader/writer lock, and the
// sessions that hold locks and own ephemeral nodes.
//
// It is deterministic and pure. The master stamps every Command with its own
// clock (Command.Now) and proposes it through raft; every replica applies the
// same commands in the same order with State.Apply and reaches the same
// state. Nothing here reads a clock, starts a goroutine or does I/O, so the
// server wraps State in a raft.FSM and serialises access to it.
//
//	master: decide (clock, leases) ─▶ Command{Op, Now, ...} ─▶ raft log
//	every replica:            raft log ─▶ State.Apply ─▶ Result{Err, effects}
//	master:                   Result.Grants / Cancelled / Delayed ─▶ wake waiting calls, arm lock-delay timers
//
// Numbers: instance numbers and content, lock and ACL generations all come
// from one cell-wide counter, so each is monotonic across deletion and
// re-creation of a name. The lock generation changes only on a free→held
// transition, so a Sequencer issued later for the same lock compares greater.
//
// Locks: a blocked Acquire queues in the replicated state; the command that
// frees a lock (Release, session end, end of lock-delay) grants the queue's
// head in the same apply. A waiter whose session ended is removed from the
// queue in the apply that ended it and is never granted. A lock freed because
// its holder's session expired is not granted for the holder's lock-delay.
package fs
