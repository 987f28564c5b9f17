// Package fencedstore is a small key-value store that embeds
// client/fence.Guard, the way a downstream store protects itself from lock
// holders that were superseded (Chubby §2.4; Kleppmann's fencing tokens).
// It is the downstream store of every fencing test: fencedstore's own
// pause test, and the fenced counter of both nemeses (testing/nemesis
// calls it in memory, testing/procnemesis's lock-worker processes over
// HTTP).
//
//	caller ──Read/Write(key, sequencer, tag)──▶ Store ──fence.Guard──▶ data
//	   │ (in memory)                             │ admitted ops logged (Log)
//	   └─HTTP: Client ──GET/PUT /KEY────────────▶┘ (Serve)
//
// An operation carrying a sequencer goes through the guard, which refuses
// (ErrStale; 409 Conflict over HTTP) a sequencer older than the newest it
// has seen for its lock — reads too: a fenced read is what keeps a
// superseded holder that read before the new holder from writing after it.
// Every admitted operation that carried a sequencer is logged in
// admission order, with the caller's Tag (worker, hold) and the time on
// the store's clock; both nemeses read the log through
// testing/nemesis/core (NewCounterStore, CounterSnapshot). Over HTTP, PUT /KEY carries the value as body, the sequencer in
// the X-Chubby-Sequencer header and the tag in X-Hold ("WORKER/HOLD");
// GET /KEY returns the value, fenced if it carries a sequencer. With
// fencing off sequencers are ignored: the store behaves like one that
// trusts lock holders, to show the hazard (the negative control).
package fencedstore
