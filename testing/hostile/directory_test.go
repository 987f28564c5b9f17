package hostile

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chubby-dev/chubby/testing/proc"
	"github.com/chubby-dev/chubby/wire"
)

// TestHugeDirectoryLists replays issue 17, finding 2 (a directory's
// listing was one reply, and past 1 MiB of names it failed with a frame
// too large, so a client that made many children could hide them all):
// `chubbysh ls` of a directory of 100,000 children, and of one of 4,200
// children with 250-byte names (1.05 MB of names, over a frame), prints
// every child, one a line, in order.
func TestHugeDirectoryLists(t *testing.T) {
	s := proc.StartServer(t, proc.Options{LogLevel: "info"})
	for _, tc := range []struct {
		dir  string
		n    int
		name func(i int) string
	}{
		{root + "/many", scale(100_000, 100_000), func(i int) string { return fmt.Sprintf("c%06d", i) }},
		{root + "/long", 4_200, func(i int) string { return fmt.Sprintf("%04d-%s", i, strings.Repeat("n", 245)) }},
	} {
		if r := s.Sh(t, "mkdir", tc.dir); r.Code != 0 {
			t.Fatalf("mkdir: %s", r)
		}
		start := time.Now()
		createChildren(t, s, tc.dir, tc.n, tc.name)
		made := time.Since(start)
		r := proc.RunSh(t, s.RPCAddr, proc.ShOptions{Timeout: 2 * time.Minute}, "ls", tc.dir)
		if r.Code != 0 {
			t.Fatalf("ls %s: %s", tc.dir, r)
		}
		lines := r.Lines()
		if len(lines) != tc.n {
			t.Fatalf("ls %s printed %d lines, want %d", tc.dir, len(lines), tc.n)
		}
		for i, l := range lines {
			if l != tc.name(i) {
				t.Fatalf("ls %s line %d = %q, want %q", tc.dir, i+1, l, tc.name(i))
			}
		}
		t.Logf("%s: %d children (%d bytes of names) created in %v; chubbysh ls printed all %d in %v",
			tc.dir, tc.n, len(r.Stdout)-tc.n, made.Round(time.Millisecond), len(lines), r.Took.Round(time.Millisecond))
	}
}

// createChildren creates n empty files dir/name(i), pipelined on a few raw
// sessions.
func createChildren(t *testing.T, s *proc.Server, dir string, n int, name func(int) string) {
	t.Helper()
	const conns = 8
	var wg sync.WaitGroup
	errs := make(chan error, conns)
	for c := range conns {
		r := rawSession(t, s, time.Minute)
		wg.Go(func() {
			var mine []int
			for i := c; i < n; i += conns {
				mine = append(mine, i)
			}
			got, err := pipeline(r, len(mine), func(k int) (wire.Request, any) {
				return stamp(r, wire.MOpen), wire.OpenArgs{Path: dir + "/" + name(mine[k]), Create: true}
			}, nil)
			if err == nil && got[""] != len(mine) {
				err = fmt.Errorf("creates: %v, want %d successes", got, len(mine))
			}
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
}
