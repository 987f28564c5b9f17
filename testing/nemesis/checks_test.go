package nemesis

import (
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
)

// TestScheduleFromSeed: a seed gives one schedule, which keeps its bounds
// and composition rules, overlaps faults, and seeds between them draw every
// kind of fault.
func TestScheduleFromSeed(t *testing.T) {
	b := bounds(30*time.Second+settle, 3, false)
	seen := map[Kind]bool{}
	overlaps := 0
	for seed := uint64(0); seed < 20; seed++ {
		s := NewSchedule(seed, b)
		if !reflect.DeepEqual(s, NewSchedule(seed, b)) {
			t.Fatalf("seed %d: two different schedules", seed)
		}
		if len(s.Steps) == 0 {
			t.Fatalf("seed %d: no step", seed)
		}
		for i, st := range s.Steps {
			seen[st.Kind] = true
			if st.End() > b.Duration || st.Hold <= 0 {
				t.Fatalf("seed %d: step %s ends after %v", seed, st, b.Duration)
			}
			if i > 0 && st.At < s.Steps[i-1].At {
				t.Fatalf("seed %d: steps out of order", seed)
			}
			switch st.Kind {
			case PauseHolder:
				if st.Hold < b.PauseMin || st.Hold > b.PauseMax {
					t.Fatalf("seed %d: pause-holder held %v, outside [%v, %v]", seed, st.Hold, b.PauseMin, b.PauseMax)
				}
			case ServerDrift, ClientDrift:
				if d := math.Abs(st.Rate - 1); d > b.MaxDrift || d == 0 {
					t.Fatalf("seed %d: drift rate %v, bound ±%v", seed, st.Rate, b.MaxDrift)
				}
			case ClientClockJump:
				if st.Jump <= 0 || st.Jump > b.RegJumpMax || st.Target < b.LockClients && st.Jump > b.LockJumpMax {
					t.Fatalf("seed %d: client jump %s", seed, st)
				}
			case ServerClockJump:
				if st.Hold > b.MaxStall {
					t.Fatalf("seed %d: stall of %v, bound %v", seed, st.Hold, b.MaxStall)
				}
				fallthrough
			case KillRestart, ServerPause, SlowDisk:
				if st.Target < 0 || st.Target >= 2*b.Servers {
					t.Fatalf("seed %d: target of %s", seed, st)
				}
			case OneWayLink:
				if st.Target == st.Peer {
					t.Fatalf("seed %d: %s", seed, st)
				}
			}
			for _, o := range s.Steps[i+1:] {
				if o.At >= st.End() {
					continue
				}
				overlaps++
				if o.Kind == st.Kind {
					t.Fatalf("seed %d: two %s active at once: %s and %s", seed, st.Kind, st, o)
				}
				if o.Kind.down() && st.Kind.down() {
					t.Fatalf("seed %d: two servers down at once: %s and %s", seed, st, o)
				}
			}
		}
		if !strings.Contains(s.String(), "CHUBBY_NEMESIS_SEED=") {
			t.Fatalf("the schedule does not say how to replay it: %s", s)
		}
	}
	for k := Kind(0); k < numKinds; k++ {
		if !seen[k] {
			t.Errorf("no schedule of 20 seeds drew %s", k)
		}
	}
	if overlaps == 0 {
		t.Error("no two faults of 20 schedules overlap")
	}
	if NewSchedule(1, b).String() == NewSchedule(2, b).String() {
		t.Errorf("seeds 1 and 2 drew the same schedule")
	}
}

// TestShortPlanDrawsEveryKind: the schedules of `go test`'s fixed seeds
// draw every kind of fault between them.
func TestShortPlanDrawsEveryKind(t *testing.T) {
	got := map[Kind]int{}
	for _, seed := range shortSeeds {
		for k, n := range NewSchedule(seed, bounds(shortDuration, 3, false)).Kinds() {
			got[k] += n
		}
	}
	for k := Kind(0); k < numKinds; k++ {
		if got[k] == 0 {
			t.Errorf("the short plan (seeds %v) draws no %s", shortSeeds, k)
		}
	}
	t.Logf("short plan: %s", countString(got))
}

func rop(client int, in RegInput, out RegOutput, call, ret int64) porcupine.Operation {
	return porcupine.Operation{ClientId: client, Input: in, Output: out, Call: call, Return: ret}
}

// TestCASRegisterModel: the model accepts the outcomes a linearizable cell
// may give and rejects the others.
func TestCASRegisterModel(t *testing.T) {
	const k = "/ls/local/k"
	rd := func(v string) (RegInput, RegOutput) { return RegInput{Kind: OpRead, Key: k}, RegOutput{Value: v} }
	wr := func(v string) (RegInput, RegOutput) {
		return RegInput{Kind: OpWrite, Key: k, Value: v}, RegOutput{OK: true}
	}
	cas := func(exp, v string, ok bool) (RegInput, RegOutput) {
		return RegInput{Kind: OpCAS, Key: k, Expect: exp, Value: v}, RegOutput{OK: ok}
	}
	cases := []struct {
		name string
		ok   bool
		ops  []porcupine.Operation
	}{
		{"cas on the current value", true, []porcupine.Operation{
			o2(0, wr, "a", 0, 1), o2c(0, cas, "a", "b", true, 2, 3), o2(1, rd, "b", 4, 5)}},
		{"cas succeeding on a stale value", false, []porcupine.Operation{
			o2(0, wr, "a", 0, 1), o2(1, wr, "b", 2, 3), o2c(0, cas, "a", "c", true, 4, 5)}},
		{"cas mismatch on the current value", false, []porcupine.Operation{
			o2(0, wr, "a", 0, 1), o2c(0, cas, "a", "c", false, 4, 5)}},
		{"cas mismatch after a concurrent write", true, []porcupine.Operation{
			o2(0, wr, "a", 0, 1), o2(1, wr, "b", 2, 10), o2c(0, cas, "a", "c", false, 4, 5)}},
		{"unknown cas may apply", true, []porcupine.Operation{
			o2(0, wr, "a", 0, 1), unkCAS(0, "a", "b", 2), o2(1, rd, "b", 10, 11)}},
		{"unknown cas may not apply", true, []porcupine.Operation{
			o2(0, wr, "a", 0, 1), unkCAS(0, "a", "b", 2), o2(1, rd, "a", 10, 11)}},
		{"unknown cas on another value cannot apply", false, []porcupine.Operation{
			o2(0, wr, "a", 0, 1), unkCAS(0, "x", "b", 2), o2(1, rd, "b", 10, 11)}},
		{"stale read", false, []porcupine.Operation{
			o2(0, wr, "a", 0, 1), o2(0, wr, "b", 2, 3), o2(1, rd, "a", 4, 5)}},
	}
	for _, tc := range cases {
		if got := porcupine.CheckOperations(CASRegisterModel, tc.ops); got != tc.ok {
			t.Errorf("%s: linearizable=%v, want %v", tc.name, got, tc.ok)
		}
	}
}

func o2(c int, f func(string) (RegInput, RegOutput), v string, call, ret int64) porcupine.Operation {
	in, out := f(v)
	return rop(c, in, out, call, ret)
}

func o2c(c int, f func(string, string, bool) (RegInput, RegOutput), exp, v string, ok bool, call, ret int64) porcupine.Operation {
	in, out := f(exp, v, ok)
	return rop(c, in, out, call, ret)
}

func unkCAS(c int, exp, v string, call int64) porcupine.Operation {
	in := RegInput{Kind: OpCAS, Key: "/ls/local/k", Expect: exp, Value: v}
	return rop(c, in, RegOutput{Unknown: true}, call, math.MaxInt64)
}

// TestCheckLocks: the fencing checker accepts a correct history and names
// each kind of violation.
func TestCheckLocks(t *testing.T) {
	hold := func(id, cl int, gen uint64, acqCall, acqRet, rel int64, relOK bool) Hold {
		return Hold{ID: id, Client: cl, Gen: gen, AcqCall: acqCall, AcqReturn: acqRet, RelCall: rel, RelOK: relOK}
	}
	rd := func(h int, gen uint64, v int) StoreOp { return StoreOp{Hold: h, Gen: gen, Value: v} }
	wr := func(h int, gen uint64, v int) StoreOp { return StoreOp{Hold: h, Gen: gen, Write: true, Value: v} }
	good := []Hold{hold(1, 0, 10, 0, 1, 2, true), hold(2, 1, 12, 1, 3, 4, true), hold(3, 2, 15, 2, 5, 6, false)}
	goodOps := []StoreOp{rd(1, 10, 0), wr(1, 10, 1), rd(2, 12, 1), wr(2, 12, 2), rd(3, 15, 2), wr(3, 15, 3)}
	if bad := CheckLocks(good, goodOps, 3); len(bad) != 0 {
		t.Fatalf("a correct history: %v", bad)
	}
	for _, tc := range []struct {
		name  string
		holds []Hold
		ops   []StoreOp
		final int
		want  string
	}{
		{"same generation twice", []Hold{hold(1, 0, 10, 0, 1, 2, true), hold(2, 1, 10, 3, 4, 5, true)}, nil, 0, "both got generation 10"},
		{"store admitted an older generation", good[:2], []StoreOp{rd(2, 12, 0), rd(1, 10, 0)}, 0, "admitted generation 10 after generation 12"},
		{"lost increment", good[:2], []StoreOp{rd(1, 10, 0), rd(2, 12, 0), wr(2, 12, 1), wr(1, 10, 1)}, 1, "does not follow"},
		{"counter disagrees", good[:1], []StoreOp{rd(1, 10, 0), wr(1, 10, 1)}, 2, "final counter 2"},
		{"generation went back", []Hold{hold(1, 0, 12, 0, 1, 2, false), hold(2, 1, 11, 3, 4, 5, false)}, nil, 0, "acquired generation 11 after"},
		{"two confirmed holders", []Hold{hold(1, 0, 10, 0, 1, 9, true), hold(2, 1, 12, 0, 5, 20, true)}, nil, 0, "two holders"},
	} {
		bad := CheckLocks(tc.holds, tc.ops, tc.final)
		if !strings.Contains(strings.Join(bad, "\n"), tc.want) {
			t.Errorf("%s: violations %q, want one containing %q", tc.name, bad, tc.want)
		}
	}
	// A client whose Release timed out is granted, by its next Acquire, the
	// hold its session still had: one hold, not two holders.
	again := []Hold{hold(1, 0, 10, 0, 1, 2, false), hold(3, 0, 10, 3, 4, 5, true), hold(4, 1, 12, 5, 6, 7, true)}
	againOps := []StoreOp{rd(1, 10, 0), wr(1, 10, 1), rd(3, 10, 1), wr(3, 10, 2), rd(4, 12, 2), wr(4, 12, 3)}
	if bad := CheckLocks(again, againOps, 3); len(bad) != 0 {
		t.Errorf("a hold granted again after a failed release: %v", bad)
	}
	// Not when the release succeeded, nor for another client.
	again[0].RelOK = true
	if bad := CheckLocks(again, againOps, 3); !strings.Contains(strings.Join(bad, "\n"), "both got generation 10") {
		t.Errorf("generation 10 granted again after a successful release: violations %q", bad)
	}
	again[0].RelOK, again[1].Client = false, 2
	if bad := CheckLocks(again, againOps, 3); !strings.Contains(strings.Join(bad, "\n"), "both got generation 10") {
		t.Errorf("generation 10 granted to another client: violations %q", bad)
	}
	// A superseded holder whose release failed may overlap the next one.
	if bad := CheckLocks([]Hold{hold(1, 0, 10, 0, 1, 9, false), hold(2, 1, 12, 0, 5, 20, true)}, nil, 0); len(bad) != 0 {
		t.Errorf("an expired holder overlapping its successor: %v", bad)
	}
}
