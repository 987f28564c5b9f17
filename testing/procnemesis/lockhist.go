package procnemesis

import (
	"fmt"

	"github.com/anishathalye/porcupine"
	"github.com/chubby-dev/chubby/testing/linear"
)

// LockHistory turns the lock workers' events into a history for
// linear.LockModel on lock (one porcupine client per worker), with times
// converted by at (History.At):
//
//   - acq OK → Acquire OK at its generation; failed → Acquire of unknown
//     outcome (the grant may have happened before the failure), and if its
//     context ended, a Release of unknown outcome naming no generation (the
//     client's CancelAcquire gives back a grant that raced it);
//   - check answered → Check valid or invalid (failed checks say nothing);
//   - rel OK → Release OK; ErrNotHeld from the cell → a Release that
//     changed nothing; any other failure → unknown;
//   - lost → the session's expiry (Lock "": every lock it touched), from
//     the call of its last successful call that needed it alive; never
//     confirmed (the client's expiry may be its own grace period running
//     out), so it may be linearized any time after that.
func LockHistory(events []Event, lock string, at func(int64) int64) []porcupine.Operation {
	var ops []porcupine.Operation
	for _, e := range events {
		s := int(e.Session)
		meta := fmt.Sprintf("worker %d hold %d", e.Worker, e.Hold)
		if e.Err != "" {
			meta += ": " + e.Err
		}
		add := func(in linear.LockInput, out linear.LockOutput) {
			op := linear.LockOperation(e.Worker, in, out, at(e.Call), at(e.Ret))
			op.Metadata = meta
			ops = append(ops, op)
		}
		switch e.Ev {
		case "acq":
			in := linear.LockInput{Kind: linear.LockAcquire, Lock: lock, Session: s}
			if e.OK {
				add(in, linear.LockOutput{OK: true, Gen: e.Gen})
				continue
			}
			add(in, linear.LockOutput{Unknown: true})
			if e.Cancelled {
				add(linear.LockInput{Kind: linear.LockRelease, Lock: lock, Session: s}, linear.LockOutput{Unknown: true})
			}
		case "check":
			if e.Err == "" {
				add(linear.LockInput{Kind: linear.LockCheck, Lock: lock, Session: s, Gen: e.Gen}, linear.LockOutput{OK: e.OK})
			}
		case "rel":
			in := linear.LockInput{Kind: linear.LockRelease, Lock: lock, Session: s, Gen: e.Gen}
			switch {
			case e.OK:
				add(in, linear.LockOutput{OK: true})
			case e.NotHeld:
				add(in, linear.LockOutput{})
			default:
				add(in, linear.LockOutput{Unknown: true})
			}
		case "lost":
			op := linear.LostOperation(e.Worker, s, "", at(e.Call), -1)
			op.Metadata = fmt.Sprintf("worker %d: session ended, learned at %.3fs", e.Worker, float64(at(e.Ret))/1e9)
			ops = append(ops, op)
		}
	}
	return ops
}
