// Package fence is the guard a downstream store embeds to reject writes of a
// lock holder that was superseded (Chubby §2.4 sequencers; the fencing token
// of Kleppmann's "How to do distributed locking").
//
// A client holding a chubby lock passes its Sequencer along with every write
// to the store. The store calls Guard.Admit before applying the write: the
// guard remembers, per lock path, the newest lock generation it has seen and
// rejects any sequencer older than that. It needs no round trip to the cell:
// a paused holder that wakes after its lock moved on is refused as soon as
// the new holder has written once.
//
// For writes into the cell itself, use a sequencer-checked SetContents
// (client.WithSequencer) instead: the cell checks validity at commit.
//
//	holder (lock gen 7) ──write + seq 7──▶ store: Guard.Admit(seq) ── newest for path ≥ 7? ──▶ apply
//	paused holder (gen 6) ──write + seq 6──▶ store: Guard.Admit(seq) ── 6 < 7 ──▶ ErrStale
package fence
