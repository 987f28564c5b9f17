package fence_test

// The downstream half of Chubby §2.4 "Sequencers": a server that receives
// requests from lock holders checks their sequencer and rejects any older
// than the newest it has seen for that lock (DESIGN invariant 2), without a
// round trip to the cell.

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chubby-dev/chubby/client/fence"
	"github.com/chubby-dev/chubby/fs"
)

func seq(path string, gen uint64) fs.Sequencer {
	return fs.Sequencer{Path: path, Mode: fs.Exclusive, Gen: gen}
}

func TestAdmitEqualOrNewerRejectOlder(t *testing.T) {
	g := fence.NewGuard()
	const p = "/ls/local/lock"
	steps := []struct {
		gen    uint64
		ok     bool
		newest uint64
	}{
		{5, true, 5},   // first seen
		{5, true, 5},   // the same holder again
		{9, true, 9},   // a later holder
		{5, false, 9},  // the superseded holder, after the later one wrote
		{8, false, 9},  // anything older
		{9, true, 9},   // the current one still
		{10, true, 10}, // and the next
	}
	for i, s := range steps {
		err := g.Admit(seq(p, s.gen))
		if s.ok && err != nil {
			t.Fatalf("step %d: Admit(gen %d) = %v, want admitted", i, s.gen, err)
		}
		if !s.ok && !errors.Is(err, fence.ErrStale) {
			t.Fatalf("step %d: Admit(gen %d) = %v, want ErrStale", i, s.gen, err)
		}
		if got := g.Newest(p); got != s.newest {
			t.Fatalf("step %d: Newest = %d, want %d (a rejected sequencer must not move it)", i, got, s.newest)
		}
	}
}

func TestAdmitIgnoresModeAdmitsSharedHolders(t *testing.T) {
	// Several shared holders of one acquisition carry the same generation;
	// each is admitted.
	g := fence.NewGuard()
	s := fs.Sequencer{Path: "/ls/local/lock", Mode: fs.Shared, Gen: 3}
	for i := range 3 {
		if err := g.Admit(s); err != nil {
			t.Fatalf("shared holder %d: %v", i, err)
		}
	}
	if err := g.Admit(fs.Sequencer{Path: s.Path, Mode: fs.Exclusive, Gen: 2}); !errors.Is(err, fence.ErrStale) {
		t.Fatalf("older exclusive sequencer: %v, want ErrStale", err)
	}
}

func TestAdmitRejectsNonSequencers(t *testing.T) {
	g := fence.NewGuard()
	for _, s := range []fs.Sequencer{{}, {Path: "/ls/local/lock"}, {Gen: 4, Mode: fs.Exclusive}} {
		if err := g.Admit(s); !errors.Is(err, fence.ErrStale) {
			t.Fatalf("Admit(%+v) = %v, want ErrStale", s, err)
		}
	}
	if g.Newest("") != 0 || g.Newest("/ls/local/lock") != 0 {
		t.Fatal("a rejected non-sequencer was recorded")
	}
}

func TestPathsAreIndependent(t *testing.T) {
	g := fence.NewGuard()
	a, b := "/ls/local/a", "/ls/local/b"
	if err := g.Admit(seq(a, 100)); err != nil {
		t.Fatal(err)
	}
	// b has seen nothing: a low generation is fine there.
	if err := g.Admit(seq(b, 1)); err != nil {
		t.Fatalf("b after a newer a: %v", err)
	}
	if err := g.Admit(seq(a, 99)); !errors.Is(err, fence.ErrStale) {
		t.Fatalf("older a: %v, want ErrStale", err)
	}
	if err := g.Admit(seq(b, 2)); err != nil {
		t.Fatal(err)
	}
	if g.Newest(a) != 100 || g.Newest(b) != 2 {
		t.Fatalf("Newest = %d, %d; want 100, 2", g.Newest(a), g.Newest(b))
	}
	// A path that is a prefix of another is a different lock.
	if err := g.Admit(seq(a+"/x", 1)); err != nil {
		t.Fatalf("a/x: %v", err)
	}
}

func TestAdmitString(t *testing.T) {
	g := fence.NewGuard()
	s := seq("/ls/local/lock", 7)
	if err := g.AdmitString(s.String()); err != nil {
		t.Fatalf("AdmitString(%q): %v", s, err)
	}
	if err := g.AdmitString(seq("/ls/local/lock", 6).String()); !errors.Is(err, fence.ErrStale) {
		t.Fatalf("older printed sequencer: %v, want ErrStale", err)
	}
	for _, bad := range []string{"", "X:7", "Q:7:/ls/local/lock", "X:zero:/ls/local/lock", "X:0:/ls/local/lock", "X:8:/etc/passwd"} {
		if err := g.AdmitString(bad); !errors.Is(err, fence.ErrStale) {
			t.Fatalf("AdmitString(%q) = %v, want ErrStale", bad, err)
		}
	}
	if g.Newest("/ls/local/lock") != 7 {
		t.Fatalf("Newest = %d after bad strings, want 7", g.Newest("/ls/local/lock"))
	}
}

// TestConcurrentAdmit: under -race, many writers with random generations on
// a few locks. What the guard lets through, in the order it lets it through,
// never goes back in generation for any lock; every refusal is ErrStale and
// was older than what had been admitted; the final Newest is the maximum.
func TestConcurrentAdmit(t *testing.T) {
	g := fence.NewGuard()
	paths := []string{"/ls/local/a", "/ls/local/b", "/ls/local/c"}
	var mu sync.Mutex
	applied := map[string][]uint64{} // appended inside AdmitAndDo: admission order
	maxGen := map[string]uint64{}
	var rejected atomic.Int64

	const workers, perWorker = 16, 500
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 42))
			for range perWorker {
				p := paths[rng.IntN(len(paths))]
				gen := 1 + rng.Uint64N(1000)
				mu.Lock()
				if gen > maxGen[p] {
					maxGen[p] = gen
				}
				mu.Unlock()
				var err error
				if rng.IntN(2) == 0 {
					err = g.AdmitAndDo(seq(p, gen), func() error {
						mu.Lock()
						applied[p] = append(applied[p], gen)
						mu.Unlock()
						return nil
					})
				} else {
					err = g.Admit(seq(p, gen))
				}
				if err != nil {
					if !errors.Is(err, fence.ErrStale) {
						t.Errorf("Admit: %v", err)
					}
					if g.Newest(p) <= gen {
						t.Errorf("gen %d of %s refused, but the newest is only %d", gen, p, g.Newest(p))
					}
					rejected.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	for _, p := range paths {
		log := applied[p]
		for i := 1; i < len(log); i++ {
			if log[i] < log[i-1] {
				t.Fatalf("%s: the guard let gen %d through after gen %d", p, log[i], log[i-1])
			}
		}
		if g.Newest(p) != maxGen[p] {
			t.Fatalf("%s: Newest = %d, want the maximum offered %d", p, g.Newest(p), maxGen[p])
		}
	}
	if rejected.Load() == 0 {
		t.Fatal("test bug: random generations never produced a refusal")
	}
}

// TestAdmitAndDoIsAtomic: the write runs under the guard's lock, so no newer
// sequencer is admitted between the check and the write: a newer holder's
// Admit waits for the older holder's admitted write to finish; a refused
// sequencer's write never runs; the write's error is returned.
func TestAdmitAndDoIsAtomic(t *testing.T) {
	g := fence.NewGuard()
	const p = "/ls/local/lock"
	inWrite, release := make(chan struct{}), make(chan struct{})
	var store []string
	old := make(chan error, 1)
	go func() {
		old <- g.AdmitAndDo(seq(p, 1), func() error {
			close(inWrite)
			<-release
			store = append(store, "old holder")
			return nil
		})
	}()
	<-inWrite
	newer := make(chan error, 1)
	go func() {
		newer <- g.AdmitAndDo(seq(p, 2), func() error {
			store = append(store, "new holder")
			return nil
		})
	}()
	select {
	case err := <-newer:
		t.Fatalf("a newer Admit completed (%v) while an admitted write was in progress", err)
	case <-time.After(50 * time.Millisecond):
	}
	close(release)
	if err := <-old; err != nil {
		t.Fatal(err)
	}
	if err := <-newer; err != nil {
		t.Fatal(err)
	}
	// The old holder, late, is refused and its write does not run.
	ran := false
	err := g.AdmitAndDo(seq(p, 1), func() error { ran = true; return nil })
	if !errors.Is(err, fence.ErrStale) || ran {
		t.Fatalf("late old holder: err %v, write ran %v; want ErrStale and no write", err, ran)
	}
	if fmt.Sprint(store) != "[old holder new holder]" {
		t.Fatalf("store = %v, want the writes in admission order", store)
	}
	boom := errors.New("disk full")
	if err := g.AdmitAndDo(seq(p, 3), func() error { return boom }); !errors.Is(err, boom) {
		t.Fatalf("write error: %v, want %v", err, boom)
	}
}
