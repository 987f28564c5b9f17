package proc

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/chubby-dev/chubby/testing/wait"
)

// DefaultShTimeout bounds a synchronous chubbysh run: a shell still running
// then is killed and fails the test.
const DefaultShTimeout = 30 * time.Second

// Result is a finished chubbysh run.
type Result struct {
	// Bin is the binary's name (chubbysh, chubbyd).
	Bin    string
	Args   []string
	Stdout string
	Stderr string
	// Code is the exit code, or -1 if the process was ended by a signal.
	Code int
	// Took is the wall time from start to exit.
	Took time.Duration
}

func (r *Result) String() string {
	return fmt.Sprintf("%s %s: exit %d after %v\nstdout: %q\nstderr: %q",
		r.Bin, strings.Join(r.Args, " "), r.Code, r.Took.Round(time.Millisecond), r.Stdout, r.Stderr)
}

// Out is stdout without its trailing newline.
func (r *Result) Out() string { return strings.TrimSuffix(r.Stdout, "\n") }

// Lines are stdout's lines (none for empty stdout).
func (r *Result) Lines() []string {
	if r.Stdout == "" {
		return nil
	}
	return strings.Split(strings.TrimSuffix(r.Stdout, "\n"), "\n")
}

// StderrLines are stderr's lines (none for empty stderr).
func (r *Result) StderrLines() []string {
	if r.Stderr == "" {
		return nil
	}
	return strings.Split(strings.TrimSuffix(r.Stderr, "\n"), "\n")
}

// JSON asserts that stdout is exactly one JSON object on one line and
// returns it.
func (r *Result) JSON(t testing.TB) map[string]any {
	t.Helper()
	obj, err := OneJSONObject(r.Stdout)
	if err != nil {
		t.Fatalf("%v\n%s", err, r)
	}
	return obj
}

// OneJSONObject checks that out is exactly one JSON object on one line
// (ending in a newline) and decodes it. Numbers decode as json.Number.
func OneJSONObject(out string) (map[string]any, error) {
	if !strings.HasSuffix(out, "\n") || strings.Count(out, "\n") != 1 {
		return nil, fmt.Errorf("want exactly one line of stdout, got %q", out)
	}
	return DecodeJSONLine(strings.TrimSuffix(out, "\n"))
}

// DecodeJSONLine decodes one line that must hold exactly one JSON object.
func DecodeJSONLine(line string) (map[string]any, error) {
	dec := json.NewDecoder(strings.NewReader(line))
	dec.UseNumber()
	var obj map[string]any
	if err := dec.Decode(&obj); err != nil {
		return nil, fmt.Errorf("not a JSON object: %q: %v", line, err)
	}
	if obj == nil {
		return nil, fmt.Errorf("not a JSON object: %q", line)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("more than one JSON value on the line %q", line)
	}
	return obj, nil
}

// ShOptions modify a synchronous chubbysh run.
type ShOptions struct {
	// Stdin is the script fed on stdin (nil: /dev/null).
	Stdin io.Reader
	// Timeout kills a shell still running (0: DefaultShTimeout) and fails
	// the test.
	Timeout time.Duration
	// Env is added to the environment.
	Env []string
}

// RunSh runs `chubbysh -cell CELL args...` to completion. An empty cell
// passes no -cell flag.
func RunSh(t testing.TB, cell string, opts ShOptions, args ...string) *Result {
	t.Helper()
	bins := Build(t)
	argv := args
	if cell != "" {
		argv = append([]string{"-cell", cell}, args...)
	}
	timeout := opts.Timeout
	if timeout == 0 {
		timeout = DefaultShTimeout
	}
	return run(t, bins.Chubbysh, &opts, timeout, argv...)
}

// run runs a binary to completion in its own process group, which is
// killed when it exits or times out; a hang or a failure to run fails t.
func run(t testing.TB, bin string, opts *ShOptions, timeout time.Duration, argv ...string) *Result {
	t.Helper()
	r, err := runE(bin, opts, timeout, argv...)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// errHung: a process was still running at its timeout and was killed.
var errHung = errors.New("hung")

// runE is run without a test: a hang or a failure to run is an error.
func runE(bin string, opts *ShOptions, timeout time.Duration, argv ...string) (*Result, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, argv...)
	cmd.SysProcAttr = sysProcAttr()
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	// A grandchild (lock -- CMD) that outlives chubbysh must not hang us.
	cmd.WaitDelay = 2 * time.Second
	cmd.Env = os.Environ()
	if opts != nil {
		cmd.Env = append(cmd.Env, opts.Env...)
		cmd.Stdin = opts.Stdin
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err := cmd.Run()
	r := &Result{Bin: filepath.Base(bin), Args: argv, Stdout: stdout.String(), Stderr: stderr.String(), Took: time.Since(start)}
	if cmd.Process != nil {
		// Anything the process left behind in its group goes too.
		killLeftovers(cmd.Process.Pid)
	}
	var ee *exec.ExitError
	switch {
	case ctx.Err() != nil:
		return r, fmt.Errorf("%s %w: still running after %v, killed\n%s", filepath.Base(bin), errHung, timeout, r)
	case err == nil:
		r.Code = 0
	case errors.As(err, &ee):
		r.Code = ee.ExitCode()
	case errors.Is(err, exec.ErrWaitDelay):
		r.Code = cmd.ProcessState.ExitCode()
	default:
		return r, fmt.Errorf("run %s: %v\n%s", filepath.Base(bin), err, r)
	}
	return r, nil
}

// Line is one line a background shell printed on stdout.
type Line struct {
	Text string
	// At is when the harness read it.
	At time.Time
}

// Shell is a chubbysh running in the background.
type Shell struct {
	Args []string
	// Started is when the process was started.
	Started time.Time

	cmd        *exec.Cmd
	stdin      *os.File
	stderrPath string

	mu      sync.Mutex
	lines   []Line
	next    int
	newLine chan struct{} // closed and replaced when a line arrives
	eof     chan struct{} // stdout reached EOF

	done     chan struct{}
	exitCode int
	exitedAt time.Time
}

// StartSh starts `chubbysh -cell CELL args...` in the background. Its stdin
// is a pipe (Send, CloseStdin); stdout lines are collected with their
// arrival times (NextLine); stderr goes to a file (Stderr). The process group
// is killed in t.Cleanup if it is still running.
func StartSh(t testing.TB, cell string, args ...string) *Shell {
	t.Helper()
	bins := Build(t)
	argv := args
	if cell != "" {
		argv = append([]string{"-cell", cell}, args...)
	}
	cmd := exec.Command(bins.Chubbysh, argv...)
	started := time.Now()
	inW, outR, stderrPath, err := startPiped(t.TempDir(), "chubbysh", cmd)
	if err != nil {
		t.Fatalf("start chubbysh: %v", err)
	}
	sh := &Shell{Args: argv, Started: started, cmd: cmd, stdin: inW, stderrPath: stderrPath,
		newLine: make(chan struct{}), eof: make(chan struct{}), done: make(chan struct{})}
	go sh.readStdout(outR)
	go func() {
		err := cmd.Wait()
		code := 0
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			code = ee.ExitCode()
		} else if err != nil {
			code = -1
		}
		sh.mu.Lock()
		sh.exitCode, sh.exitedAt = code, time.Now()
		sh.mu.Unlock()
		close(sh.done)
	}()
	t.Cleanup(func() {
		sh.kill()
		sh.stdin.Close()
		if t.Failed() {
			t.Logf("background chubbysh %s (pid %d) stderr:\n%s", strings.Join(argv, " "), sh.PID(), tail(sh.Stderr(), 30))
		}
	})
	return sh
}

func (sh *Shell) readStdout(r *os.File) {
	defer r.Close()
	defer close(sh.eof)
	br := bufio.NewReader(r)
	for {
		text, err := br.ReadString('\n')
		if text != "" {
			at := time.Now()
			sh.mu.Lock()
			sh.lines = append(sh.lines, Line{Text: strings.TrimSuffix(text, "\n"), At: at})
			close(sh.newLine)
			sh.newLine = make(chan struct{})
			sh.mu.Unlock()
		}
		if err != nil {
			return
		}
	}
}

// PID is the shell's process id.
func (sh *Shell) PID() int { return sh.cmd.Process.Pid }

// NextLine returns the next stdout line not returned yet, waiting up to
// timeout. It fails the test if none arrives in time or stdout ends.
func (sh *Shell) NextLine(t testing.TB, timeout time.Duration) Line {
	t.Helper()
	l, err := sh.nextLine(timeout)
	if err != nil {
		t.Fatalf("chubbysh %s: %v\nstderr: %s", strings.Join(sh.Args, " "), err, tail(sh.Stderr(), 20))
	}
	return l
}

func (sh *Shell) nextLine(timeout time.Duration) (Line, error) {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		sh.mu.Lock()
		if sh.next < len(sh.lines) {
			l := sh.lines[sh.next]
			sh.next++
			sh.mu.Unlock()
			return l, nil
		}
		wait := sh.newLine
		sh.mu.Unlock()
		select {
		case <-wait:
		case <-sh.eof:
			sh.mu.Lock()
			more := sh.next < len(sh.lines)
			sh.mu.Unlock()
			if !more {
				return Line{}, fmt.Errorf("stdout ended (exit %s) without another line", sh.exitString())
			}
		case <-deadline.C:
			return Line{}, fmt.Errorf("no stdout line within %v (exit %s)", timeout, sh.exitString())
		}
	}
}

// PeekLines returns every stdout line read so far without consuming them.
func (sh *Shell) PeekLines() []Line {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	return append([]Line(nil), sh.lines...)
}

// Send writes one line to the shell's stdin (a script line).
func (sh *Shell) Send(t testing.TB, line string) {
	t.Helper()
	if _, err := io.WriteString(sh.stdin, line+"\n"); err != nil {
		t.Fatalf("write to chubbysh stdin: %v", err)
	}
}

// CloseStdin ends the script (EOF on the shell's stdin).
func (sh *Shell) CloseStdin() { sh.stdin.Close() }

// Signal sends sig to the shell process (not its group).
func (sh *Shell) Signal(t testing.TB, sig syscall.Signal) {
	t.Helper()
	if err := syscall.Kill(sh.PID(), sig); err != nil && !sh.Exited() {
		t.Fatalf("signal %v to chubbysh %d: %v", sig, sh.PID(), err)
	}
}

// Kill sends SIGKILL to the shell process (not its group: a child it runs
// is left for the test to look at), and waits until it is gone.
func (sh *Shell) Kill(t testing.TB) {
	t.Helper()
	sh.Signal(t, syscall.SIGKILL)
	if _, ok := sh.waitFor(10 * time.Second); !ok {
		t.Fatalf("chubbysh %d still running 10s after SIGKILL", sh.PID())
	}
}

// Wait waits up to timeout for the shell to exit and returns its exit code
// (-1: ended by a signal). A shell still running fails the test.
func (sh *Shell) Wait(t testing.TB, timeout time.Duration) int {
	t.Helper()
	code, ok := sh.waitFor(timeout)
	if !ok {
		t.Fatalf("chubbysh %s (pid %d) still running after %v\nstderr: %s",
			strings.Join(sh.Args, " "), sh.PID(), timeout, tail(sh.Stderr(), 20))
	}
	return code
}

func (sh *Shell) waitFor(timeout time.Duration) (int, bool) {
	select {
	case <-sh.done:
		sh.mu.Lock()
		defer sh.mu.Unlock()
		return sh.exitCode, true
	case <-time.After(timeout):
		return 0, false
	}
}

// Exited reports whether the shell has exited.
func (sh *Shell) Exited() bool { return wait.Closed(sh.done) }

// ExitedAt is when the harness saw the shell exit (zero while it runs).
func (sh *Shell) ExitedAt() time.Time {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	return sh.exitedAt
}

func (sh *Shell) exitString() string {
	if !sh.Exited() {
		return "none yet"
	}
	sh.mu.Lock()
	defer sh.mu.Unlock()
	return strconv.Itoa(sh.exitCode)
}

// Stderr is what the shell has written to stderr so far.
func (sh *Shell) Stderr() string {
	b, _ := os.ReadFile(sh.stderrPath)
	return string(b)
}

// Children are the process ids of the shell's child processes (from /proc).
func (sh *Shell) Children(t testing.TB) []int {
	t.Helper()
	return children(t, sh.PID())
}

func children(t testing.TB, pid int) []int {
	t.Helper()
	// Read the parent of every process from /proc/PID/stat (field 4, after
	// the parenthesised command name, which may itself contain spaces).
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatalf("read /proc: %v", err)
	}
	var pids []int
	for _, e := range entries {
		child, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue // exited meanwhile
		}
		i := strings.LastIndexByte(string(b), ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(b[i+1:]))
		if len(f) < 2 {
			continue
		}
		if ppid, err := strconv.Atoi(f[1]); err == nil && ppid == pid {
			pids = append(pids, child)
		}
	}
	return pids
}

// kill ends the shell's process group and waits for the shell to be reaped.
func (sh *Shell) kill() {
	if sh.Exited() {
		// Its group may still hold a child it left running.
		killLeftovers(sh.PID())
		return
	}
	syscall.Kill(-sh.PID(), syscall.SIGKILL)
	<-sh.done
}

// killLeftovers kills what is left of the process group of a leader that
// was started with its own group and has been reaped. While any member
// lives the group id cannot be reused as a process id, so the group is
// still ours unless a process with that id exists (the group was empty and
// the id went to a new process): then nothing is killed.
func killLeftovers(leader int) {
	if err := syscall.Kill(leader, 0); errors.Is(err, syscall.ESRCH) {
		syscall.Kill(-leader, syscall.SIGKILL)
	}
}

// ProcessAlive reports whether a process with this id exists and is not a
// zombie.
func ProcessAlive(pid int) bool {
	if err := syscall.Kill(pid, 0); err != nil {
		return !errors.Is(err, syscall.ESRCH)
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return !errors.Is(err, os.ErrNotExist)
	}
	// pid (comm) STATE ...; comm may contain spaces and parentheses.
	s := string(b)
	if i := strings.LastIndexByte(s, ')'); i >= 0 && i+2 < len(s) {
		return s[i+2] != 'Z'
	}
	return true
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = append([]string{fmt.Sprintf("... (%d lines before)", len(lines)-n)}, lines[len(lines)-n:]...)
	}
	return strings.Join(lines, "\n")
}

// Pending is how many stdout lines have arrived that NextLine has not
// returned yet.
func (sh *Shell) Pending() int {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	return len(sh.lines) - sh.next
}
