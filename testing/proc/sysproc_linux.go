package proc

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/chubby-dev/chubby/testing/wait"
)

// sysProcAttr puts a child in its own process group (so the harness can end
// it and anything it started by its id) and has the kernel kill it if the
// test binary dies without running its cleanups.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// waitStopped waits until every thread of process pid is in the stopped
// state (T in /proc/PID/task/TID/stat).
func waitStopped(pid int, timeout time.Duration) error {
	var running []string
	var err error
	if wait.Until(timeout, func() bool {
		running, err = runningThreads(pid)
		return err != nil || len(running) == 0
	}) {
		return err
	}
	return fmt.Errorf("threads %v of process %d still not stopped after %v", running, pid, timeout)
}

// runningThreads are the threads of pid not in a stopped state.
func runningThreads(pid int) ([]string, error) {
	dir := fmt.Sprintf("/proc/%d/task", pid)
	tasks, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var running []string
	for _, task := range tasks {
		b, err := os.ReadFile(filepath.Join(dir, task.Name(), "stat"))
		if err != nil {
			continue // the thread exited
		}
		// TID (comm) STATE ...; comm may contain spaces and parentheses.
		st := string(b)
		i := strings.LastIndexByte(st, ')')
		if i < 0 || i+2 >= len(st) {
			return nil, fmt.Errorf("%s/%s/stat: %q", dir, task.Name(), st)
		}
		if c := st[i+2]; c != 'T' && c != 't' {
			running = append(running, fmt.Sprintf("%s:%c", task.Name(), c))
		}
	}
	return running, nil
}
