package proc

import (
	"os/exec"
	"syscall"
	"testing"
	"time"
)

func TestWaitStopped(t *testing.T) {
	cmd := exec.Command("sleep", "30")
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		syscall.Kill(cmd.Process.Pid, syscall.SIGKILL)
		cmd.Wait()
	}()
	if running, err := runningThreads(cmd.Process.Pid); err != nil || len(running) == 0 {
		t.Fatalf("a sleeping process: running threads %v, %v; want its thread", running, err)
	}
	if err := waitStopped(cmd.Process.Pid, 50*time.Millisecond); err == nil {
		t.Fatalf("waitStopped returned nil for a process that was not stopped")
	}
	syscall.Kill(cmd.Process.Pid, syscall.SIGSTOP)
	if err := waitStopped(cmd.Process.Pid, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	syscall.Kill(cmd.Process.Pid, syscall.SIGCONT)
}
