package core

import (
	"math"
	"testing"

	"github.com/anishathalye/porcupine"
)

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
