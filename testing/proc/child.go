package proc

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/chubby-dev/chubby/testing/wait"
)

// Child is a helper process of a test that is neither chubbyd nor chubbysh:
// typically the test binary itself re-executed as a client worker (its
// TestMain sees an environment variable and runs the worker), so that a
// client can be stopped for real with SIGSTOP. It runs in its own process
// group, dies with the test binary, and is killed and reaped in t.Cleanup.
// Its stdin is a pipe (CloseStdin is the usual "stop" request), every
// stdout line is handed to a callback as it arrives, and stderr goes to a
// file.
type Child struct {
	Name       string
	StderrPath string

	cmd    *exec.Cmd
	stdin  io.WriteCloser
	paused atomic.Bool
	done   chan struct{} // the process was reaped and stdout read to its end
	state  *os.ProcessState
}

// StartChild starts cmd (its Stdin, Stdout, Stderr and SysProcAttr are set
// here) as a Child named name. onLine, if not nil, is called from one
// goroutine with each stdout line (without its newline) and the time it was
// read; every call has returned before Wait or Done report the exit.
func StartChild(t testing.TB, name string, cmd *exec.Cmd, onLine func(line string, at time.Time)) *Child {
	t.Helper()
	c, err := StartProcess(name, cmd, t.TempDir(), onLine)
	if err != nil {
		t.Fatalf("proc: start %s: %v", name, err)
	}
	t.Cleanup(func() {
		c.Kill()
		c.stdin.Close()
		if t.Failed() {
			t.Logf("%s (pid %d) stderr, last lines:\n%s", name, c.PID(), tail(c.Stderr(), 30))
		}
	})
	return c
}

// StartProcess is StartChild for programs that are not tests: the child's
// stderr goes to a file in stderrDir, and ending it (Kill) is the caller's
// job, as is removing stderrDir. It still dies with the process that
// started it.
func StartProcess(name string, cmd *exec.Cmd, stderrDir string, onLine func(line string, at time.Time)) (*Child, error) {
	inW, outR, stderrPath, err := startPiped(stderrDir, name, cmd)
	if err != nil {
		return nil, err
	}
	c := &Child{Name: name, StderrPath: stderrPath, cmd: cmd, stdin: inW, done: make(chan struct{})}
	read := make(chan struct{})
	go func() {
		defer close(read)
		defer outR.Close()
		br := bufio.NewReader(outR)
		for {
			line, err := br.ReadString('\n')
			if line != "" && onLine != nil {
				onLine(strings.TrimSuffix(line, "\n"), time.Now())
			}
			if err != nil {
				return
			}
		}
	}()
	go func() {
		cmd.Wait()
		// The group may hold a process that still has stdout open.
		killLeftovers(cmd.Process.Pid)
		<-read
		c.state = cmd.ProcessState
		close(c.done)
	}()
	return c, nil
}

// PID is the child's process id.
func (c *Child) PID() int { return c.cmd.Process.Pid }

// CloseStdin closes the child's stdin (EOF).
func (c *Child) CloseStdin() { c.stdin.Close() }

// Pause stops the child (SIGSTOP) and returns once every one of its threads
// is stopped.
func (c *Child) Pause(t testing.TB) {
	t.Helper()
	if err := c.Suspend(); err != nil {
		t.Fatalf("SIGSTOP %s: %v", c.Name, err)
	}
}

// Suspend is Pause returning its error: it sends SIGSTOP and waits until
// every thread of the child is stopped. A child that exited meanwhile is not
// an error.
func (c *Child) Suspend() error {
	if err := syscall.Kill(c.PID(), syscall.SIGSTOP); err != nil {
		return err
	}
	c.paused.Store(true)
	if err := waitStopped(c.PID(), 5*time.Second); err != nil && !c.Exited() {
		return err
	}
	return nil
}

// Resume continues a paused child (SIGCONT).
func (c *Child) Resume(t testing.TB) {
	t.Helper()
	if err := c.Continue(); err != nil {
		t.Fatalf("SIGCONT %s: %v", c.Name, err)
	}
}

// Continue is Resume returning its error (none if the child has exited).
func (c *Child) Continue() error {
	if err := syscall.Kill(c.PID(), syscall.SIGCONT); err != nil && !c.Exited() {
		return err
	}
	c.paused.Store(false)
	return nil
}

// Paused reports whether the child was paused and not resumed since.
func (c *Child) Paused() bool { return c.paused.Load() }

// Done is closed once the child has exited and its stdout was read to the
// end.
func (c *Child) Done() <-chan struct{} { return c.done }

// Exited reports whether Done is closed.
func (c *Child) Exited() bool { return wait.Closed(c.done) }

// Wait waits up to timeout for the child to exit and returns its exit code
// (-1 if a signal ended it); an error if it still runs.
func (c *Child) Wait(timeout time.Duration) (int, error) {
	select {
	case <-c.done:
		return c.state.ExitCode(), nil
	case <-time.After(timeout):
		return 0, fmt.Errorf("%s (pid %d) still running after %v", c.Name, c.PID(), timeout)
	}
}

// Kill kills the child's process group (continuing it first if paused) and
// waits until it is reaped.
func (c *Child) Kill() {
	if c.Exited() {
		return
	}
	syscall.Kill(-c.PID(), syscall.SIGCONT)
	if err := syscall.Kill(-c.PID(), syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		syscall.Kill(c.PID(), syscall.SIGKILL)
	}
	<-c.done
	c.paused.Store(false)
}

// Stderr is what the child has written to stderr so far.
func (c *Child) Stderr() string {
	b, _ := os.ReadFile(c.StderrPath)
	return string(b)
}

// startPiped starts cmd in a process group of its own (sysProcAttr) with
// stdin and stdout pipes and stderr to a file in t.TempDir(): it returns the
// test's ends of the pipes and the stderr file's path. On an error nothing
// is left open. (The tests' own ends of the pipes are closed in the test
// process, so EOF on stdout means the process and what it started closed
// theirs.)
func startPiped(dir, name string, cmd *exec.Cmd) (stdin, stdout *os.File, stderrPath string, err error) {
	errFile, err := os.CreateTemp(dir, name+"-stderr-")
	if err != nil {
		return nil, nil, "", err
	}
	defer errFile.Close()
	inR, inW, err := os.Pipe()
	if err != nil {
		return nil, nil, "", err
	}
	defer inR.Close()
	outR, outW, err := os.Pipe()
	if err != nil {
		inW.Close()
		return nil, nil, "", err
	}
	defer outW.Close()
	cmd.SysProcAttr = sysProcAttr()
	cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, errFile
	if err := cmd.Start(); err != nil {
		inW.Close()
		outR.Close()
		return nil, nil, "", err
	}
	return inW, outR, errFile.Name(), nil
}
