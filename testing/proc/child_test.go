package proc

import (
	"os/exec"
	"sync"
	"testing"
	"time"
)

// TestChild: stdout lines reach the callback, a paused child does not run
// until resumed, closing stdin lets it finish, and every line was handed
// over by the time Wait returns.
func TestChild(t *testing.T) {
	var mu sync.Mutex
	var lines []string
	got := make(chan string, 10)
	c := StartChild(t, "sh", exec.Command("sh", "-c", "echo ready; read x; echo bye; echo err >&2"), func(l string, _ time.Time) {
		mu.Lock()
		lines = append(lines, l)
		mu.Unlock()
		got <- l
	})
	if l := <-got; l != "ready" {
		t.Fatalf("first line %q", l)
	}
	c.Pause(t)
	if !c.Paused() {
		t.Fatal("not paused")
	}
	c.CloseStdin()
	select {
	case l := <-got:
		t.Fatalf("a stopped child printed %q", l)
	case <-time.After(100 * time.Millisecond):
	}
	c.Resume(t)
	code, err := c.Wait(10 * time.Second)
	if err != nil || code != 0 {
		t.Fatalf("exit %d, %v", code, err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(lines) != 2 || lines[1] != "bye" {
		t.Fatalf("lines %q", lines)
	}
	if c.Stderr() != "err\n" {
		t.Fatalf("stderr %q", c.Stderr())
	}
}

// TestChildKilledInCleanup: a child still running (and paused) when the test
// ends is killed and reaped by the cleanup.
func TestChildKilledInCleanup(t *testing.T) {
	var c *Child
	t.Run("leaves a child", func(t *testing.T) {
		c = StartChild(t, "sleeper", exec.Command("sleep", "60"), nil)
		c.Pause(t)
	})
	if !c.Exited() {
		t.Fatalf("the child outlived its test")
	}
	if ProcessAlive(c.PID()) {
		t.Fatalf("process %d still alive", c.PID())
	}
}
