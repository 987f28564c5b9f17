package main

import (
	"bytes"
	"io"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chubby-dev/chubby/testing/cell"
	"github.com/chubby-dev/chubby/testing/proc"
)

// runArgs calls the command's run with args.
func runArgs(args ...string) (code int, stdout, stderr string) {
	var out, errb bytes.Buffer
	code = run(args, &out, &errb)
	return code, out.String(), errb.String()
}

func TestHelp(t *testing.T) {
	for _, args := range [][]string{{"-h"}, {"--help"}, {"help"}} {
		code, out, _ := runArgs(args...)
		if code != exitOK {
			t.Errorf("%v: exit %d, want 0", args, code)
		}
		for _, w := range workloads {
			if !strings.Contains(out, "\n  "+w.name+" ") {
				t.Errorf("%v does not list workload %s:\n%s", args, w.name, out)
			}
		}
		for _, k := range []string{"ops_per_s", "p99_ms", "-conns", "Exit codes"} {
			if !strings.Contains(out, k) {
				t.Errorf("%v does not explain %s", args, k)
			}
		}
	}
}

// TestWorkloadHelp: WORKLOAD -h explains the workload, its figures and
// every flag it takes.
func TestWorkloadHelp(t *testing.T) {
	for _, w := range workloads {
		code, out, _ := runArgs(w.name, "-h")
		if code != exitOK {
			t.Errorf("%s -h: exit %d", w.name, code)
		}
		want := []string{"usage: chubbybench " + w.name, w.help, "-cell", "-clients", "-conns", "-rate", "-duration", "-warmup", "-json", "-fail-on-error", "ops_per_s"}
		switch w.name {
		case "read":
			want = append(want, "-cached", "-size")
		case "write", "fanout":
			want = append(want, "-size")
		case "contended":
			want = append(want, "-hold")
		}
		for _, s := range want {
			if !strings.Contains(out, s) {
				t.Errorf("%s -h has no %q", w.name, s)
			}
		}
	}
}

// TestUsageErrors: a bad command line exits 2 with a message that names
// what is wrong.
func TestUsageErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "name a workload"},
		{[]string{"bogus"}, `no workload "bogus"`},
		{[]string{"-clients", "4", "lock"}, "name the workload before the flags"},
		{[]string{"lock", "-nope"}, "flag provided but not defined: -nope"},
		{[]string{"lock", "-clients", "x"}, "invalid value"},
		{[]string{"lock", "-clients", "0"}, "-clients 0"},
		{[]string{"contended", "-clients", "1"}, "contended needs at least 2"},
		{[]string{"lock", "-clients", "4", "-conns", "5"}, "-conns 5 with -clients 4"},
		{[]string{"lock", "-clients", "4", "-conns", "-1"}, "-conns -1 with -clients 4"},
		{[]string{"lock", "-duration", "0s"}, "-duration 0s"},
		{[]string{"lock", "-rate", "-1"}, "-rate -1"},
		{[]string{"write", "-size", "300000"}, "-size 300000"},
		{[]string{"lock", "-cell", " , "}, "no server addresses"},
		{[]string{"lock", "extra"}, `unexpected argument "extra"`},
	} {
		code, out, errs := runArgs(tc.args...)
		if code != exitUsage || !strings.Contains(errs, tc.want) || out != "" {
			t.Errorf("%q: exit %d, stderr %q, stdout %q; want exit 2 and %q", tc.args, code, errs, out, tc.want)
		}
	}
	// -conns equal to -clients is accepted (here: reaches the dial, of a
	// port nobody listens on).
	if code, _, errs := runArgs("lock", "-clients", "2", "-conns", "2", "-cell", deadAddr, "-timeout", "300ms"); code != exitFailed {
		t.Errorf("-conns = -clients: exit %d (%s), want the run to start and fail to dial", code, errs)
	}
}

// deadAddr is an address nothing listens on (a privileged port: connections
// are refused).
const deadAddr = "127.0.0.1:1"

// TestUnreachable: a cell that cannot be reached fails the run: exit 1.
func TestUnreachable(t *testing.T) {
	code, out, errs := runArgs("lock", "-cell", deadAddr, "-timeout", "300ms", "-duration", "1s")
	if code != exitFailed || !strings.Contains(errs, "dial the cell") || out != "" {
		t.Errorf("exit %d, stderr %q, stdout %q; want exit 1, a dial error, no report", code, errs, out)
	}
}

// TestCommand runs the command against a one-server cell: lock -json, the
// rate cap, and the built binary.
func TestCommand(t *testing.T) {
	c := cell.Start(t)
	addr := c.Addr()

	t.Run("lock-json", func(t *testing.T) {
		code, out, errs := runArgs("lock", "-cell", addr, "-clients", "2", "-duration", "1s", "-warmup", "200ms", "-json")
		if code != exitOK {
			t.Fatalf("exit %d: %s", code, errs)
		}
		m := checkJSON(t, []byte(out))
		if m["workload"] != "lock" || m["clients"] != 2.0 || m["errors"] != 0.0 || m["ops"].(float64) == 0 {
			t.Errorf("report %s", out)
		}
	})

	t.Run("table", func(t *testing.T) {
		code, out, errs := runArgs("write", "-cell", addr, "-duration", "1s", "-warmup", "0s", "-fail-on-error")
		if code != exitOK {
			t.Fatalf("exit %d: %s", code, errs)
		}
		for _, s := range []string{"chubbybench write: 1 clients", "FIGURE", "ops_per_s", "p99_ms"} {
			if !strings.Contains(out, s) {
				t.Errorf("table has no %q:\n%s", s, out)
			}
		}
	})

	// -rate 20 for 1 s: about 20 operations, however fast the cell is (a
	// bound on the count, not a timing measurement).
	t.Run("rate", func(t *testing.T) {
		code, out, errs := runArgs("lock", "-cell", addr, "-clients", "2", "-rate", "20", "-duration", "1s", "-warmup", "0s", "-json")
		if code != exitOK {
			t.Fatalf("exit %d: %s", code, errs)
		}
		m := checkJSON(t, []byte(out))
		if ops := m["ops"].(float64); ops == 0 || ops > 30 {
			t.Errorf("-rate 20 over 1s: %v ops, want 1 to 30", ops)
		}
	})

	t.Run("binary", func(t *testing.T) {
		dir := t.TempDir()
		if err := proc.BuildCommands(dir, "./cmd/chubbybench"); err != nil {
			t.Fatal(err)
		}
		bin := filepath.Join(dir, "chubbybench")
		exit := func(args ...string) (int, string, string) {
			cmd := exec.Command(bin, args...)
			var out, errb bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &errb
			err := cmd.Run()
			if ee, ok := err.(*exec.ExitError); ok {
				return ee.ExitCode(), out.String(), errb.String()
			} else if err != nil {
				t.Fatal(err)
			}
			return 0, out.String(), errb.String()
		}
		if code, out, _ := exit("-h"); code != 0 || !strings.Contains(out, "fanout") {
			t.Errorf("-h: exit %d", code)
		}
		if code, _, errs := exit("nosuch"); code != 2 || !strings.Contains(errs, "no workload") {
			t.Errorf("nosuch: exit %d, %q", code, errs)
		}
		code, out, errs := exit("lock", "-cell", addr, "-clients", "2", "-duration", "1s", "-warmup", "0s", "-json")
		if code != 0 {
			t.Fatalf("lock -json: exit %d: %s", code, errs)
		}
		if errs != "" { // stderr is not a terminal: no progress bar
			t.Errorf("stderr: %q", errs)
		}
		checkJSON(t, []byte(out))
	})
}

// TestNoCacheFlag: -no-cache dials every client without a cache.
func TestNoCacheFlag(t *testing.T) {
	for _, args := range [][]string{{"sessions"}, {"sessions", "-no-cache"}} {
		o, err := parse(args, io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		want := len(args) == 2
		if got := newEnv(o, io.Discard).config().DisableCache; got != want {
			t.Errorf("%q: DisableCache %v, want %v", args, got, want)
		}
	}
}
