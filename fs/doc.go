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
//	master: decide (clock, leases) ─▶ NewCommand(&Acquire{...}) + Now, Session, CallID ─▶ Encode ─▶ raft log
//	every replica:  raft log ─▶ DecodeCommands ─▶ State.Apply ─▶ handlers[Op](envelope, session, *Acquire) ─▶ Result{Err, effects}
//	master:         Result.Grants / Cancelled / Delayed ─▶ wake waiting calls, arm lock-delay timers
//
// Commands: a Command is an envelope every op shares (Op, Now, Session, and
// CallID and Acked for exactly-once retries) around a Body of the op's own
// type: NewEpoch, CreateSession, EndSession, Create, SetContents, Delete,
// Acquire, CancelWait, Release, GrantDelayed, RemoveServer, SetACL,
// InitACLs. NewCommand sets
// Op from the body. Apply first answers a retried call from the session's
// remembered results; then the op's entry in the one dispatch table says
// what it needs of the session (nothing, a live one if named, a live one)
// and its handler gets the envelope, the session and the typed body. An
// unknown op or a body of another op's type is a bad-request error naming
// what it got, and changes nothing.
//
// Encoding: the log holds msgpack, and the master batches concurrent
// commands back to back in one entry (DecodeCommands). A command is one
// flat map of the envelope's and the body's fields, zero fields left out,
// under the keys the builds before the envelope used for their one union
// struct (see flatCommand), so data directories they wrote replay to the
// same commands and results (testdata/oldformat.txt) and their logs and
// ours are one format. Snapshots hold the state, not commands; a session's
// remembered call results are kept as results (cachedCall).
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
//
// ACLs (Chubby §2.3): every node has three ACL names, read, write and
// change-ACL (ACL), each naming a file in /ls/<cell>/acl/ whose lines are
// the principals it grants ("*": every authenticated principal; blank
// lines and lines starting with '#' skipped: ParseACLFile). A missing file
// grants nothing. A new node copies its parent's names unless the Create
// names others; SetACL changes them and moves the node's ACL generation.
// Read covers contents, stat, listing, events and CheckSequencer; write
// covers contents, CAS, delete, creating a child (checked on the parent)
// and acquiring the lock in either mode; change-ACL covers SetACL.
// Releasing, cancelling a wait and ending a session need nothing.
//
//	command{Caller, Admin} ─▶ Apply ─▶ authorize(path, perm): Caller "" or Admin? allowed
//	                                     effectiveACL(path).name(perm) ─▶ acls[name] ─▶ Allows(Caller)
//
// The check runs inside Apply, with the change: an ACL edit and a write
// are ordered by the log and cannot race. Reads are checked by the server
// with Access against the state it answers from. The parsed files live in
// State.acls, updated whenever a node directly under the ACL directory is
// created, written or deleted (an ephemeral one with its session) and
// rebuilt by Restore and ReadBackup, so a check is a few map lookups, and
// an edit governs the very next command. Snapshots carry each node's
// names; a node's Stat carries only its ACL generation.
//
// Who is checked: Command.Caller is the principal the master stamps on
// every client call, Admin whether it is one of the cell's admins (on a
// cell without TLS every caller, anonymous, is). Admins are not checked.
// A command without a caller is the master's own (expiry, lock-delay,
// epochs, InitACLs) or was logged by a build before ACLs, which replays
// exactly as it did then.
//
// Nodes from before ACLs have empty names, and so does every node of a
// dev cell (its root has none, and nothing is checked there). An empty
// name is not "no restriction": the node is governed by its nearest
// ancestor that has that name, and a node created under it copies that
// ancestor's. When a cell first runs with TLS its master proposes
// InitACLs before serving: the root's names become "admin" and
// acl/admin lists the admins (its contents replaced if it existed), so
// every node without names of its own — all of a dev cell made secure —
// is the admins' until an admin grants more. A name no ancestor has
// (possible only without InitACLs) grants nothing.
package fs
