package e2e

import (
	"encoding/json"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chubby-dev/chubby/testing/proc"
)

// freeAddrs returns n loopback addresses nothing listens on.
func freeAddrs(t *testing.T, n int) []string {
	t.Helper()
	out := make([]string, n)
	for i := range out {
		a, err := proc.FreeAddr()
		if err != nil {
			t.Fatal(err)
		}
		out[i] = a
	}
	return out
}

// TestChubbydFlags: what chubbyd does with its command line before it serves.
func TestChubbydFlags(t *testing.T) {
	t.Parallel()

	t.Run("help", func(t *testing.T) {
		r := proc.RunChubbyd(t, 10*time.Second, "-h")
		wantCode(t, r, 0)
		for _, flag := range []string{"-node-id", "-cell", "-data-dir", "-rpc-addr", "-raft-addr", "-gossip-addr", "-http-addr", "-join", "-bootstrap-expect"} {
			if !strings.Contains(r.Stderr+r.Stdout, flag) {
				t.Errorf("chubbyd -h does not mention %s\n%s", flag, r)
			}
		}
	})

	t.Run("bad values", func(t *testing.T) {
		addrs := freeAddrs(t, 4)
		base := []string{"-node-id", "x", "-data-dir", filepath.Join(t.TempDir(), "data"),
			"-rpc-addr", addrs[0], "-raft-addr", addrs[1], "-gossip-addr", addrs[2], "-http-addr", addrs[3]}
		for _, tc := range []struct {
			args []string
			says string
		}{
			{[]string{"-rpc-addr", "no-port"}, "rpc-addr"},
			{[]string{"-cell", "bad/cell"}, "cell"},
			{[]string{"-bootstrap-expect", "0"}, "bootstrap-expect"},
			{[]string{"-bootstrap-expect", "6"}, "bootstrap-expect"}, // at most 5 voters
			{[]string{"-node-id", ""}, "node-id"},
			{[]string{"-no-such-flag"}, "no-such-flag"},
			{[]string{"-procs", "0"}, "procs"},
			{[]string{"-procs", "many"}, "procs"},
			{[]string{"stray-argument"}, "stray-argument"},
		} {
			r := proc.RunChubbyd(t, 15*time.Second, append(append([]string{}, base...), tc.args...)...)
			if r.Code == 0 || !strings.Contains(r.Stderr, tc.says) {
				t.Errorf("chubbyd %v: want a non-zero exit naming %q\n%s", tc.args, tc.says, r)
			}
		}
	})

	t.Run("log-json and pprof", func(t *testing.T) {
		s := proc.StartServer(t, proc.Options{LogLevel: "info", ExtraArgs: []string{"-log-json", "-pprof"}})
		wantOK(t, s.Sh(t, "write", p("logjson"), "x"))
		n := 0
		for _, line := range strings.Split(s.Log(), "\n") {
			if !strings.HasPrefix(line, "{") {
				continue // the harness's own "=== proc:" lines
			}
			var obj map[string]any
			if err := json.Unmarshal([]byte(line), &obj); err != nil {
				t.Fatalf("-log-json: a line is not JSON: %q: %v", line, err)
			}
			if obj["@message"] == nil || obj["@level"] == nil {
				t.Fatalf("-log-json: a line without @message/@level: %q", line)
			}
			n++
		}
		if n == 0 {
			t.Fatalf("-log-json: no JSON lines in the log:\n%s", s.Log())
		}
		get := func(s *proc.Server, path string) int {
			resp, err := http.Get("http://" + s.HTTPAddr + path)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			return resp.StatusCode
		}
		if code := get(s, "/debug/pprof/goroutine?debug=1"); code != http.StatusOK {
			t.Errorf("-pprof: /debug/pprof/goroutine answered %d", code)
		}
		plain := proc.StartServer(t, proc.Options{})
		if code := get(plain, "/debug/pprof/goroutine?debug=1"); code != http.StatusNotFound {
			t.Errorf("without -pprof: /debug/pprof/goroutine answered %d, want 404", code)
		}
	})

	t.Run("procs", func(t *testing.T) {
		// -procs auto (the default): an idle server falls to one processor
		// a second after it starts and says so; it still serves.
		auto := proc.StartServer(t, proc.Options{LogLevel: "info"})
		all := proc.StartServer(t, proc.Options{LogLevel: "info", ExtraArgs: []string{"-procs", "all"}})
		deadline := time.Now().Add(30 * time.Second)
		for !strings.Contains(auto.Log(), "processors changed: gomaxprocs=1") {
			if time.Now().After(deadline) {
				t.Fatalf("idle server with -procs auto did not fall to one processor in 30 s\n%s", auto.Log())
			}
			time.Sleep(100 * time.Millisecond)
		}
		wantOK(t, auto.Sh(t, "write", p("procs"), "one processor"))
		if got := wantOK(t, auto.Sh(t, "cat", p("procs"))); got != "one processor" {
			t.Errorf("cat after the fall = %q", got)
		}
		if strings.Contains(all.Log(), "processors changed") {
			t.Errorf("-procs all changed its processors\n%s", all.Log())
		}
	})

	t.Run("cell name", func(t *testing.T) {
		s := proc.StartServer(t, proc.Options{Cell: "blue"})
		wantOK(t, s.Sh(t, "write", "/ls/blue/x", "in blue"))
		if got := wantOK(t, s.Sh(t, "cat", "/ls/blue/x")); got != "in blue" {
			t.Errorf("cat /ls/blue/x = %q", got)
		}
		wantFail(t, s.Sh(t, "cat", "/ls/local/x"), 1)
		if obj := s.Sh(t, "-json", "session").JSON(t); obj["cell"] != "blue" {
			t.Errorf("session in cell blue: %v", obj)
		}
	})

	t.Run("port taken", func(t *testing.T) {
		s := proc.StartServer(t, proc.Options{})
		addrs := freeAddrs(t, 3)
		r := proc.RunChubbyd(t, 15*time.Second, "-node-id", "y", "-data-dir", filepath.Join(t.TempDir(), "data"),
			"-rpc-addr", s.RPCAddr, "-raft-addr", addrs[0], "-gossip-addr", addrs[1], "-http-addr", addrs[2])
		if r.Code == 0 || !strings.Contains(r.Stderr, "rpc-addr") {
			t.Errorf("chubbyd on a taken rpc port: want a non-zero exit naming rpc-addr\n%s", r)
		}
		wantOK(t, s.Sh(t, "-json", "session"))
	})
}
