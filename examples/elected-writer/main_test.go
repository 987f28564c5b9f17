package main

// The example run as processes: a chubbyd, the fenced store and two
// writers. The leader is paused (SIGSTOP) past its TTL and lock-delay: the
// other writer leads, and the paused one, woken, writes nothing the store
// admits; then the new leader is SIGKILLed and the first leads again. The
// store's log holds generations in order, each written by the writer that
// led with it.

import (
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chubby-dev/chubby/testing/proc"
	"github.com/chubby-dev/chubby/testing/wait"
)

func TestMain(m *testing.M) { os.Exit(proc.Main(m)) }

// lines collects a child's stdout lines.
type lines struct {
	mu sync.Mutex
	l  []string
}

func (l *lines) add(s string, _ time.Time) {
	l.mu.Lock()
	l.l = append(l.l, s)
	l.mu.Unlock()
}

// find returns the first line with prefix, at or after index from.
func (l *lines) find(prefix string, from int) (string, int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for i := from; i < len(l.l); i++ {
		if strings.HasPrefix(l.l[i], prefix) {
			return l.l[i], i
		}
	}
	return "", -1
}

func (l *lines) n() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.l)
}

var seqGen = regexp.MustCompile(`^X:([0-9]+):`)

func gen(t *testing.T, seq string) uint64 {
	t.Helper()
	m := seqGen.FindStringSubmatch(seq)
	if m == nil {
		t.Fatalf("%q is not a sequencer", seq)
	}
	g, _ := strconv.ParseUint(m[1], 10, 64)
	return g
}

func TestElectedWriterFencesTheStore(t *testing.T) {
	const ttl, delay = 2 * time.Second, 500 * time.Millisecond
	bin := t.TempDir()
	if err := proc.BuildCommands(bin, "./examples/elected-writer"); err != nil {
		t.Fatal(err)
	}
	exe := filepath.Join(bin, "elected-writer")
	s := proc.StartServer(t, proc.Options{})

	var storeOut lines
	proc.StartChild(t, "store", exec.Command(exe, "store", "-listen", "127.0.0.1:0"), storeOut.add)
	var storeAddr string
	wait.For(t, 10*time.Second, "the store listening", func() bool {
		l, _ := storeOut.find("store listening ", 0)
		storeAddr = strings.TrimPrefix(l, "store listening ")
		return l != ""
	})

	start := func(name string, out *lines) *proc.Child {
		return proc.StartChild(t, "writer-"+name, exec.Command(exe, "write", "-cell", s.RPCAddr, "-dir", "/ls/local/writer",
			"-name", name, "-store", "http://"+storeAddr, "-ttl", ttl.String(), "-delay", delay.String(), "-every", "20ms"), out.add)
	}
	var outA, outB lines
	a := start("A", &outA)
	wait.For(t, 15*time.Second, "A leading", func() bool { l, _ := outA.find("leading A", 0); return l != "" })
	b := start("B", &outB)
	wait.For(t, 10*time.Second, "A's writes admitted", func() bool { l, _ := storeOut.find("admitted", 0); return l != "" })

	// A paused past its TTL and lock-delay: B leads.
	a.Pause(t)
	paused := time.Now()
	wait.For(t, ttl+delay+10*time.Second, "B leading", func() bool { l, _ := outB.find("leading B", 0); return l != "" })
	t.Logf("B leads %v after A was paused", time.Since(paused).Round(time.Millisecond))
	wait.For(t, 10*time.Second, "B's writes admitted", func() bool { return strings.Contains(lastAdmitted(&storeOut), " B ") })
	// A wakes believing it leads, until its lease check or the store says no.
	a.Resume(t)
	wait.For(t, 10*time.Second, "A giving up its old term", func() bool {
		l1, _ := outA.find("lost A", 0)
		l2, _ := outA.find("refused A", 0)
		return l1 != "" || l2 != ""
	})

	if l, _ := outA.find("refused A", 0); l != "" {
		t.Logf("A, woken, wrote with its old term's sequencer: the store refused it")
	} else {
		t.Logf("A, woken, saw its term lost before writing")
	}

	// B dies: A leads again, with a newer sequencer than B's.
	b.Kill()
	killed := time.Now()
	var again string
	wait.For(t, ttl+delay+10*time.Second, "A leading again", func() bool {
		_, i := outA.find("leading A", 0)
		again, _ = outA.find("leading A", i+1)
		return again != ""
	})
	t.Logf("A leads again %v after B was killed (TTL %v + lock-delay %v)", time.Since(killed).Round(time.Millisecond), ttl, delay)
	wait.For(t, 10*time.Second, "A's new writes admitted", func() bool { return strings.Contains(lastAdmitted(&storeOut), " A ") })

	// Who led with which generation.
	leaders := map[uint64]string{}
	for _, out := range []*lines{&outA, &outB} {
		for i := 0; ; i++ {
			l, j := out.find("leading ", i)
			if j < 0 {
				break
			}
			f := strings.Fields(l)
			leaders[gen(t, f[2])] = f[1]
			i = j
		}
	}
	// The store's log: generations never go back, and each write is its
	// term's leader's.
	resp, err := http.Get("http://" + storeAddr + "/log")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var last uint64
	writers := map[string]bool{}
	for _, l := range strings.Split(strings.TrimSpace(string(body)), "\n") {
		f := strings.Fields(l)
		if len(f) != 3 {
			t.Fatalf("store log line %q", l)
		}
		g, _ := strconv.ParseUint(f[0], 10, 64)
		if g < last {
			t.Errorf("store admitted generation %d after %d: %q", g, last, l)
		}
		last = g
		if leaders[g] != f[1] {
			t.Errorf("store admitted %q: generation %d was led by %q", l, g, leaders[g])
		}
		writers[f[1]] = true
	}
	if !writers["A"] || !writers["B"] || len(leaders) < 3 {
		t.Errorf("the run did not go through three terms of both writers: leaders %v, writers %v", leaders, writers)
	}
}

func lastAdmitted(l *lines) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	for i := len(l.l) - 1; i >= 0; i-- {
		if strings.HasPrefix(l.l[i], "admitted") {
			return l.l[i]
		}
	}
	return ""
}
