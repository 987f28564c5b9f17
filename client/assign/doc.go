// Package assign shares M numbered work items (0..M-1: partitions,
// shards, jobs) among the members of a group, each item owned by at most
// one member at a time and proven so by its lock's sequencer, which a
// downstream store checks (client/fence). Kafka's consumer groups, with
// fencing: items are revoked (the owner gets a deadline to finish its
// step, then releases), assigned (the new owner holds the item's lock), or
// lost (the owner's session entered jeopardy or expired: the lock may be
// gone, stop at once).
//
//	m, err := assign.Join(ctx, c, "/ls/local/jobs", 12,
//		assign.OnRevoked(func(ctx context.Context, items []assign.Item) { /* finish the step */ }),
//		assign.OnLost(func(items []assign.Item) { /* stop: it.Ctx is done already */ }))
//	for a := range m.Assignments() {            // the latest set of owned items
//		for _, it := range a.Items {
//			go work(it.Ctx, it.N, it.Seq)      // it.Ctx: done the moment the lock may be lost
//		}
//	}
//	err = m.Leave(ctx)
//
// # Layout
//
// Under the group's directory DIR (created with Join if missing):
//
//	DIR/members/NAME   an ephemeral file per live member (contents: Metadata)
//	DIR/items/I        item I's lock file, permanent
//	DIR/coordinator    a lock file: its holder is the coordinator
//	DIR/assignment     the Table, JSON: {"epoch","items","members","owner"}
//
// # How it works
//
//	every member                           the coordinator (holder of DIR/coordinator)
//	───────────                            ───────────────
//	Join: members/NAME (ephemeral)  ──child_added/removed──▶ ReadDir(members), read table,
//	                                                         Balance, write table
//	                                                         WithSequencer(coordinator's seq)
//	loop, woken by events           ◀──contents_modified──── DIR/assignment
//	  read table; for items:
//	    held, not mine ─▶ OnRevoked(ctx with RevokeTimeout) ─▶ Release
//	    mine, not held ─▶ Acquire (queued by the master behind the
//	                       previous owner's release, or its expiry +
//	                       lock-delay) ─▶ OnAssigned
//	    lock ctx done  ─▶ OnLost (jeopardy, expiry)
//	  ─▶ Assignments (latest state, coalesced)
//
// Every member campaigns for the coordinator's lock (a blocking Acquire,
// no lock-delay: the table's writes are fenced, so a deposed coordinator's
// write is refused by the cell and a successor can write at once). The
// coordinator watches DIR/members (child events) and, whenever the set of
// live members differs from the table's, computes the next table with
// Balance from the current one and writes it fenced by its sequencer.
// Members watch DIR/assignment and reconcile their locks with it. Nothing
// polls: the client's events (Client.Subscribe) wake both loops; after a
// failed call a retry timer does (backoff up to 1 s). A master failover
// or the session coming back safe wakes them too, and they re-read
// everything.
//
// Balance is balanced (each member owns ⌊M/N⌋ or ⌈M/N⌉ items), sticky (an
// item stays with its owner while the owner is alive and within its
// quota), moves the fewest items any balanced assignment could — a join
// moves only the items the joiner takes, a leave only the leaver's — and
// is deterministic.
//
// An item moves only through its lock: the new owner's Acquire is granted
// after the old owner's Release (after OnRevoked returned or its deadline
// passed), or, if the old owner died, after its session expired and the
// item lock's lock-delay (ItemLockOptions; the client's LockDelay by
// default) passed. So a dead member's items are owned again within its
// session's TTL + lock-delay and a round of calls. Fencing does the rest:
// an owner that was paused past its lease holds a sequencer the store
// refuses once the new owner has used its own.
//
// Every member caches the table, so, as Chubby's cache coherence has it,
// the coordinator's write of a new table commits only once every member
// acknowledged the invalidation or its lease ran out on the master: a
// member cut off from the cell holds up rebalancing until then (at most its
// TTL; that is also when a dead member's session expires, so it costs no
// extra time on the way to re-owning a dead member's items).
//
// A member in jeopardy reports all its items lost at once (their Ctx are
// done). If the session comes back safe, it still holds the locks on the
// master: the member acquires the items the table still gives it again
// (the same hold and sequencer, reported through OnAssigned) and releases
// the others. If the session expires, the member ends (Done, Err); a
// program that wants to go on joins again with a new client.
//
// Files: balance.go Balance and Moves (pure); table.go the Table and its
// JSON; member.go Join, the member's reconcile loop and Leave;
// coordinator.go the campaign and the rebalancing; options.go the options.
//
// Callbacks run on the member's loop, one at a time, and must not call
// Leave; OnRevoked runs on its own goroutine so the loop can go on at its
// deadline (it may then still be running when later callbacks are).
package assign
