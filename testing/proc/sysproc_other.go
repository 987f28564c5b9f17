//go:build unix && !linux

package proc

import (
	"syscall"
	"time"
)

// sysProcAttr puts a child in its own process group so the harness can end
// it and anything it started by its id.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}

// waitStopped cannot look at the threads' states here: it gives the
// signal a moment to be taken.
func waitStopped(pid int, timeout time.Duration) error {
	time.Sleep(min(timeout, 50*time.Millisecond))
	return nil
}
