package e2e

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chubby-dev/chubby/testing/proc"
)

// TestFilesInAndOut (issue 15, "files in and out"): contents too big for a
// command-line argument, and binary ones, go in through `write PATH -`
// (stdin), `write PATH -file F` and `cas PATH GEN -`, and come out of `cat`
// byte for byte. Contents over the limit exit 1 with a clear message and
// change nothing; the server keeps serving.
func TestFilesInAndOut(t *testing.T) {
	t.Parallel()
	s := proc.StartServer(t, proc.Options{})
	f := p("blob")
	rng := rand.New(rand.NewPCG(16, 1))
	random := func(n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		return b
	}

	// 200 KiB of random bytes (NULs, invalid UTF-8, newlines) from stdin.
	blob := random(200 << 10)
	gen := num(t, s.ShStdin(t, string(blob), "-json", "write", f, "-").JSON(t), "content_gen")
	if got := wantOK(t, s.Sh(t, "cat", f)); got != string(blob) {
		t.Fatalf("cat after write -: %d bytes back, want the %d written (first difference at %d)", len(got), len(blob), firstDiff([]byte(got), blob))
	}

	// From a file, and a CAS from stdin on the generation just written.
	blob2 := random(150 << 10)
	file := filepath.Join(t.TempDir(), "blob2")
	if err := os.WriteFile(file, blob2, 0o600); err != nil {
		t.Fatal(err)
	}
	gen2 := num(t, s.Sh(t, "-json", "write", f, "-file", file).JSON(t), "content_gen")
	if gen2 <= gen {
		t.Fatalf("write -file: content_gen %d, want > %d", gen2, gen)
	}
	if got := wantOK(t, s.Sh(t, "cat", f)); got != string(blob2) {
		t.Fatalf("cat after write -file: %d bytes back, want %d", len(got), len(blob2))
	}
	wantFail(t, s.ShStdin(t, "stale", "cas", f, "1", "-"), 1) // the generation moved on
	blob3 := random(100 << 10)
	gen3 := num(t, s.ShStdin(t, string(blob3), "-json", "cas", f, itoa(gen2), "-").JSON(t), "content_gen")
	if got := wantOK(t, s.Sh(t, "cat", f)); got != string(blob3) || gen3 <= gen2 {
		t.Fatalf("cas -: content_gen %d (after %d), %d bytes back, want %d", gen3, gen2, len(got), len(blob3))
	}

	// 300 KiB: refused before anything is sent, exit 1, nothing changed.
	big := random(300 << 10)
	r := s.ShStdin(t, string(big), "write", f, "-")
	wantFail(t, r, 1)
	if !strings.Contains(r.Stderr, "contents too large") {
		t.Errorf("oversize write: stderr %q does not say the contents are too large", r.Stderr)
	}
	bigFile := filepath.Join(t.TempDir(), "big")
	if err := os.WriteFile(bigFile, big, 0o600); err != nil {
		t.Fatal(err)
	}
	wantFail(t, s.Sh(t, "write", f, "-file", bigFile), 1)
	if got := wantOK(t, s.Sh(t, "cat", f)); got != string(blob3) {
		t.Fatalf("after the refused writes the file holds %d bytes, want the %d of the last good write", len(got), len(blob3))
	}
	wantOK(t, s.Sh(t, "write", p("after-big"), "still serving"))

	// Usage: DATA and -file together; - in script mode (stdin is the script).
	wantFail(t, s.Sh(t, "write", f, "x", "-file", file), 2)
	wantCode(t, s.ShStdin(t, "write "+f+" -\n"), 2)
}

func firstDiff(a, b []byte) int {
	n := min(len(a), len(b))
	for i := range n {
		if a[i] != b[i] {
			return i
		}
	}
	if len(a) != len(b) {
		return n
	}
	return -1
}
