package wire

import (
	"bufio"
	"bytes"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
)

// TestDecodingRetainsNoMemory is the regression test of a leak the frame
// fuzzer found: decoding hostile frames through msgpack.Unmarshal's pooled
// decoders left them holding the buffers that huge length prefixes grew, so
// the heap grew without bound over repeated decodes of the same inputs
// (about 5 GiB after 20 rounds of this corpus). Decoding now uses a decoder
// per call; the live heap must stay small.
func TestDecodingRetainsNoMemory(t *testing.T) {
	dir := "testdata/fuzz/FuzzReadFrame"
	files, _ := filepath.Glob(filepath.Join(dir, "*"))
	var inputs [][]byte
	for _, f := range files {
		b, _ := os.ReadFile(f)
		lines := strings.SplitN(string(b), "\n", 3)
		if len(lines) < 2 {
			continue
		}
		s := strings.TrimSuffix(strings.TrimPrefix(lines[1], "[]byte("), ")")
		u, err := strconv.Unquote(s)
		if err == nil {
			inputs = append(inputs, []byte(u))
		}
	}
	var ms runtime.MemStats
	for round := 0; round < 20; round++ {
		for _, in := range inputs {
			r := bufio.NewReader(bytes.NewReader(in))
			for i := 0; i < 16; i++ {
				fr, err := ReadFrame(r)
				if err != nil {
					break
				}
				DecodeRequest(fr)
				DecodeResponse(fr)
			}
		}
	}
	if len(inputs) < 100 {
		t.Fatalf("only %d corpus inputs in %s", len(inputs), dir)
	}
	runtime.GC()
	runtime.ReadMemStats(&ms)
	if live := ms.HeapAlloc >> 20; live > 64 {
		t.Fatalf("%d MiB live after decoding the corpus 20 times: decoding retains memory", live)
	}
}
