package main

// The example run as processes: three workers against a real chubbyd share
// six partitions; one is killed with SIGKILL and its partitions are owned
// again within TTL + lock-delay + 1 s; after settling every partition is
// owned by exactly one worker.

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chubby-dev/chubby/client"
	"github.com/chubby-dev/chubby/testing/proc"
	"github.com/chubby-dev/chubby/testing/wait"
)

func TestMain(m *testing.M) { os.Exit(proc.Main(m)) }

const (
	partitions = 6
	ttl        = time.Second
	lockDelay  = 200 * time.Millisecond
)

// owners follows the workers' stdout: who owns which partition now.
type owners struct {
	mu    sync.Mutex
	owner map[int]string // partition → worker
	at    map[int]time.Time
	gen   map[int]ownerGen // the greatest generation seen, and whose
	bad   []string
}

type ownerGen struct {
	worker string
	gen    uint64
}

func (o *owners) line(worker, line string, at time.Time) {
	f := strings.Fields(line)
	if len(f) < 2 {
		return
	}
	n, err := strconv.Atoi(f[1])
	if err != nil {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	switch f[0] {
	case "owned":
		// Lines of different processes may be read out of order, so an
		// "owned" may come before the previous owner's "revoked"; the
		// generations tell the order: each new owner's is greater.
		if len(f) < 3 {
			return
		}
		seq, err := client.ParseSequencer(f[2])
		gen := seq.Gen
		if err != nil {
			o.bad = append(o.bad, fmt.Sprintf("bad sequencer in %q", line))
			return
		}
		if last := o.gen[n]; gen < last.gen || gen == last.gen && last.worker != worker {
			o.bad = append(o.bad, fmt.Sprintf("partition %d owned by %s with generation %d after %s had %d", n, worker, gen, last.worker, last.gen))
		}
		o.gen[n] = ownerGen{worker, gen}
		o.owner[n], o.at[n] = worker, at
	case "revoked", "lost":
		if o.owner[n] == worker {
			delete(o.owner, n)
		}
	}
}

// drop forgets a dead worker's partitions (it cannot say it lost them).
func (o *owners) drop(worker string) []int {
	o.mu.Lock()
	defer o.mu.Unlock()
	var had []int
	for n, w := range o.owner {
		if w == worker {
			had = append(had, n)
			delete(o.owner, n)
		}
	}
	return had
}

func (o *owners) snapshot() map[int]string {
	o.mu.Lock()
	defer o.mu.Unlock()
	out := map[int]string{}
	for n, w := range o.owner {
		out[n] = w
	}
	return out
}

// balanced: every partition owned, each worker of live owning 6/len(live).
func balanced(snap map[int]string, live []string) bool {
	if len(snap) != partitions {
		return false
	}
	per := map[string]int{}
	for _, w := range snap {
		per[w]++
	}
	for _, w := range live {
		if per[w] != partitions/len(live) {
			return false
		}
	}
	return len(per) == len(live)
}

func TestWorkersTakeOverKilledWorker(t *testing.T) {
	bin := t.TempDir()
	if err := proc.BuildCommands(bin, "./examples/workers"); err != nil {
		t.Fatal(err)
	}
	srv := proc.StartServer(t, proc.Options{LogLevel: "info"})
	o := &owners{owner: map[int]string{}, at: map[int]time.Time{}, gen: map[int]ownerGen{}}
	workers := map[string]*proc.Child{}
	names := []string{"w1", "w2", "w3"}
	for _, name := range names {
		cmd := exec.Command(filepath.Join(bin, "workers"), "-cell", srv.RPCAddr, "-name", name, "-partitions", strconv.Itoa(partitions),
			"-ttl", ttl.String(), "-lock-delay", lockDelay.String(), "-step", "50ms")
		workers[name] = proc.StartChild(t, name, cmd, func(line string, at time.Time) {
			t.Logf("%s: %s", name, line)
			o.line(name, line, at)
		})
	}
	wait.For(t, 20*time.Second, "every partition owned, two per worker", func() bool { return balanced(o.snapshot(), names) })

	killed := "w2"
	workers[killed].Kill() // SIGKILL
	at := time.Now()
	had := o.drop(killed)
	live := []string{"w1", "w3"}
	wait.For(t, 20*time.Second, fmt.Sprintf("%s's partitions %v owned by the others", killed, had), func() bool {
		snap := o.snapshot()
		for _, n := range had {
			if _, ok := snap[n]; !ok {
				return false
			}
		}
		return true
	})
	var took time.Duration
	o.mu.Lock()
	for _, n := range had {
		took = max(took, o.at[n].Sub(at))
	}
	o.mu.Unlock()
	bound := ttl + lockDelay + time.Second
	t.Logf("SIGKILLed %s; its partitions %v owned again after %v (bound %v)", killed, had, took.Round(time.Millisecond), bound)
	if took > bound {
		t.Errorf("partitions owned again %v after the kill, bound TTL + lock-delay + 1 s = %v", took, bound)
	}
	wait.For(t, 10*time.Second, "every partition owned once, three per live worker", func() bool { return balanced(o.snapshot(), live) })
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, b := range o.bad {
		t.Error(b)
	}
}
