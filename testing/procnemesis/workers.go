package procnemesis

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chubby-dev/chubby/testing/nemesis/core"
	"github.com/chubby-dev/chubby/testing/proc"
)

// WorkerProc is the test's side of a lock-client worker: the test binary
// re-executed with WorkerEnv set, in its own process group (proc.Child), so
// that SIGSTOP stops the client for real — its KeepAlive loop, its timers,
// its connections — as a long GC pause or a descheduled VM would. Its
// events arrive on stdout as JSON lines and are kept here.
type WorkerProc struct {
	ID    int
	Child *proc.Child

	mu      sync.Mutex
	events  []core.Event
	bad     []string      // stdout lines that are not events
	readCh  chan struct{} // closed and replaced on each successful read
	lastAcq int64         // MonoNow of the last successful Acquire's return
	pauses  [][2]int64    // SIGSTOP..SIGCONT, MonoNow
}

// StartWorker starts worker cfg.ID; it is killed in t.Cleanup if still
// running.
func StartWorker(t testing.TB, cfg WorkerConfig) *WorkerProc {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	w := &WorkerProc{ID: cfg.ID, readCh: make(chan struct{})}
	cmd := exec.Command(exe, "-test.run=^$")
	cmd.Env = append(os.Environ(), WorkerEnv+"="+string(b))
	w.Child = proc.StartChild(t, fmt.Sprintf("lockworker%d", cfg.ID), cmd, w.onLine)
	return w
}

func (w *WorkerProc) onLine(line string, _ time.Time) {
	var e core.Event
	err := json.Unmarshal([]byte(line), &e)
	w.mu.Lock()
	defer w.mu.Unlock()
	if err != nil || e.Ev == "" || e.Worker != w.ID {
		w.bad = append(w.bad, line)
		return
	}
	w.events = append(w.events, e)
	switch {
	case e.Ev == "read" && e.OK:
		close(w.readCh)
		w.readCh = make(chan struct{})
	case e.Ev == "acq" && e.OK:
		w.lastAcq = e.Ret
	}
}

// Events are the worker's events so far.
func (w *WorkerProc) Events() []core.Event {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]core.Event(nil), w.events...)
}

// BadLines are stdout lines that did not parse as this worker's events.
func (w *WorkerProc) BadLines() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.bad...)
}

// LastAcquire is MonoNow of the return of the worker's last successful
// Acquire (0: none yet).
func (w *WorkerProc) LastAcquire() int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.lastAcq
}

// WaitRead waits up to timeout for the worker's next successful read of
// the counter — the start of its think time, with a value it will write
// back — and reports whether one came.
func (w *WorkerProc) WaitRead(timeout time.Duration) bool {
	w.mu.Lock()
	ch := w.readCh
	w.mu.Unlock()
	select {
	case <-ch:
		return true
	case <-time.After(timeout):
		return false
	}
}

// Pause SIGSTOPs the worker.
func (w *WorkerProc) Pause(t testing.TB) {
	t.Helper()
	w.Child.Pause(t)
	w.mu.Lock()
	w.pauses = append(w.pauses, [2]int64{MonoNow(), 0})
	w.mu.Unlock()
}

// Resume SIGCONTs the worker.
func (w *WorkerProc) Resume(t testing.TB) {
	t.Helper()
	w.Child.Resume(t)
	w.mu.Lock()
	if n := len(w.pauses); n > 0 && w.pauses[n-1][1] == 0 {
		w.pauses[n-1][1] = MonoNow()
	}
	w.mu.Unlock()
}

// Pauses are the worker's SIGSTOP..SIGCONT intervals (MonoNow).
func (w *WorkerProc) Pauses() [][2]int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([][2]int64(nil), w.pauses...)
}

// Stop asks the worker to stop (closes its stdin) and waits up to timeout
// for it to finish its hold, close its session and exit. An exit other than
// 0, a missing exit event, or a data race reported by a -race build is an
// error.
func (w *WorkerProc) Stop(timeout time.Duration) error {
	w.Child.CloseStdin()
	code, err := w.Child.Wait(timeout)
	if err != nil {
		w.Child.Kill()
		return err
	}
	var problems []string
	if code != 0 {
		problems = append(problems, fmt.Sprintf("exited %d", code))
	}
	if ev := w.Events(); len(ev) == 0 || ev[len(ev)-1].Ev != "exit" {
		problems = append(problems, "no exit event")
	}
	if strings.Contains(w.Child.Stderr(), "DATA RACE") {
		problems = append(problems, "reported a data race")
	}
	if bad := w.BadLines(); len(bad) > 0 {
		problems = append(problems, fmt.Sprintf("%d stdout lines are not events, first %q", len(bad), bad[0]))
	}
	if len(problems) > 0 {
		return fmt.Errorf("lock worker %d (pid %d): %s; stderr:\n%s", w.ID, w.Child.PID(), strings.Join(problems, "; "), tailLines(w.Child.Stderr(), 30))
	}
	return nil
}

func tailLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
