package nemesis

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

// RegisterStats counts a register workload's operations.
type RegisterStats struct {
	Reads, Writes, CASOK, CASMismatch, Failed atomic.Int64
	// Expired counts workers that stopped because their session expired
	// (the cell was unreachable for longer than its TTL and grace).
	Expired atomic.Int64
}

func (s *RegisterStats) String() string {
	return fmt.Sprintf("%d reads, %d writes, %d CAS ok, %d CAS mismatch, %d failed (reads dropped, writes/CAS kept as unknown), %d workers stopped by session expiry",
		s.Reads.Load(), s.Writes.Load(), s.CASOK.Load(), s.CASMismatch.Load(), s.Failed.Load(), s.Expired.Load())
}

// expired stops a worker whose session is gone: every later call would
// fail at once (and a write would be one more of unknown outcome).
func expired(err error, st *RegisterStats) bool {
	if errors.Is(err, client.ErrSessionExpired) {
		st.Expired.Add(1)
		return true
	}
	return false
}

// regOpTimeout bounds one register call: longer than any failover, so a
// call that fails is one the cell could not serve.
const regOpTimeout = 10 * time.Second

// RunReader reads random keys through hs (one per key, same order) as
// porcupine client id until stop is closed.
func RunReader(id int, keys []string, hs []*client.Handle, rng *rand.Rand, rec *linear.Recorder, st *RegisterStats, stop <-chan struct{}) {
	for !stopped(stop) {
		k := rng.IntN(len(keys))
		call := rec.Now()
		ctx, cancel := context.WithTimeout(context.Background(), regOpTimeout)
		data, _, err := hs[k].GetContentsAndStat(ctx)
		cancel()
		ret := rec.Now()
		if err != nil {
			st.Failed.Add(1) // a failed read changed nothing: left out
			if expired(err, st) {
				return
			}
		} else {
			st.Reads.Add(1)
			rec.Add(porcupine.Operation{ClientId: id, Input: RegInput{Kind: OpRead, Key: keys[k]}, Call: call,
				Output: RegOutput{Value: string(data)}, Return: ret})
		}
		time.Sleep(time.Duration(rng.Int64N(int64(2 * time.Millisecond))))
	}
}

// RunWriter writes unique values to random keys as porcupine client id
// until stop is closed: half plain writes, half read-then-CAS (the read is
// recorded too).
func RunWriter(id int, keys []string, hs []*client.Handle, rng *rand.Rand, rec *linear.Recorder, st *RegisterStats, stop <-chan struct{}) {
	for n := 0; !stopped(stop); n++ {
		k := rng.IntN(len(keys))
		v := fmt.Sprintf("c%d-%d", id, n)
		if rng.IntN(2) == 0 {
			call := rec.Now()
			ctx, cancel := context.WithTimeout(context.Background(), regOpTimeout)
			_, err := hs[k].SetContents(ctx, []byte(v))
			cancel()
			out, ret := RegOutput{OK: true}, rec.Now()
			if err != nil {
				st.Failed.Add(1)
				out, ret = RegOutput{Unknown: true}, math.MaxInt64
			} else {
				st.Writes.Add(1)
			}
			rec.Add(porcupine.Operation{ClientId: id, Input: RegInput{Kind: OpWrite, Key: keys[k], Value: v}, Call: call, Output: out, Return: ret, Metadata: errMeta(err)})
			if expired(err, st) {
				return
			}
		} else {
			call := rec.Now()
			ctx, cancel := context.WithTimeout(context.Background(), regOpTimeout)
			data, stat, err := hs[k].GetContentsAndStat(ctx)
			cancel()
			if err != nil {
				st.Failed.Add(1)
				if expired(err, st) {
					return
				}
				continue
			}
			st.Reads.Add(1)
			rec.Add(porcupine.Operation{ClientId: id, Input: RegInput{Kind: OpRead, Key: keys[k]}, Call: call,
				Output: RegOutput{Value: string(data)}, Return: rec.Now()})
			call = rec.Now()
			ctx, cancel = context.WithTimeout(context.Background(), regOpTimeout)
			_, err = hs[k].SetContentsIf(ctx, []byte(v), stat.ContentGen)
			cancel()
			out, ret := RegOutput{OK: true}, rec.Now()
			switch {
			case err == nil:
				st.CASOK.Add(1)
			case errors.Is(err, client.ErrCASMismatch):
				st.CASMismatch.Add(1)
				out.OK = false
			default:
				st.Failed.Add(1)
				out, ret = RegOutput{Unknown: true}, math.MaxInt64
			}
			rec.Add(porcupine.Operation{ClientId: id, Input: RegInput{Kind: OpCAS, Key: keys[k], Expect: string(data), Value: v},
				Call: call, Output: out, Return: ret, Metadata: unknownMeta(out, err)})
			if expired(err, st) {
				return
			}
		}
		time.Sleep(time.Duration(rng.Int64N(int64(10 * time.Millisecond))))
	}
}

func unknownMeta(out RegOutput, err error) any {
	if !out.Unknown {
		return nil
	}
	return errMeta(err)
}

func errMeta(err error) any {
	if err == nil {
		return nil
	}
	return "outcome unknown: " + err.Error()
}

func stopped(stop <-chan struct{}) bool {
	select {
	case <-stop:
		return true
	default:
		return false
	}
}
