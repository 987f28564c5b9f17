package linear

import (
	"math"
	"strings"
	"testing"

	"github.com/anishathalye/porcupine"
)

func op(client int, in Input, out string, call, ret int64) porcupine.Operation {
	return porcupine.Operation{ClientId: client, Input: in, Output: Output{out}, Call: call, Return: ret}
}

// TestRegisterModel: the model accepts what a coherent cache may answer and
// rejects a read of an old value after a newer write returned, per key.
func TestRegisterModel(t *testing.T) {
	const a, b = "/ls/local/a", "/ls/local/b"
	for _, tc := range []struct {
		name string
		ok   bool
		ops  []porcupine.Operation
	}{
		{"initial value", true, []porcupine.Operation{op(0, Read(a), "", 0, 1)}},
		{"read after write", true, []porcupine.Operation{
			op(0, Write(a, "1"), "", 0, 10), op(1, Read(a), "1", 11, 12)}},
		{"read concurrent with write sees either", true, []porcupine.Operation{
			op(0, Write(a, "1"), "", 0, 10), op(1, Read(a), "", 1, 2), op(2, Read(a), "1", 3, 4)}},
		{"stale read after the write returned", false, []porcupine.Operation{
			op(0, Write(a, "1"), "", 0, 10), op(1, Read(a), "", 11, 12)}},
		{"new then old", false, []porcupine.Operation{
			op(0, Write(a, "1"), "", 0, 100), op(1, Read(a), "1", 10, 20), op(2, Read(a), "", 30, 40)}},
		{"keys are independent", true, []porcupine.Operation{
			op(0, Write(a, "1"), "", 0, 10), op(1, Read(b), "", 11, 12), op(1, Read(a), "1", 13, 14)}},
		{"unknown write may apply late", true, []porcupine.Operation{
			op(0, Write(a, "1"), "", 0, math.MaxInt64), op(1, Read(a), "", 5, 6), op(1, Read(a), "1", 50, 60)}},
		{"unknown write may never apply", true, []porcupine.Operation{
			op(0, Write(a, "1"), "", 0, math.MaxInt64), op(1, Read(a), "", 50, 60)}},
		{"read of a value never written", false, []porcupine.Operation{op(0, Read(a), "x", 0, 1)}},
	} {
		if got := porcupine.CheckOperations(RegisterModel, tc.ops); got != tc.ok {
			t.Errorf("%s: linearizable=%v, want %v", tc.name, got, tc.ok)
		}
	}
}

// TestWindowNamesTheCulprit: the description of a violation names the read
// that could not be linearized.
func TestWindowNamesTheCulprit(t *testing.T) {
	h := []porcupine.Operation{
		op(0, Write("/ls/local/a", "1"), "", 0, 10e6),
		op(1, Read("/ls/local/a"), "1", 11e6, 12e6),
		op(2, Read("/ls/local/a"), "", 20e6, 21e6),
	}
	res, info := porcupine.CheckOperationsVerbose(RegisterModel, h, 0)
	if res != porcupine.Illegal {
		t.Fatalf("result %s", res)
	}
	w := Window(RegisterModel, h, info)
	if !strings.Contains(w, `> client 2 [20.000ms, 21.000ms] read(a) → ""`) {
		t.Fatalf("window does not mark the stale read:\n%s", w)
	}
}
