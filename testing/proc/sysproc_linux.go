package proc

import "syscall"

// sysProcAttr puts a child in its own process group (so the harness can end
// it and anything it started by its id) and has the kernel kill it if the
// test binary dies without running its cleanups.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
