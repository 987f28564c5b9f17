package core

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/chubby-dev/chubby/client"
	"github.com/chubby-dev/chubby/testing/fencedstore"
	"github.com/chubby-dev/chubby/testing/wait"
)

// LockCycle is one hold of the fencing workload's lock, the same for both
// nemeses' lock workers (testing/nemesis's goroutines and
// testing/procnemesis's processes differ only in how they keep a session,
// and in what BeforeWrite does):
//
//	Acquire → fenced read of the counter (Store) → think (up to Think)
//	→ one time in four CheckSequencer → BeforeWrite → fenced write of
//	read+1 → Release → think (up to 5 ms)
//
// Every step is reported to Emit as an Event stamped by Now. An Acquire
// that failed is followed by a 20 ms pause, not a spin: an Acquire whose
// cancel did not reach the master leaves its request queued, and the next
// one is refused at once ("already waiting") until the queued one is
// granted.
type LockCycle struct {
	Worker int
	Now    func() int64
	Store  fencedstore.Fenced
	Think  time.Duration
	Emit   func(Event)
	// Alive, if set, learns that the session answered a call made at call
	// (for the call time of a Lost event).
	Alive func(call int64)
	// BeforeWrite, if set, runs between the think and the store write of
	// value: the pause gate of an in-process worker, the fenced cell write
	// of a process worker.
	BeforeWrite func(seq client.Sequencer, sid uint64, hold, value int)
}

// opTimeout bounds each call of a hold.
const opTimeout = 5 * time.Second

// Do times one call of a lock worker and returns its event: e with Call
// and Ret stamped by now, OK if call returned nil; a store's refusal of a
// stale sequencer is Refused, any other error classified (ErrEvent).
func Do(now func() int64, e Event, call func() error) Event {
	e.Call = now()
	err := call()
	e.Ret = now()
	switch {
	case err == nil:
		e.OK = true
	case errors.Is(err, fencedstore.ErrStale):
		e.Refused = true
	default:
		ErrEvent(&e, err)
	}
	return e
}

// Locker is what a hold takes and gives back: a handle's lock
// (*client.Handle), or a recipe's (an election's term, HandleLocker's
// counterpart in testing/nemesis).
type Locker interface {
	Acquire(ctx context.Context, mode client.Mode, opts ...client.LockOption) error
	Sequencer() (client.Sequencer, error)
	Release(ctx context.Context) error
}

// Hold runs hold number hold of cl's session on h. Calls use their own
// timeouts, not ctx, so a hold under way ends properly when the worker is
// asked to stop; ctx cuts the pauses short.
func (c *LockCycle) Hold(ctx context.Context, cl *client.Client, h Locker, hold int, rng *rand.Rand) {
	sid := cl.Session().ID
	ev := Event{Worker: c.Worker, Hold: hold, Session: sid}
	acq := ev
	acq.Ev = "acq"
	acq = Do(c.Now, acq, func() error {
		octx, cancel := context.WithTimeout(context.Background(), opTimeout)
		defer cancel()
		return h.Acquire(octx, client.Exclusive)
	})
	if !acq.OK {
		c.Emit(acq)
		wait.Sleep(ctx, 20*time.Millisecond)
		return
	}
	// Sequencer fails only once Release ran; Acquire just set it.
	seq, err := h.Sequencer()
	if err != nil {
		panic(fmt.Sprintf("lock worker %d: no sequencer right after Acquire: %v", c.Worker, err))
	}
	acq.Gen, ev.Gen = seq.Gen, seq.Gen
	c.alive(acq)
	c.Emit(acq)

	c.critical(ctx, cl, ev, seq, rng)

	rel := ev
	rel.Ev = "rel"
	rel = Do(c.Now, rel, func() error {
		octx, cancel := context.WithTimeout(context.Background(), opTimeout)
		defer cancel()
		return h.Release(octx)
	})
	c.alive(rel)
	c.Emit(rel)
	wait.Sleep(ctx, time.Duration(rng.Int64N(int64(5*time.Millisecond))))
}

func (c *LockCycle) alive(e Event) {
	if e.OK && c.Alive != nil {
		c.Alive(e.Call)
	}
}

// critical is the hold's work: fenced read, think, (maybe CheckSequencer,)
// BeforeWrite, fenced write of read+1.
func (c *LockCycle) critical(ctx context.Context, cl *client.Client, ev Event, seq client.Sequencer, rng *rand.Rand) {
	tag := fencedstore.Tag{Worker: c.Worker, Hold: ev.Hold}
	rd := ev
	rd.Ev = "read"
	var v int
	rd = Do(c.Now, rd, func() error {
		s, err := c.Store.Read(CounterKey, seq, tag)
		if err == nil {
			v, err = strconv.Atoi(s)
		}
		return err
	})
	rd.Value = v
	c.Emit(rd)
	if !rd.OK {
		return
	}
	if c.Think > 0 {
		wait.Sleep(ctx, time.Duration(rng.Int64N(int64(c.Think))))
	}
	if rng.IntN(4) == 0 {
		ck := ev
		ck.Ev = "check"
		valid := false
		ck = Do(c.Now, ck, func() (err error) {
			octx, cancel := context.WithTimeout(context.Background(), opTimeout)
			defer cancel()
			valid, err = cl.CheckSequencer(octx, seq)
			return err
		})
		c.alive(ck)
		ck.OK = ck.OK && valid // the answer, when there is one
		c.Emit(ck)
	}
	if c.BeforeWrite != nil {
		c.BeforeWrite(seq, ev.Session, ev.Hold, v+1)
	}
	wr := ev
	wr.Ev, wr.Value = "write", v+1
	c.Emit(Do(c.Now, wr, func() error { return c.Store.Write(CounterKey, strconv.Itoa(v+1), seq, tag) }))
}
