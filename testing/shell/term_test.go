package shell

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/chubby-dev/chubby/testing/proc"
	"github.com/chubby-dev/chubby/testing/wait"
	"github.com/creack/pty"
	"golang.org/x/sys/unix"
)

// waitFor bounds every wait for the screen or the process.
const waitFor = 15 * time.Second

// Keys as a terminal sends them.
const (
	keyTab   = "\t"
	keyEnter = "\r"
	keyUp    = "\x1b[A"
	keyCtrlC = "\x03"
	keyCtrlD = "\x04"
)

// term is chubbysh running on a pseudo-terminal: what it writes is
// collected twice, as raw bytes and as "screen" text with the escape
// sequences, carriage returns, backspaces and bells taken out; expect
// matches the screen text from where the last match ended.
type term struct {
	t    *testing.T
	args []string
	pty  *os.File
	cmd  *exec.Cmd

	mu      sync.Mutex
	raw     []byte
	screen  []byte // starts with "\n"
	pending []byte // the start of an escape sequence not complete yet
	mark    int    // screen[:mark] was consumed by expect
	changed chan struct{}
	eof     chan struct{} // the pty reached EOF (the shell and its children are gone)

	exited chan struct{}
	code   int
}

// startTerm runs `chubbysh -cell ADDR args...` on a new pseudo-terminal
// (200x50) with HOME=home, TERM=xterm and env added; NO_COLOR and
// CHUBBY_CELL from the test's own environment are dropped.
func startTerm(t *testing.T, s *proc.Server, home string, env []string, args ...string) *term {
	t.Helper()
	bins := proc.Build(t)
	argv := append([]string{"-cell", s.RPCAddr}, args...)
	cmd := exec.Command(bins.Chubbysh, argv...)
	for _, kv := range os.Environ() {
		switch name, _, _ := strings.Cut(kv, "="); name {
		case "HOME", "TERM", "NO_COLOR", "CHUBBY_CELL", "COLUMNS", "LINES":
		default:
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, append([]string{"HOME=" + home, "TERM=xterm"}, env...)...)
	f, err := pty.StartWithSize(cmd, &pty.Winsize{Rows: 50, Cols: 200})
	if err != nil {
		t.Fatalf("start chubbysh on a pty: %v", err)
	}
	tm := &term{t: t, args: argv, pty: f, cmd: cmd, changed: make(chan struct{}), eof: make(chan struct{}), exited: make(chan struct{}),
		screen: []byte("\n")} // so that "\nX" matches X at the start of a line, the first one too
	go tm.read()
	go func() {
		err := cmd.Wait()
		code := 0
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			code = ee.ExitCode()
		} else if err != nil {
			code = -1
		}
		tm.mu.Lock()
		tm.code = code
		tm.mu.Unlock()
		close(tm.exited)
	}()
	t.Cleanup(func() {
		select {
		case <-tm.exited:
		default:
			// The shell is its session's leader: its group has its id.
			syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-tm.exited
		}
		f.Close()
		if proc.RaceBinaries() && strings.Contains(tm.Screen(), "WARNING: DATA RACE") {
			t.Errorf("chubbysh %s reported a data race", strings.Join(argv, " "))
		}
		if t.Failed() {
			t.Logf("chubbysh %s screen (last 3000 bytes):\n%s", strings.Join(argv, " "), tail(tm.Screen(), 3000))
		}
	})
	return tm
}

func (tm *term) read() {
	defer close(tm.eof)
	buf := make([]byte, 4096)
	for {
		n, err := tm.pty.Read(buf)
		if n > 0 {
			tm.feed(buf[:n])
		}
		if err != nil {
			return // EIO once the last process holding the slave side is gone
		}
	}
}

func (tm *term) feed(b []byte) {
	tm.mu.Lock()
	defer tm.mu.Unlock()
	tm.raw = append(tm.raw, b...)
	data := append(tm.pending, b...)
	tm.pending = nil
	for i := 0; i < len(data); {
		switch c := data[i]; c {
		case 0x1b:
			n := escapeLen(data[i:])
			if n == 0 {
				tm.pending = append([]byte(nil), data[i:]...)
				i = len(data)
				continue
			}
			i += n
		case '\r', '\b', '\a':
			i++
		default:
			tm.screen = append(tm.screen, c)
			i++
		}
	}
	close(tm.changed)
	tm.changed = make(chan struct{})
}

// escapeLen is the length of the escape sequence d starts with (CSI, OSC
// or a two-byte escape), 0 if d ends before it does.
func escapeLen(d []byte) int {
	if len(d) < 2 {
		return 0
	}
	switch d[1] {
	case '[':
		for j := 2; j < len(d); j++ {
			if d[j] >= 0x40 && d[j] <= 0x7e {
				return j + 1
			}
		}
		return 0
	case ']':
		for j := 2; j < len(d); j++ {
			if d[j] == '\a' {
				return j + 1
			}
			if d[j] == 0x1b && j+1 < len(d) && d[j+1] == '\\' {
				return j + 2
			}
		}
		return 0
	}
	return 2
}

// send types keys.
func (tm *term) send(keys string) {
	tm.t.Helper()
	if _, err := tm.pty.Write([]byte(keys)); err != nil {
		tm.t.Fatalf("type %q: %v", keys, err)
	}
}

// line types a line and Enter.
func (tm *term) line(s string) { tm.t.Helper(); tm.send(s + keyEnter) }

// expect waits until want appears on the screen after the last match and
// returns the screen text up to the end of it.
func (tm *term) expect(want string) string {
	tm.t.Helper()
	got, err := tm.await(want, waitFor)
	if err != nil {
		tm.t.Fatal(err)
	}
	return got
}

// expectLine waits for a whole line of screen text, and leaves its newline
// to start the next match (a prompt after it, say).
func (tm *term) expectLine(line string) {
	tm.t.Helper()
	tm.expect("\n" + line + "\n")
	tm.mu.Lock()
	tm.mark--
	tm.mu.Unlock()
}

func (tm *term) await(want string, timeout time.Duration) (string, error) {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		tm.mu.Lock()
		if i := bytes.Index(tm.screen[tm.mark:], []byte(want)); i >= 0 {
			got := string(tm.screen[tm.mark : tm.mark+i+len(want)])
			tm.mark += i + len(want)
			tm.mu.Unlock()
			return got, nil
		}
		changed, rest := tm.changed, string(tm.screen[tm.mark:])
		tm.mu.Unlock()
		select {
		case <-changed:
		case <-tm.eof:
			tm.mu.Lock()
			more := tm.mark < len(tm.screen) && bytes.Contains(tm.screen[tm.mark:], []byte(want))
			tm.mu.Unlock()
			if !more {
				return "", fmt.Errorf("chubbysh %s: the terminal closed (exit %s) before %q appeared; screen since the last match:\n%q",
					strings.Join(tm.args, " "), tm.exitString(), want, tail(rest, 2000))
			}
		case <-deadline.C:
			return "", fmt.Errorf("chubbysh %s: %q did not appear within %v; screen since the last match:\n%q",
				strings.Join(tm.args, " "), want, timeout, tail(rest, 2000))
		}
	}
}

// rest is the screen text after the last match (without consuming it).
func (tm *term) rest() string {
	tm.mu.Lock()
	defer tm.mu.Unlock()
	return string(tm.screen[tm.mark:])
}

// Screen is all the screen text so far.
func (tm *term) Screen() string {
	tm.mu.Lock()
	defer tm.mu.Unlock()
	return string(tm.screen)
}

// Raw is every byte the shell wrote to the terminal so far.
func (tm *term) Raw() []byte {
	tm.mu.Lock()
	defer tm.mu.Unlock()
	return append([]byte(nil), tm.raw...)
}

// waitCooked waits until the terminal is in cooked mode (ISIG on): the line
// was entered and the command runs, so Ctrl-C is a signal to it.
func (tm *term) waitCooked() {
	tm.t.Helper()
	rc, err := tm.pty.SyscallConn()
	if err != nil {
		tm.t.Fatal(err)
	}
	wait.For(tm.t, waitFor, "the terminal to leave raw mode", func() bool {
		var lflag uint32
		var ierr error
		if err := rc.Control(func(fd uintptr) {
			// On Linux TCGETS on the master reports the slave's modes.
			tio, err := unix.IoctlGetTermios(int(fd), unix.TCGETS)
			if err == nil {
				lflag = tio.Lflag
			}
			ierr = err
		}); err != nil || ierr != nil {
			tm.t.Fatalf("read the terminal's modes: %v %v", err, ierr)
		}
		return lflag&unix.ISIG != 0
	})
}

// wait waits for the shell to exit and returns its exit code.
func (tm *term) wait() int {
	tm.t.Helper()
	select {
	case <-tm.exited:
		tm.mu.Lock()
		defer tm.mu.Unlock()
		return tm.code
	case <-time.After(waitFor):
		tm.t.Fatalf("chubbysh %s still running after %v; screen since the last match:\n%q", strings.Join(tm.args, " "), waitFor, tail(tm.rest(), 2000))
		return -1
	}
}

func (tm *term) exitString() string {
	select {
	case <-tm.exited:
		tm.mu.Lock()
		defer tm.mu.Unlock()
		return fmt.Sprint(tm.code)
	default:
		return "none yet"
	}
}

func tail(s string, n int) string {
	if len(s) > n {
		return "..." + s[len(s)-n:]
	}
	return s
}
