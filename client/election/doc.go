// Package election elects one leader among the sessions that campaign on a
// directory of a chubby cell, and hands the leader the fencing token of its
// term — what etcd's concurrency.Election, Consul's lock and Curator's
// LeaderLatch do, plus the sequencer that lets a downstream store refuse a
// leader that lost its term without knowing (a long GC pause, a partition).
//
//	e := election.New(c, "/ls/local/app/primary")
//	term, err := e.Campaign(ctx, []byte("host-a:8080")) // blocks until leading
//	// lead until term.Done() closes; fence writes with term.Sequencer()
//	err = e.Resign(ctx)                                  // the next in line leads
//
// and elsewhere:
//
//	l, err := e.Leader(ctx)         // value and sequencer, from the cache
//	for l := range e.Observe(ctx) { // the leader now, then each change
//	}
//
// # How it works
//
// The election is a directory DIR. Campaigners queue on DIR's exclusive
// lock (client.Handle.Acquire: the master grants it in order, no polling),
// with the lock-delay of the client's Config or LockDelay. The winner
// publishes its value in the record DIR/leader, an ephemeral file created
// with its contents in one write, fenced by the term's sequencer
// (client.CreateFenced): only the lock's holder can create it, and it goes
// with the session. The record holds the sequencer on its first line and
// the value after it (`chubbysh cat DIR/leader` shows both). Leader reads
// the record through the session's cache; Observe watches DIR's children
// (client.WithEvents) and reads the record from the cell after each event.
//
//	Campaign: Open DIR ─► Acquire(X) ─► create DIR/leader (ephemeral, value, fenced)
//	Resign:   delete DIR/leader ∥ Release          (one commit)
//	Leader:   read DIR/leader (cache)              Observe: events on DIR ─► read DIR/leader
//
// # Guarantees
//
//   - At most one session holds the lock at a time, so at most one term is
//     valid: writes fenced by term sequencers (client.WithSequencer in the
//     cell, client/fence.Guard downstream) are admitted in term order, and
//     a deposed leader's are refused. TestNemesisElection (testing/nemesis)
//     checks this under server kills, partitions, pauses past the TTL and
//     clock faults.
//   - A term's Done closes the moment the session's local lease runs out
//     (jeopardy), before the master can let anybody else lead; Err's StopBy
//     is the latest moment the leader may still act.
//   - When a leader's session ends, its record and lock go with it: the
//     next campaigner leads within TTL + lock-delay of the leader's last
//     KeepAlive. A Resign hands over at once (one commit, then the next
//     leader's record: a few milliseconds).
//   - A record names only a leader that held the lock when it was written.
//     Observers may see "no leader" between one leader's end and the next
//     one's record.
//
// An observer costs the master one event subscription: between leader
// changes no more than an idle session, and it holds no leader change up —
// Observe reads the record from the cell after each event instead of
// caching it (BenchmarkObserverCost in testing/bench measures both). Leader
// does cache the record: a session that calls it is, like any cacher,
// invalidated before the record changes. Campaigners and observers do not
// cache the directory itself, whose stat every grant and release changes.
package election
