//go:build unix && !linux

package proc

import "syscall"

// sysProcAttr puts a child in its own process group so the harness can end
// it and anything it started by its id.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
