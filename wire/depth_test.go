package wire

import (
	"bytes"
	"errors"
	"runtime"
	"testing"

	"github.com/vmihailenco/msgpack/v5"
	"pgregory.net/rapid"
)

// value draws a msgpack-encodable value nested at most depth deep, and
// reports its nesting.
func value(t *rapid.T, depth int) (any, int) {
	kind := rapid.IntRange(0, 9).Draw(t, "kind")
	if depth == 0 && kind >= 7 {
		kind = 0
	}
	switch kind {
	case 0:
		return rapid.Int64().Draw(t, "int"), 0
	case 1:
		return rapid.Uint64().Draw(t, "uint"), 0
	case 2:
		return rapid.String().Draw(t, "str"), 0
	case 3:
		return rapid.SliceOf(rapid.Byte()).Draw(t, "bin"), 0
	case 4:
		return rapid.Float64().Draw(t, "float"), 0
	case 5:
		return rapid.Bool().Draw(t, "bool"), 0
	case 6:
		return nil, 0
	case 7, 8:
		n := rapid.IntRange(0, 4).Draw(t, "len")
		out, deepest := make([]any, n), 0
		for i := range out {
			var d int
			out[i], d = value(t, depth-1)
			deepest = max(deepest, d)
		}
		if n == 0 {
			return out, 1
		}
		return out, deepest + 1
	default:
		n := rapid.IntRange(0, 3).Draw(t, "len")
		out, deepest := map[string]any{}, 0
		for range n {
			v, d := value(t, depth-1)
			out[rapid.String().Draw(t, "key")] = v
			deepest = max(deepest, d)
		}
		if len(out) == 0 {
			return out, 1
		}
		return out, deepest + 1
	}
}

// TestCheckShapeProperty: every encoding of a value nested at most
// MaxDepth passes; every proper prefix of it and every value one deeper
// than MaxDepth fails.
func TestCheckShapeProperty(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		v, _ := value(t, 6)
		b, err := msgpack.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		if err := checkShape(b); err != nil {
			t.Fatalf("valid encoding %x refused: %v", b, err)
		}
		if cut := rapid.IntRange(0, len(b)-1).Draw(t, "cut"); checkShape(b[:cut]) == nil {
			t.Fatalf("prefix %x of %x accepted", b[:cut], b)
		}
		if checkShape(append(b[:len(b):len(b)], 0xc0)) == nil {
			t.Fatal("trailing byte accepted")
		}
	})
	deep := func(n int) []byte { return append(bytes.Repeat([]byte{0x91}, n), 0xc0) }
	if err := checkShape(deep(MaxDepth)); err != nil {
		t.Fatalf("%d nested arrays refused: %v", MaxDepth, err)
	}
	if err := checkShape(deep(MaxDepth + 1)); !errors.Is(err, ErrMalformed) {
		t.Fatalf("%d nested arrays: %v, want ErrMalformed", MaxDepth+1, err)
	}
	// An array32 claiming 4 billion elements in five bytes.
	if err := checkShape([]byte{0xdd, 0xff, 0xff, 0xff, 0xff}); !errors.Is(err, ErrMalformed) {
		t.Fatalf("an array claiming more elements than bytes: %v", err)
	}
}

// TestDeepNestingIsCheap (issue 17, finding 4): a frame of a million nested
// arrays — 1 MiB that cost the decoder 226 MB — is refused before the
// decoder allocates for it.
func TestDeepNestingIsCheap(t *testing.T) {
	frame := append(bytes.Repeat([]byte{0x91}, 1_000_000), 0xc0)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	_, err := DecodeRequest(frame)
	runtime.ReadMemStats(&after)
	if !errors.Is(err, ErrMalformed) {
		t.Fatalf("DecodeRequest of a million nested arrays: %v, want ErrMalformed", err)
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 1<<20 {
		t.Fatalf("refusing it allocated %d bytes; want under 1 MiB", alloc)
	}
}
