package main

// The example run as processes: a chubbyd, the watcher, and chubbysh
// writing new config versions. The watcher prints each version once, soon
// after its write, and serves its own frequent reads from the cache.

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/chubby-dev/chubby/testing/proc"
	"github.com/chubby-dev/chubby/testing/wait"
)

func TestMain(m *testing.M) { os.Exit(proc.Main(m)) }

func TestConfigWatcherFollowsWrites(t *testing.T) {
	bin := t.TempDir()
	if err := proc.BuildCommands(bin, "./examples/config-watcher"); err != nil {
		t.Fatal(err)
	}
	s := proc.StartServer(t, proc.Options{})
	const file = "/ls/local/config"
	if r := s.Sh(t, "write", file, "replicas=3"); r.Code != 0 {
		t.Fatal(r)
	}
	var mu sync.Mutex
	var lines []string
	w := proc.StartChild(t, "config-watcher", exec.Command(filepath.Join(bin, "config-watcher"), "-cell", s.RPCAddr, "-file", file,
		"-read-every", "5ms"), func(l string, _ time.Time) {
		mu.Lock()
		lines = append(lines, l)
		mu.Unlock()
	})
	shown := func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), lines...)
	}
	expect := func(want ...string) {
		t.Helper()
		wait.For(t, 10*time.Second, "the watcher to print "+want[len(want)-1], func() bool { return len(shown()) >= len(want) })
		if got := shown(); strings.Join(got, "|") != strings.Join(want, "|") {
			t.Fatalf("watcher printed %q, want %q", got, want)
		}
	}
	expect("config replicas=3")
	for _, v := range []string{"replicas=5", "replicas=7"} {
		written := time.Now()
		if r := s.Sh(t, "write", file, v); r.Code != 0 {
			t.Fatal(r)
		}
		want := []string{"config replicas=3"}
		if v == "replicas=7" {
			want = append(want, "config replicas=5")
		}
		expect(append(want, "config "+v)...)
		t.Logf("watcher printed %s %v after the write began", v, time.Since(written).Round(time.Millisecond))
	}
	wait.Sleep(t.Context(), 200*time.Millisecond) // let it read from the cache a while
	syscall.Kill(w.PID(), syscall.SIGTERM)
	if code, err := w.Wait(10 * time.Second); err != nil || code != 0 {
		t.Fatalf("watcher exit %d, %v; stderr %q", code, err, w.Stderr())
	}
	got := shown()
	last := strings.Fields(got[len(got)-1])
	if len(last) != 4 || last[0] != "cache" {
		t.Fatalf("last line %q, want cache statistics", got[len(got)-1])
	}
	hits, _ := strconv.Atoi(strings.TrimPrefix(last[1], "hits="))
	misses, _ := strconv.Atoi(strings.TrimPrefix(last[2], "misses="))
	t.Logf("watcher cache: %d hits, %d misses", hits, misses)
	if hits < 10*misses {
		t.Errorf("the watcher's reads mostly missed the cache: %d hits, %d misses", hits, misses)
	}
}
