package core

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"sync/atomic"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/chubby-dev/chubby/client"
	"github.com/chubby-dev/chubby/testing/linear"
	"github.com/chubby-dev/chubby/testing/wait"
)

// OpKind is a register operation.
type OpKind int

// The register operations.
const (
	OpRead OpKind = iota
	OpWrite
	OpCAS
)

// RegInput is a register operation on the file Key: a read, a write of
// Value, or a compare-and-set to Value if the register holds Expect.
//
// The cell's CAS (SetContentsIf) compares content generations, not values;
// the workload turns it into a value CAS by reading (value, generation)
// together and writing only unique values, so each generation of a file
// has exactly one value and "the file is at generation g" is the same as
// "the file holds the value it held at g".
type RegInput struct {
	Kind   OpKind
	Key    string
	Expect string
	Value  string
}

// RegOutput is what an operation returned: a read's value, whether a CAS
// took effect, or that the outcome is unknown (the call failed: it may or
// may not have taken effect).
type RegOutput struct {
	Value   string
	OK      bool
	Unknown bool
}

// CASRegisterModel is porcupine's model of files as registers with read,
// write and compare-and-set, checked one file at a time; every file starts
// as "".
//
// A write or CAS of unknown outcome has no return time (math.MaxInt64), so
// porcupine may place it anywhere after its call — including after every
// other operation, where its effect is invisible; that covers "it never
// took effect", so the model may treat an unknown CAS as taking effect iff
// its comparison holds where it is placed.
var CASRegisterModel = porcupine.Model{
	Partition: linear.PartitionByKey(func(in any) string { return in.(RegInput).Key }),
	Init:      func() any { return "" },
	Step: func(state, input, output any) (bool, any) {
		st, in, out := state.(string), input.(RegInput), output.(RegOutput)
		switch in.Kind {
		case OpRead:
			return out.Value == st, st
		case OpWrite:
			return true, in.Value
		default: // OpCAS
			if out.Unknown {
				if st == in.Expect {
					return true, in.Value
				}
				return true, st
			}
			if out.OK {
				return st == in.Expect, in.Value
			}
			return st != in.Expect, st
		}
	},
	DescribeOperation: func(input, output any) string {
		in, out := input.(RegInput), output.(RegOutput)
		k := in.Key[strings.LastIndexByte(in.Key, '/')+1:]
		res := "ok"
		switch {
		case out.Unknown:
			res = "?"
		case in.Kind == OpCAS && !out.OK:
			res = "mismatch"
		}
		switch in.Kind {
		case OpRead:
			return fmt.Sprintf("read(%s) → %q", k, out.Value)
		case OpWrite:
			return fmt.Sprintf("write(%s, %q) %s", k, in.Value, res)
		default:
			return fmt.Sprintf("cas(%s, %q→%q) %s", k, in.Expect, in.Value, res)
		}
	},
	DescribeState: func(state any) string { return fmt.Sprintf("%q", state) },
	DescribeOperationMetadata: func(info any) string {
		if info == nil {
			return ""
		}
		return fmt.Sprint(info)
	},
}

// RegStats counts a register workload's operations; Last, if made, holds
// per porcupine client id when its last successful operation returned.
type RegStats struct {
	Reads, Writes, CASOK, CASMismatch, Failed atomic.Int64
	// Expired counts workers that stopped because their session expired
	// (Registers.StopOnExpiry).
	Expired atomic.Int64
	Last    []atomic.Int64
}

func (s *RegStats) String() string {
	return fmt.Sprintf("%d reads, %d writes, %d CAS ok, %d CAS mismatch, %d failed (reads dropped, writes/CAS kept as unknown), %d workers stopped by session expiry",
		s.Reads.Load(), s.Writes.Load(), s.CASOK.Load(), s.CASMismatch.Load(), s.Failed.Load(), s.Expired.Load())
}

func (s *RegStats) ok(id int, ret int64) {
	if id < len(s.Last) {
		s.Last[id].Store(ret)
	}
}

// RegClient is a register client: its handles, one per key of the
// workload, through the client's own links to the cell.
type RegClient interface {
	// Handles returns the client's handles; nil if it has none now (its
	// session ended and no new one could be dialled yet).
	Handles() []*client.Handle
}

// Handles is a RegClient whose handles never change.
type Handles []*client.Handle

// Handles returns h.
func (h Handles) Handles() []*client.Handle { return h }

// Registers is the register workload: readers and writers on Keys, each
// recording its operations in Rec for CASRegisterModel.
type Registers struct {
	Keys []string
	// Writable is how many of the keys, from the first, RunWriter writes
	// (0: all); the others are only read.
	Writable int
	Rec      *linear.Recorder
	Stats    *RegStats
	// ReadThink and WriteThink bound the pause after each read and each
	// write or read-then-CAS.
	ReadThink, WriteThink time.Duration
	// StopOnExpiry stops a worker whose session expired: every later call
	// would fail at once (the in-process cell's clients never redial).
	StopOnExpiry bool
}

// RegOpTimeout bounds one register call: longer than any failover, so a
// call that fails is one the cell could not serve.
const RegOpTimeout = 10 * time.Second

// failed counts a failed call and reports whether the worker stops.
func (r *Registers) failed(err error) bool {
	r.Stats.Failed.Add(1)
	if r.StopOnExpiry && errors.Is(err, client.ErrSessionExpired) {
		r.Stats.Expired.Add(1)
		return true
	}
	return false
}

// RunReader reads random keys through c (from its cache when it can) as
// porcupine client id until ctx is done. Failed reads changed nothing and
// are left out of the history.
func (r *Registers) RunReader(ctx context.Context, id int, name string, c RegClient, rng *rand.Rand) {
	for ctx.Err() == nil {
		hs := c.Handles()
		if hs == nil {
			wait.Sleep(ctx, 50*time.Millisecond)
			continue
		}
		k := rng.IntN(len(hs))
		if _, stop := r.read(id, name, hs[k], r.Keys[k]); stop {
			return
		}
		wait.Sleep(ctx, time.Duration(rng.Int64N(int64(r.ReadThink))))
	}
}

// read reads key through h and records it; ok false if it failed.
func (r *Registers) read(id int, name string, h *client.Handle, key string) (st readResult, stop bool) {
	call := r.Rec.Now()
	octx, cancel := context.WithTimeout(context.Background(), RegOpTimeout)
	data, stat, err := h.GetContentsAndStat(octx)
	cancel()
	ret := r.Rec.Now()
	if err != nil {
		return readResult{}, r.failed(err)
	}
	r.Stats.Reads.Add(1)
	r.Stats.ok(id, ret)
	r.Rec.Add(porcupine.Operation{ClientId: id, Input: RegInput{Kind: OpRead, Key: key}, Call: call,
		Output: RegOutput{Value: string(data)}, Return: ret, Metadata: meta(name, nil)})
	return readResult{ok: true, value: string(data), gen: stat.ContentGen}, false
}

type readResult struct {
	ok    bool
	value string
	gen   uint64
}

// RunWriter writes unique values (name-n) to random writable keys through c
// as porcupine client id until ctx is done: half plain writes, half
// read-then-CAS on the content generation read with the value (the read is
// recorded too). A write or CAS that failed is kept with an unknown
// outcome.
func (r *Registers) RunWriter(ctx context.Context, id int, name string, c RegClient, rng *rand.Rand) {
	for n := 0; ctx.Err() == nil; n++ {
		hs := c.Handles()
		if hs == nil {
			wait.Sleep(ctx, 50*time.Millisecond)
			continue
		}
		writable := len(hs)
		if r.Writable > 0 {
			writable = r.Writable
		}
		k := rng.IntN(writable)
		key, v := r.Keys[k], fmt.Sprintf("%s-%d", name, n)
		in, call := RegInput{Kind: OpWrite, Key: key, Value: v}, r.Rec.Now()
		octx, cancel := context.WithTimeout(context.Background(), RegOpTimeout)
		var err error
		if rng.IntN(2) == 0 {
			_, err = hs[k].SetContents(octx, []byte(v))
		} else {
			rd, stop := r.read(id, name, hs[k], key)
			if !rd.ok {
				cancel()
				if stop {
					return
				}
				continue
			}
			in.Kind, in.Expect, call = OpCAS, rd.value, r.Rec.Now()
			_, err = hs[k].SetContentsIf(octx, []byte(v), rd.gen)
		}
		cancel()
		out, ret := RegOutput{OK: true}, r.Rec.Now()
		switch {
		case err == nil && in.Kind == OpWrite:
			r.Stats.Writes.Add(1)
			r.Stats.ok(id, ret)
		case err == nil:
			r.Stats.CASOK.Add(1)
			r.Stats.ok(id, ret)
		case in.Kind == OpCAS && errors.Is(err, client.ErrCASMismatch):
			r.Stats.CASMismatch.Add(1)
			r.Stats.ok(id, ret)
			out.OK, err = false, nil
		default:
			out, ret = RegOutput{Unknown: true}, math.MaxInt64
		}
		r.Rec.Add(porcupine.Operation{ClientId: id, Input: in, Call: call, Output: out, Return: ret, Metadata: meta(name, err)})
		if err != nil && r.failed(err) {
			return
		}
		wait.Sleep(ctx, time.Duration(rng.Int64N(int64(r.WriteThink))))
	}
}

// meta is an operation's note for the visualization: the client's name,
// and why its outcome is unknown.
func meta(name string, err error) any {
	switch {
	case err != nil && name != "":
		return name + ": outcome unknown: " + err.Error()
	case err != nil:
		return "outcome unknown: " + err.Error()
	case name != "":
		return name
	}
	return nil
}
