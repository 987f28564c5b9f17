package server_test

import (
	"errors"
	"testing"

	"github.com/chubby-dev/chubby/client"
	"github.com/chubby-dev/chubby/fs"
	"github.com/chubby-dev/chubby/testing/cell"
	"github.com/chubby-dev/chubby/wire"
)

// TestCancelBeforeItsAcquireLeavesNoWait: a connection's calls run
// concurrently, so a client's CancelAcquire may reach the proposer before
// the blocking Acquire it cancels. Here the cancel is applied first (sent
// and answered before the Acquire is sent): the Acquire must be refused,
// not queued — queued, it would be granted later to a session that gave
// it up, and the lock would stay held by nobody that knows (the race left
// such a hold about one cancel in fifty).
func TestCancelBeforeItsAcquireLeavesNoWait(t *testing.T) {
	c := cell.Start(t)
	lock := c.Path("lock")
	a := c.Dial(t, client.Config{})
	holder, canceller := c.NewRawSession(t, 0), c.NewRawSession(t, 0)
	rawCall(t, holder, wire.MOpen, wire.OpenArgs{Path: lock, Create: true}, nil)
	seq := rawAcquire(t, holder, lock, 0)

	const waitID = 11
	rawCall(t, canceller, wire.MCancelAcquire, wire.CancelAcquireArgs{Path: lock, WaitID: waitID}, nil)
	err := canceller.Call(wire.MAcquire, wire.AcquireArgs{Path: lock, Mode: fs.Exclusive, Wait: true, WaitID: waitID}, &wire.SeqReply{})
	if !errors.Is(err, fs.ErrBadRequest) {
		t.Fatalf("an Acquire whose cancel came first: %v, want it refused", err)
	}
	rawCall(t, holder, wire.MRelease, wire.ReleaseArgs{Path: lock, Gen: seq.Gen}, nil)
	h := open(t, a, lock)
	if err := h.TryAcquire(ctxT(t), client.Exclusive); err != nil {
		t.Fatalf("after the holder's release the lock is not free: %v (the cancelled wait was granted)", err)
	}

	// The wait id is forgotten once refused; other wait ids queue as usual.
	id, err := canceller.Go(wire.MAcquire, wire.AcquireArgs{Path: lock, Mode: fs.Exclusive, Wait: true, WaitID: waitID + 1})
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Release(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	var rep wire.SeqReply
	if err := canceller.Result(id, &rep); err != nil || rep.Seq.Gen == 0 {
		t.Fatalf("a later wait of the same session: %v %v", rep, err)
	}
}
