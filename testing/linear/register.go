package linear

import (
	"fmt"
	"math"
	"os"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
)

// Input is a register operation: a read, or a write of Value, on the
// register Key (a file path).
type Input struct {
	Key   string
	Write bool
	Value string
}

// Read is the input of a read of key.
func Read(key string) Input { return Input{Key: key} }

// Write is the input of a write of value to key.
func Write(key, value string) Input { return Input{Key: key, Write: true, Value: value} }

// Output is what a read returned (ignored for writes).
type Output struct {
	Value string
}

// RegisterModel is porcupine's model of files used as registers, checked
// one file at a time. Every register starts as "" (the test creates the
// files empty before it starts recording).
var RegisterModel = porcupine.Model{
	Partition: PartitionByKey(func(in any) string { return in.(Input).Key }),
	Init:      func() any { return "" },
	Step: func(state, input, output any) (bool, any) {
		in := input.(Input)
		if in.Write {
			return true, in.Value
		}
		return output.(Output).Value == state.(string), state
	},
	DescribeOperation: func(input, output any) string {
		in := input.(Input)
		if in.Write {
			return fmt.Sprintf("write(%s, %q)", short(in.Key), in.Value)
		}
		return fmt.Sprintf("read(%s) → %q", short(in.Key), output.(Output).Value)
	},
	DescribeState: func(state any) string { return fmt.Sprintf("%q", state) },
	DescribeOperationMetadata: func(info any) string {
		if info == nil {
			return ""
		}
		return fmt.Sprint(info)
	},
}

func short(path string) string { return path[strings.LastIndexByte(path, '/')+1:] }

// Recorder collects the operations of a test run from any goroutine. Times
// are nanoseconds since NewRecorder on the monotonic clock (or what the
// clock given to NewRecorderClock says).
type Recorder struct {
	now   func() int64
	mu    sync.Mutex
	ops   []porcupine.Operation
	notes []porcupine.Annotation
}

// NewRecorder starts a history at time zero.
func NewRecorder() *Recorder {
	start := time.Now()
	return NewRecorderClock(func() int64 { return int64(time.Since(start)) })
}

// NewRecorderClock starts a history whose times are what now returns
// (nanoseconds, never going back): for histories that merge operations
// timed in other processes on a clock they share.
func NewRecorderClock(now func() int64) *Recorder { return &Recorder{now: now} }

// Now is the recorder's current time.
func (r *Recorder) Now() int64 { return r.now() }

// begun is the call of an operation under way with input type I: the
// recorder it goes to, the client that made it, its input and its time.
type begun[I any] struct {
	r      *Recorder
	client int
	in     I
	call   int64
}

func begin[I any](r *Recorder, client int, in I) begun[I] {
	return begun[I]{r: r, client: client, in: in, call: r.Now()}
}

// Op is an operation under way.
type Op struct{ begun[Input] }

// Begin notes the call of an operation by client (a porcupine client id:
// one per goroutine that runs operations one at a time, from 0).
func (r *Recorder) Begin(client int, in Input) *Op {
	return &Op{begin(r, client, in)}
}

// Read notes the return of a read with its value. A failed read changed
// nothing and is left out of the history.
func (o *Op) Read(value string, err error, meta any) {
	ret := o.r.Now()
	if err != nil {
		return
	}
	o.r.Add(porcupine.Operation{ClientId: o.client, Input: o.in, Call: o.call, Output: Output{value}, Return: ret, Metadata: meta})
}

// Wrote notes the return of a write. A failed write may or may not have
// taken effect: it is kept with no return time (it may be linearized any
// time after its call).
func (o *Op) Wrote(err error) {
	ret := o.r.Now()
	meta := any(nil)
	if err != nil {
		ret, meta = math.MaxInt64, fmt.Sprintf("outcome unknown: %v", err)
	}
	o.r.Add(porcupine.Operation{ClientId: o.client, Input: o.in, Call: o.call, Output: Output{}, Return: ret, Metadata: meta})
}

// Add records an operation built by the caller.
func (r *Recorder) Add(op porcupine.Operation) {
	r.mu.Lock()
	r.ops = append(r.ops, op)
	r.mu.Unlock()
}

// Note adds an annotation (a fault injected, a failover seen) to the
// visualization, on its own row named tag.
func (r *Recorder) Note(tag, what string, start, end int64) {
	r.mu.Lock()
	r.notes = append(r.notes, porcupine.Annotation{Tag: tag, Start: start, End: end, Description: what})
	r.mu.Unlock()
}

// History returns the operations recorded so far.
func (r *Recorder) History() []porcupine.Operation {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]porcupine.Operation(nil), r.ops...)
}

// Annotations returns the notes recorded so far.
func (r *Recorder) Annotations() []porcupine.Annotation {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]porcupine.Annotation(nil), r.notes...)
}

// CheckTimeout bounds porcupine's search.
const CheckTimeout = 5 * time.Minute

// Check fails t unless history is linearizable under model. On a violation
// (or if porcupine cannot decide within CheckTimeout) it writes porcupine's
// visualization to a file in the system's temporary directory (kept after
// the test) and logs the operations around the first one that could not be
// linearized.
func Check(t testing.TB, model porcupine.Model, history []porcupine.Operation, notes ...porcupine.Annotation) {
	t.Helper()
	start := time.Now()
	res, info := porcupine.CheckOperationsVerbose(model, history, CheckTimeout)
	t.Logf("porcupine: %d operations checked in %v: %s", len(history), time.Since(start).Round(time.Millisecond), res)
	if res == porcupine.Ok {
		return
	}
	info.AddAnnotations(notes)
	name := strings.NewReplacer("/", "_", " ", "_").Replace(t.Name())
	f, err := os.CreateTemp("", "chubby-linear-"+name+"-*.html")
	if err == nil {
		err = porcupine.Visualize(model, info, f)
		f.Close()
	}
	if err != nil {
		t.Logf("could not write the visualization: %v", err)
	} else {
		t.Logf("porcupine visualization: %s", f.Name())
	}
	t.Log(Window(model, history, info))
	if res == porcupine.Unknown {
		t.Fatalf("porcupine could not decide within %v whether the history of %d operations is linearizable", CheckTimeout, len(history))
	}
	t.Fatalf("the history of %d operations is not linearizable", len(history))
}

// Window describes the part of a history where linearization failed: for
// each partition that porcupine could not linearize completely, the last
// operations of its longest partial linearization and the operations
// called around the first one it could not place.
func Window(model porcupine.Model, history []porcupine.Operation, info porcupine.LinearizationInfo) string {
	parts := model.Partition(history)
	lins := info.PartialLinearizationsOperations()
	var b strings.Builder
	for p, part := range parts {
		if p >= len(lins) {
			break
		}
		var longest []porcupine.Operation
		for _, l := range lins[p] {
			if len(l) > len(longest) {
				longest = l
			}
		}
		if len(longest) == len(part) {
			continue // this partition is linearizable
		}
		// Operations are comparable: their inputs, outputs and metadata
		// are strings and structs of strings.
		placed := map[porcupine.Operation]bool{}
		for _, op := range longest {
			placed[op] = true
		}
		ops := append([]porcupine.Operation(nil), part...)
		sort.Slice(ops, func(i, j int) bool { return ops[i].Call < ops[j].Call })
		first := -1 // the first operation, by call time, left out of the linearization
		for i, op := range ops {
			if !placed[op] {
				first = i
				break
			}
		}
		fmt.Fprintf(&b, "\npartition %d (%d operations): %d linearized at most; ", p, len(part), len(longest))
		fmt.Fprintf(&b, "the last ones linearized:\n")
		for _, op := range longest[max(0, len(longest)-8):] {
			fmt.Fprintf(&b, "  %s\n", describe(model, op))
		}
		if first >= 0 {
			fmt.Fprintf(&b, "operations called around the first one left out (marked >):\n")
			for i := max(0, first-10); i < min(len(ops), first+10); i++ {
				mark := " "
				if i == first {
					mark = ">"
				}
				fmt.Fprintf(&b, "%s %s\n", mark, describe(model, ops[i]))
			}
		}
	}
	return b.String()
}

func describe(model porcupine.Model, op porcupine.Operation) string {
	ret := "…"
	if op.Return != math.MaxInt64 {
		ret = fmt.Sprintf("%.3fms", float64(op.Return)/1e6)
	}
	s := fmt.Sprintf("client %d [%.3fms, %s] %s", op.ClientId, float64(op.Call)/1e6, ret, model.DescribeOperation(op.Input, op.Output))
	if op.Metadata != nil {
		s += " (" + model.DescribeOperationMetadata(op.Metadata) + ")"
	}
	return s
}

// PartitionByKey returns a porcupine Partition function that checks each
// key's operations on their own (in key order); key extracts an
// operation's key from its input.
func PartitionByKey(key func(input any) string) func([]porcupine.Operation) [][]porcupine.Operation {
	return func(history []porcupine.Operation) [][]porcupine.Operation {
		byKey := map[string][]porcupine.Operation{}
		var keys []string
		for _, op := range history {
			k := key(op.Input)
			if _, ok := byKey[k]; !ok {
				keys = append(keys, k)
			}
			byKey[k] = append(byKey[k], op)
		}
		sort.Strings(keys)
		out := make([][]porcupine.Operation, 0, len(keys))
		for _, k := range keys {
			out = append(out, byKey[k])
		}
		return out
	}
}
