// Package linear checks histories of operations on a chubby cell for
// linearizability with porcupine (github.com/anishathalye/porcupine): a
// Recorder notes the call and return time of every operation as the test's
// clients run it — reads answered from a client cache are operations too —
// and Check runs porcupine on the history with a model of what the cell
// promises.
//
//	rec := linear.NewRecorder()
//	op := rec.Begin(client, linear.Read(path))
//	data, _, err := h.GetContentsAndStat(ctx)
//	op.Read(string(data), err)                // or op.Wrote(err) for a write
//	...
//	linear.Check(t, linear.RegisterModel, rec.History())
//
// RegisterModel treats each file as a register written with unique values:
// a history is linearizable iff every read returns the value of the latest
// write linearized before it; in particular no read started after a write
// returned may return an older value (DESIGN invariant 5, cache coherence).
// A write whose outcome is unknown (it failed with the connection or timed
// out) may take effect at any time after its call, or never.
//
// On a violation Check writes porcupine's interactive visualization to a
// file, logs its path and the operations around the first operation that
// could not be linearized, and fails the test.
//
// The coherence tests of the client cache (issue 4, acceptance 1) live in
// this package's tests.
package linear
