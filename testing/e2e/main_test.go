package e2e

import (
	"flag"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/chubby-dev/chubby/testing/proc"
)

// TestMain runs the tests with the binaries built once. The tests spend their
// time waiting for leases and lock-delays of real processes, not on CPU, so
// unless -test.parallel was given they all run at once instead of
// GOMAXPROCS at a time: that keeps the package's wall time near its longest
// test.
func TestMain(m *testing.M) {
	runHolderIfAsked()
	flag.Parse()
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == "test.parallel" })
	if !set {
		flag.Set("test.parallel", "32")
	}
	os.Exit(proc.Main(m))
}

// root is the namespace root of the cell chubbyd serves by default.
const root = "/ls/local"

var seqRE = regexp.MustCompile(`^([XS]):([0-9]+):(/ls/\S+)$`)

// sequencer is a parsed MODE:GEN:PATH.
type sequencer struct {
	text string
	mode string
	gen  uint64
	path string
}

// parseSeq checks that s is one token MODE:GEN:PATH and parses it.
func parseSeq(t *testing.T, s string) sequencer {
	t.Helper()
	m := seqRE.FindStringSubmatch(s)
	if m == nil {
		t.Fatalf("sequencer %q is not one token MODE:GEN:PATH", s)
	}
	gen, err := strconv.ParseUint(m[2], 10, 64)
	if err != nil || gen == 0 {
		t.Fatalf("sequencer %q: generation %q", s, m[2])
	}
	return sequencer{text: s, mode: m[1], gen: gen, path: m[3]}
}

// wantCode fails the test unless r exited with code.
func wantCode(t *testing.T, r *proc.Result, code int) {
	t.Helper()
	if r.Code != code {
		t.Fatalf("want exit %d\n%s", code, r)
	}
}

// wantOK fails the test unless r exited 0 and returns its stdout.
func wantOK(t *testing.T, r *proc.Result) string {
	t.Helper()
	wantCode(t, r, 0)
	return r.Out()
}

// wantFail checks a failure as CONTRACT.md has it: exit code, nothing on
// stdout (the text mode) and exactly one line `chubbysh: <what>: <why>` on
// stderr.
func wantFail(t *testing.T, r *proc.Result, code int) {
	t.Helper()
	wantCode(t, r, code)
	if r.Stdout != "" {
		t.Errorf("failure printed on stdout: %q\n%s", r.Stdout, r)
	}
	wantErrLine(t, r)
}

// wantErrLine checks that stderr is exactly one `chubbysh: ...: ...` line.
func wantErrLine(t *testing.T, r *proc.Result) {
	t.Helper()
	lines := r.StderrLines()
	if len(lines) != 1 || !strings.HasPrefix(lines[0], "chubbysh: ") || !strings.Contains(lines[0][len("chubbysh: "):], ": ") {
		t.Errorf("want one stderr line `chubbysh: <what failed>: <why>`, got %q\n%s", r.Stderr, r)
	}
}

// wantJSONFail checks a -json failure: the exit code and exactly one JSON
// object on one line on stdout that says what went wrong.
func wantJSONFail(t *testing.T, r *proc.Result, code int) map[string]any {
	t.Helper()
	wantCode(t, r, code)
	obj := r.JSON(t)
	if _, ok := obj["error"]; !ok {
		t.Errorf("-json failure object has no \"error\": %v", obj)
	}
	wantErrLine(t, r)
	return obj
}

// num reads a non-negative integer key of a -json object.
func num(t *testing.T, obj map[string]any, key string) uint64 {
	t.Helper()
	v, ok := obj[key]
	if !ok {
		t.Fatalf("JSON object has no %q: %v", key, obj)
	}
	n, ok := v.(interface{ String() string })
	if !ok {
		t.Fatalf("JSON %q is %T (%v), not a number", key, v, v)
	}
	u, err := strconv.ParseUint(n.String(), 10, 64)
	if err != nil {
		t.Fatalf("JSON %q = %v is not a non-negative integer", key, v)
	}
	return u
}

// str reads a string key of a -json object.
func str(t *testing.T, obj map[string]any, key string) string {
	t.Helper()
	v, ok := obj[key].(string)
	if !ok {
		t.Fatalf("JSON %q is %T (%v), not a string: %v", key, obj[key], obj[key], obj)
	}
	return v
}

// boolean reads a bool key of a -json object.
func boolean(t *testing.T, obj map[string]any, key string) bool {
	t.Helper()
	v, ok := obj[key].(bool)
	if !ok {
		t.Fatalf("JSON %q is %T (%v), not a bool: %v", key, obj[key], obj[key], obj)
	}
	return v
}

// jsonLine decodes a background shell's stdout line as one JSON object.
func jsonLine(t *testing.T, l proc.Line) map[string]any {
	t.Helper()
	obj, err := proc.DecodeJSONLine(l.Text)
	if err != nil {
		t.Fatal(err)
	}
	return obj
}

func p(parts ...string) string { return root + "/" + strings.Join(parts, "/") }
