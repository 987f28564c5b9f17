package core

import (
	"math"
	"strings"
	"testing"

	"github.com/anishathalye/porcupine"

	"github.com/chubby-dev/chubby/testing/linear"
)

func hold(w, id int, session, gen uint64, acqCall, acqRet, rel int64, relOK bool) Hold {
	return Hold{Worker: w, ID: id, Session: session, Gen: gen, AcqCall: acqCall, AcqRet: acqRet, RelCall: rel, RelOK: relOK}
}

func rd(w, h int, gen uint64, v int) StoreOp {
	return StoreOp{Worker: w, Hold: h, Gen: gen, Value: v}
}
func wr(w, h int, gen uint64, v int) StoreOp {
	return StoreOp{Worker: w, Hold: h, Gen: gen, Write: true, Value: v}
}

// TestCheckFencing: the checker accepts a correct history (with a
// re-acquisition after a failed release) and names each kind of violation.
func TestCheckFencing(t *testing.T) {
	good := []Hold{
		hold(0, 1, 100, 10, 0, 1, 2, true),
		hold(1, 1, 200, 12, 1, 3, 4, false), // release failed: the session kept it
		hold(1, 2, 200, 12, 5, 6, 7, true),  // and Acquire gave it back
		hold(2, 1, 300, 15, 2, 8, 9, false),
	}
	goodOps := []StoreOp{rd(0, 1, 10, 0), wr(0, 1, 10, 1), rd(1, 1, 12, 1), wr(1, 1, 12, 2), rd(1, 2, 12, 2), wr(1, 2, 12, 3), rd(2, 1, 15, 3), wr(2, 1, 15, 4)}
	if bad := CheckFencing(good, goodOps, 4); len(bad) != 0 {
		t.Fatalf("a correct history: %v", bad)
	}
	for _, tc := range []struct {
		name  string
		holds []Hold
		ops   []StoreOp
		final int
		want  string
	}{
		{"one generation, two sessions", []Hold{hold(0, 1, 1, 10, 0, 1, 2, false), hold(1, 1, 2, 10, 3, 4, 5, false)}, nil, 0, "two sessions"},
		{"generation reused after its release", []Hold{hold(0, 1, 1, 10, 0, 1, 2, true), hold(0, 2, 1, 10, 3, 4, 5, false)}, nil, 0, "again after"},
		{"stale sequencer admitted", good, []StoreOp{rd(1, 1, 12, 0), rd(0, 1, 10, 0)}, 0, "stale sequencer admitted"},
		{"operation of no hold", good, []StoreOp{rd(5, 1, 10, 0)}, 0, "no successful Acquire"},
		{"wrong generation for its hold", good, []StoreOp{rd(0, 1, 11, 0)}, 0, "carried generation 11"},
		{"lost increment", good, []StoreOp{rd(0, 1, 10, 0), rd(1, 1, 12, 0), wr(1, 1, 12, 1), wr(0, 1, 10, 1)}, 2, "does not follow"},
		{"repeated increment", good, []StoreOp{rd(0, 1, 10, 0), wr(0, 1, 10, 1), rd(1, 1, 12, 0), wr(1, 1, 12, 1)}, 1, "lost or repeated"},
		{"counter disagrees", good, []StoreOp{rd(0, 1, 10, 0), wr(0, 1, 10, 1)}, 2, "final counter 2"},
		{"generation went back", []Hold{hold(0, 1, 1, 12, 0, 1, 2, false), hold(1, 1, 2, 11, 3, 4, 5, false)}, nil, 0, "generations went back"},
		{"two confirmed holders", []Hold{hold(0, 1, 1, 10, 0, 1, 9, true), hold(1, 1, 2, 12, 0, 5, 20, true)}, nil, 0, "two holders"},
	} {
		bad := CheckFencing(tc.holds, tc.ops, tc.final)
		if !strings.Contains(strings.Join(bad, "\n"), tc.want) {
			t.Errorf("%s: violations %q, want one containing %q", tc.name, bad, tc.want)
		}
	}
	// A superseded holder whose release failed may overlap its successor.
	if bad := CheckFencing([]Hold{hold(0, 1, 1, 10, 0, 1, 9, false), hold(1, 1, 2, 12, 0, 5, 20, true)}, nil, 0); len(bad) != 0 {
		t.Errorf("an expired holder overlapping its successor: %v", bad)
	}
}

func TestHoldsFrom(t *testing.T) {
	evs := []Event{
		{Ev: "acq", Worker: 0, Hold: 1, Session: 7, Gen: 3, Call: 100, Ret: 110, OK: true},
		{Ev: "acq", Worker: 1, Hold: 1, Session: 8, Call: 105, Ret: 200, Err: "timeout"},
		{Ev: "read", Worker: 0, Hold: 1, Gen: 3, Call: 111, Ret: 112, OK: true},
		{Ev: "rel", Worker: 0, Hold: 1, Gen: 3, Call: 120, Ret: 130, OK: true},
		{Ev: "acq", Worker: 0, Hold: 2, Session: 7, Gen: 5, Call: 140, Ret: 150, OK: true},
	}
	got := HoldsFrom(evs, func(t int64) int64 { return t - 100 })
	want := []Hold{
		{Worker: 0, ID: 1, Session: 7, Gen: 3, AcqCall: 0, AcqRet: 10, RelCall: 20, RelOK: true},
		{Worker: 0, ID: 2, Session: 7, Gen: 5, AcqCall: 40, AcqRet: 50, RelCall: math.MaxInt64},
	}
	if len(got) != len(want) {
		t.Fatalf("holds %+v", got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("hold %d: %+v, want %+v", i, got[i], want[i])
		}
	}
}

// TestLockHistory: the workers' events become a LockModel history that
// porcupine accepts when the cell behaved, and rejects when a sequencer
// check saw a superseded generation valid.
func TestLockHistory(t *testing.T) {
	const lock = "/ls/local/counter-lock"
	id := func(x int64) int64 { return x }
	evs := []Event{
		{Ev: "acq", Worker: 0, Hold: 1, Session: 7, Gen: 3, Call: 0, Ret: 10, OK: true},
		{Ev: "acq", Worker: 1, Hold: 1, Session: 8, Call: 5, Ret: 60, Err: "context deadline exceeded", Cancelled: true},
		{Ev: "check", Worker: 0, Hold: 1, Session: 7, Gen: 3, Call: 11, Ret: 12, OK: true},
		{Ev: "rel", Worker: 0, Hold: 1, Session: 7, Gen: 3, Call: 20, Ret: 30, Err: "timeout"},
		{Ev: "lost", Worker: 0, Session: 7, Call: 0, Ret: 70},
		{Ev: "acq", Worker: 2, Hold: 1, Session: 9, Gen: 5, Call: 80, Ret: 90, OK: true},
		{Ev: "rel", Worker: 2, Hold: 1, Session: 9, Gen: 5, Call: 91, Ret: 95, Err: "not held", NotHeld: true},
	}
	h := LockHistory(evs, lock, id)
	kinds := map[linear.LockKind]int{}
	unknown := 0
	for _, op := range h {
		kind := op.Input.(linear.LockInput).Kind
		kinds[kind]++
		if kind != linear.LockLost && op.Output.(linear.LockOutput).Unknown {
			unknown++
			if op.Return != math.MaxInt64 {
				t.Errorf("an unknown outcome with a return time: %+v", op)
			}
		}
	}
	// The cancelled acquire adds an unknown release; the failed release is
	// unknown; not-held is a definite failure.
	if kinds[linear.LockAcquire] != 3 || kinds[linear.LockRelease] != 3 || kinds[linear.LockCheck] != 1 || kinds[linear.LockLost] != 1 || unknown != 3 {
		t.Fatalf("kinds %v, %d unknown: %+v", kinds, unknown, h)
	}
	if !porcupine.CheckOperations(linear.LockModel, h) {
		t.Fatalf("a correct lock history is not linearizable: %+v", h)
	}
	stale := append(h, LockHistory([]Event{{Ev: "check", Worker: 1, Hold: 2, Session: 8, Gen: 3, Call: 100, Ret: 101, OK: true}}, lock, id)...)
	if porcupine.CheckOperations(linear.LockModel, stale) {
		t.Fatalf("a superseded generation checked valid after its successor was granted passes")
	}
}

// TestCheckCellFencing: a fenced write the cell acknowledged after a
// greater generation was granted is a violation; one acknowledged before,
// or refused, is not.
func TestCheckCellFencing(t *testing.T) {
	holds := []Hold{hold(0, 1, 1, 10, 0, 10, 50, false), hold(1, 1, 2, 12, 20, 30, 60, true)}
	ok := []CellWrite{
		{Worker: 0, Hold: 1, Gen: 10, Call: 25, Ret: 40, OK: true},     // called before gen 12 was granted
		{Worker: 0, Hold: 1, Gen: 10, Call: 45, Ret: 46, BadSeq: true}, // refused
		{Worker: 1, Hold: 1, Gen: 12, Call: 35, Ret: 36, OK: true},
	}
	if bad := CheckCellFencing(holds, ok); len(bad) != 0 {
		t.Fatalf("a correct history: %v", bad)
	}
	stale := append(ok, CellWrite{Worker: 0, Hold: 1, Gen: 10, Data: "x", Call: 31, Ret: 32, OK: true})
	if bad := CheckCellFencing(holds, stale); len(bad) != 1 || !strings.Contains(bad[0], "stale fenced write committed") {
		t.Fatalf("a stale fenced write committed: %v", bad)
	}
	evs := []Event{{Ev: "cwrite", Worker: 2, Hold: 3, Gen: 7, Data: "d", Call: 100, Ret: 110, OK: true}, {Ev: "write", Worker: 2, Hold: 3}}
	if got := CellWritesFrom(evs, func(x int64) int64 { return x - 100 }); len(got) != 1 || got[0] != (CellWrite{Worker: 2, Hold: 3, Gen: 7, Data: "d", Call: 0, Ret: 10, OK: true}) {
		t.Fatalf("CellWritesFrom: %+v", got)
	}
}

// TestCheckFencingOneHoldAgain: the cases of a hold granted again. A
// client whose Release timed out is granted, by its next Acquire, the hold
// its session still had: one hold, not two holders — but not when the
// release succeeded, nor for another session.
func TestCheckFencingOneHoldAgain(t *testing.T) {
	again := []Hold{hold(0, 1, 100, 10, 0, 1, 2, false), hold(0, 3, 100, 10, 3, 4, 5, true), hold(1, 4, 101, 12, 5, 6, 7, true)}
	againOps := []StoreOp{rd(0, 1, 10, 0), wr(0, 1, 10, 1), rd(0, 3, 10, 1), wr(0, 3, 10, 2), rd(1, 4, 12, 2), wr(1, 4, 12, 3)}
	if bad := CheckFencing(again, againOps, 3); len(bad) != 0 {
		t.Errorf("a hold granted again after a failed release: %v", bad)
	}
	again[0].RelOK = true
	if bad := CheckFencing(again, againOps, 3); !strings.Contains(strings.Join(bad, "\n"), "again after") {
		t.Errorf("generation 10 granted again after a successful release: violations %q", bad)
	}
	again[0].RelOK, again[1].Session = false, 102
	if bad := CheckFencing(again, againOps, 3); !strings.Contains(strings.Join(bad, "\n"), "two sessions") {
		t.Errorf("generation 10 granted to another session: violations %q", bad)
	}
	// Store operations of two holds under one generation.
	two := []Hold{hold(0, 1, 100, 10, 0, 1, 2, true), hold(1, 2, 101, 10, 3, 4, 5, true)}
	if bad := CheckFencing(two, []StoreOp{rd(0, 1, 10, 0), rd(1, 2, 10, 0)}, 0); !strings.Contains(strings.Join(bad, "\n"), "two sessions") {
		t.Errorf("two holds of generation 10: violations %q", bad)
	}
}

// TestLockHistoryDefinite: a session end a server confirmed (lost OK) is
// bounded by when the worker learned it, one the client gave up on is
// open-ended; a call that failed because the client was closed did
// nothing.
func TestLockHistoryDefinite(t *testing.T) {
	evs := []Event{
		{Ev: "lost", Worker: 0, Session: 7, Call: 5, Ret: 70, OK: true},
		{Ev: "lost", Worker: 1, Session: 8, Call: 6, Ret: 80},
		{Ev: "acq", Worker: 2, Hold: 1, Session: 9, Call: 90, Ret: 95, Err: "closed", Closed: true},
		{Ev: "rel", Worker: 2, Hold: 1, Session: 9, Gen: 4, Call: 96, Ret: 97, Err: "closed", Closed: true},
	}
	h := LockHistory(evs, "/ls/local/l", func(x int64) int64 { return x })
	if len(h) != 4 {
		t.Fatalf("history %+v", h)
	}
	if h[0].Return != 70 || h[0].Output.(linear.LockOutput).Unknown {
		t.Errorf("a confirmed session end: %+v", h[0])
	}
	if h[1].Return != math.MaxInt64 || !h[1].Output.(linear.LockOutput).Unknown {
		t.Errorf("an unconfirmed session end: %+v", h[1])
	}
	for _, op := range h[2:] {
		if out := op.Output.(linear.LockOutput); out.Unknown || out.OK {
			t.Errorf("a call of a closed client: %+v", op)
		}
	}
}
