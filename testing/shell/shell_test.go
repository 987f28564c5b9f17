package shell

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"

	"github.com/chubby-dev/chubby/testing/proc"
)

// root is the namespace root of the cell chubbyd serves by default.
const root = "/ls/local"

// prompt is the shell's prompt in directory dir of the cell local.
func prompt(dir string) string { return "local:" + dir + "> " }

// waitPrompt waits for a new prompt in directory dir: one at the start of a
// line, which readline prints when it starts reading a line (the redraws
// of the line being typed follow the text before them on the screen).
func (tm *term) waitPrompt(dir string) {
	tm.t.Helper()
	tm.expect("\n" + prompt(dir))
}

// sgr matches a colour (Select Graphic Rendition) escape sequence.
var sgr = regexp.MustCompile(`\x1b\[[0-9;]*m`)

// sh runs a one-shot chubbysh and fails the test unless it exits code.
func sh(t *testing.T, s *proc.Server, code int, args ...string) *proc.Result {
	t.Helper()
	r := s.Sh(t, args...)
	if r.Code != code {
		t.Fatalf("want exit %d\n%s", code, r)
	}
	return r
}

// TestCompletion: Tab completes command names, a command's flags, paths of
// the cell (a directory gets a "/" to go on, a file a space), relative paths
// against the current directory, only directories after cd, and command
// names after help. Two Tabs on an ambiguous prefix list the candidates.
func TestCompletion(t *testing.T) {
	t.Parallel()
	s := proc.StartServer(t, proc.Options{})
	sh(t, s, 0, "mkdir", root+"/app")
	sh(t, s, 0, "write", root+"/app/config", "replicas=3")
	sh(t, s, 0, "mkdir", root+"/app/conf.d")
	tm := startTerm(t, s, t.TempDir(), nil)
	tm.waitPrompt(root)

	// A path: the only child starting with "ap" is a directory.
	tm.send("cat /ls/local/ap" + keyTab)
	tm.expect("cat /ls/local/app/")
	// "c" could be config or conf.d: Tab adds what they share...
	tm.send("c" + keyTab)
	tm.expect("cat /ls/local/app/conf")
	// ...and a second Tab lists them.
	tm.send(keyTab)
	tm.expect("\nconf.d/")
	tm.expect("config")
	tm.send("i" + keyTab)
	tm.expect("cat /ls/local/app/config ")
	tm.send(keyEnter)
	tm.expectLine("replicas=3")
	tm.waitPrompt(root)

	// "/" and "/ls" are not nodes, but lead to the cell's root.
	tm.send("ls /l" + keyTab)
	tm.expect("ls /ls/")
	tm.send(keyTab)
	tm.expect("ls /ls/local/")
	tm.send(keyEnter)
	tm.expectLine("app")
	tm.waitPrompt(root)

	// A command name, then a relative path.
	tm.send("mkd" + keyTab)
	tm.expect("mkdir ")
	tm.send("ap" + keyTab)
	tm.expect("mkdir app/")
	tm.line("new")
	tm.waitPrompt(root)
	if r := sh(t, s, 0, "-json", "stat", root+"/app/new"); !strings.Contains(r.Stdout, `"is_dir":true`) {
		t.Errorf("mkdir app/new (completed) did not make a directory: %s", r)
	}

	// A flag of the command at hand.
	tm.send("create app/eph -e" + keyTab)
	tm.expect("create app/eph -ephemeral ")
	tm.send(keyEnter)
	tm.waitPrompt(root)
	if r := sh(t, s, 0, "-json", "stat", root+"/app/eph"); !strings.Contains(r.Stdout, `"ephemeral":true`) {
		t.Errorf("create -ephemeral (completed) did not make an ephemeral file: %s", r)
	}

	// cd completes directories only: conf.d, not config.
	tm.send("cd app/con" + keyTab)
	tm.expect("cd app/conf.d/")
	tm.line("")
	tm.waitPrompt(root + "/app/conf.d")

	// help completes command names.
	tm.send("help chec" + keyTab)
	tm.expect("help checkseq ")
	tm.send(keyEnter)
	tm.expect("example: checkseq X:7:/ls/local/app/leader")
	tm.waitPrompt(root + "/app/conf.d")

	// Completion lists children through the client, whose cache answers
	// the repeated lookups of the same directories.
	tm.line("cache")
	hits := tm.expect("misses")
	if m := regexp.MustCompile(`hits +([0-9]+)`).FindStringSubmatch(hits); m == nil || m[1] == "0" {
		t.Errorf("after repeated completions in the same directories, cache shows %q", hits)
	}
}

// TestHistory: Up recalls the previous line; the history is kept in
// $HOME/.chubbysh_history, recalled by the next shell, and bounded at 1000
// lines.
func TestHistory(t *testing.T) {
	t.Parallel()
	s := proc.StartServer(t, proc.Options{})
	home := t.TempDir()

	tm := startTerm(t, s, home, nil)
	tm.waitPrompt(root)
	tm.line("write /ls/local/h one")
	tm.waitPrompt(root)
	tm.line("cat /ls/local/h")
	tm.expectLine("one")
	tm.waitPrompt(root)
	sh(t, s, 0, "write", root+"/h", "two")
	tm.send(keyUp)
	tm.expect("cat /ls/local/h")
	tm.send(keyEnter)
	tm.expectLine("two")
	tm.waitPrompt(root)
	tm.send(keyUp + keyUp)
	tm.expect("write /ls/local/h one")
	tm.send(keyEnter)
	tm.waitPrompt(root)
	tm.line("exit")
	if code := tm.wait(); code != 0 {
		t.Fatalf("exit: code %d", code)
	}
	hist, err := os.ReadFile(filepath.Join(home, ".chubbysh_history"))
	if err != nil {
		t.Fatalf("no history file: %v", err)
	}
	if !strings.Contains(string(hist), "cat /ls/local/h\n") {
		t.Errorf("history file holds %q, want the lines typed", hist)
	}
	if fi, err := os.Stat(filepath.Join(home, ".chubbysh_history")); err == nil && fi.Mode().Perm()&0o077 != 0 {
		t.Errorf("history file mode %v, want private (0600)", fi.Mode().Perm())
	}

	// The next shell recalls the last shell's lines.
	tm = startTerm(t, s, home, nil)
	tm.waitPrompt(root)
	tm.send(keyUp)
	tm.expect(prompt(root) + "exit") // the line redrawn, not a new prompt
	tm.send(keyUp)
	tm.expect("write /ls/local/h one")
	tm.send(keyUp)
	tm.expect("cat /ls/local/h")
	tm.send(keyEnter)
	tm.expectLine("one")
	tm.waitPrompt(root)
	tm.send(keyCtrlD)
	if code := tm.wait(); code != 0 {
		t.Fatalf("Ctrl-D: code %d", code)
	}

	// Bounded: a history of 1500 lines keeps its last 1000.
	big := t.TempDir()
	var b strings.Builder
	for i := range 1500 {
		fmt.Fprintf(&b, "cat /ls/local/line-%d\n", i)
	}
	if err := os.WriteFile(filepath.Join(big, ".chubbysh_history"), []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	tm = startTerm(t, s, big, nil)
	tm.waitPrompt(root)
	tm.send(keyUp)
	tm.expect("cat /ls/local/line-1499")
	tm.send(keyCtrlC)
	tm.waitPrompt(root)
	tm.line("exit")
	if code := tm.wait(); code != 0 {
		t.Fatalf("exit: code %d", code)
	}
	hist, err = os.ReadFile(filepath.Join(big, ".chubbysh_history"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(string(hist), "\n"), "\n")
	if len(lines) > 1001 || strings.Contains(string(hist), "line-499\n") || !strings.Contains(string(hist), "line-1499\n") {
		t.Errorf("history of 1500 lines after a session: %d lines (first %q), want the last 1000 and the new one", len(lines), lines[0])
	}
}

// TestCdPwdRelativePaths: the shell's current directory is in the prompt;
// cd checks that the target is a directory of the cell; relative paths and
// "." and ".." are resolved by the shell for every command that takes a
// PATH; ls and stat without PATH show the current directory. Scripts and
// one-shot commands have no current directory: cd and pwd are usage errors
// there, and their paths are sent as given.
func TestCdPwdRelativePaths(t *testing.T) {
	t.Parallel()
	s := proc.StartServer(t, proc.Options{})
	sh(t, s, 0, "mkdir", root+"/app")
	sh(t, s, 0, "mkdir", root+"/app/sub")
	sh(t, s, 0, "write", root+"/app/config", "c1")
	tm := startTerm(t, s, t.TempDir(), nil)
	tm.waitPrompt(root)

	tm.line("pwd")
	tm.expect("pwd")
	tm.expectLine(root)
	tm.waitPrompt(root)
	tm.line("cd app")
	tm.waitPrompt(root + "/app")
	tm.line("cat config")
	tm.expectLine("c1")
	tm.waitPrompt(root + "/app")
	tm.line("write sub/f hello")
	tm.waitPrompt(root + "/app")
	if got := sh(t, s, 0, "cat", root+"/app/sub/f").Stdout; got != "hello" {
		t.Errorf("write sub/f in /ls/local/app wrote %q to /ls/local/app/sub/f", got)
	}
	tm.line("cd ./sub/")
	tm.waitPrompt(root + "/app/sub")
	tm.line("cat ../config")
	tm.expectLine("c1")
	tm.waitPrompt(root + "/app/sub")
	tm.line("ls")
	tm.expect("ls")
	tm.expectLine("f")
	tm.waitPrompt(root + "/app/sub")
	tm.line("stat")
	tm.expectLine("path         /ls/local/app/sub")
	tm.expectLine("kind         directory")
	tm.waitPrompt(root + "/app/sub")
	tm.line("ls ../..//app/./sub")
	tm.expectLine("f")
	tm.waitPrompt(root + "/app/sub")
	tm.line("cd ..")
	tm.waitPrompt(root + "/app")
	tm.line("cd -")
	tm.expectLine(root + "/app/sub")
	tm.waitPrompt(root + "/app/sub")
	tm.line("cd")
	tm.waitPrompt(root)

	// Failures leave the directory as it was.
	tm.line("cd ..")
	tm.expect("chubbysh: cd: bad path: /ls is outside the cell's namespace /ls/local")
	tm.waitPrompt(root)
	tm.line("cd app/config")
	tm.expect("not a directory")
	tm.waitPrompt(root)
	tm.line("cd nosuch")
	tm.expect("no such node")
	tm.waitPrompt(root)
	tm.line("pwd")
	tm.expect("pwd")
	tm.expectLine(root)

	// Not in scripts or one-shot commands: there PATH is absolute, as given.
	for _, argv := range [][]string{{"cd", root + "/app"}, {"pwd"}} {
		r := sh(t, s, 2, argv...)
		if !strings.Contains(r.Stderr, "only in the interactive shell") {
			t.Errorf("%v one-shot: %s", argv, r)
		}
	}
	if r := s.ShStdin(t, "cd "+root+"/app\ncat config\n"); r.Code != 2 {
		t.Errorf("cd in a script: want exit 2\n%s", r)
	}
	sh(t, s, 1, "cat", "app/config")
	sh(t, s, 1, "cat", root+"/app/../app/config")
}

// TestCtrlCCancelsLock: Ctrl-C in a lock that waits for another session's
// holder returns to the prompt without the lock, and without leaving the
// request queued (when the holder lets go, another session gets the lock,
// not the shell's); Ctrl-C in sleep returns to the prompt; Ctrl-C at the
// prompt discards the line and, on an empty one, says how to leave.
func TestCtrlCCancelsLock(t *testing.T) {
	t.Parallel()
	s := proc.StartServer(t, proc.Options{})
	l := root + "/cc"
	holder := s.StartSh(t, "lock", l)
	holder.NextLine(t, waitFor)

	tm := startTerm(t, s, t.TempDir(), nil)
	tm.waitPrompt(root)
	tm.line("lock " + l)
	tm.expect("waiting for " + l)
	tm.waitCooked()
	tm.send(keyCtrlC)
	tm.expect("interrupted, not acquired")
	tm.waitPrompt(root)
	tm.line("seq " + l)
	tm.expect("not held")
	tm.waitPrompt(root)

	// The shell's request left the queue: once the holder lets go, the lock
	// is free for anybody.
	holder.Signal(t, syscall.SIGTERM)
	if code := holder.Wait(t, waitFor); code != 0 {
		t.Fatalf("holder exited %d on SIGTERM", code)
	}
	sh(t, s, 0, "trylock", l)

	// Ctrl-C in sleep.
	tm.line("sleep 1h")
	tm.waitCooked()
	tm.send(keyCtrlC)
	tm.expect("chubbysh: sleep: interrupted")
	tm.waitPrompt(root)

	// Ctrl-C at the prompt: the line goes, the shell stays.
	tm.send("cat /ls/lo" + keyCtrlC)
	tm.waitPrompt(root)
	tm.send(keyCtrlC)
	tm.expect("(use exit or Ctrl-D to leave)")
	tm.waitPrompt(root)
	tm.line("pwd")
	tm.expect("pwd")
	tm.expectLine(root)
	tm.waitPrompt(root)
	if strings.Contains(tm.Screen(), "cat /ls/lo\n") {
		t.Errorf("the line discarded with Ctrl-C was run")
	}
	tm.line("exit")
	if code := tm.wait(); code != 0 {
		t.Errorf("exit: code %d", code)
	}
}

// TestExitReleasesLocks: locks taken in the shell are held across commands
// until unlock or the end of the shell; exit and Ctrl-D end the session,
// so another session can take the locks at once (no lock-delay), and the
// session's ephemeral files go.
func TestExitReleasesLocks(t *testing.T) {
	t.Parallel()
	s := proc.StartServer(t, proc.Options{})
	l1, l2, l3 := root+"/l1", root+"/l2", root+"/l3"

	tm := startTerm(t, s, t.TempDir(), nil)
	tm.waitPrompt(root)
	tm.line("lock " + l1)
	tm.expect("X:")
	tm.waitPrompt(root)
	tm.line("trylock " + l2)
	tm.expect("X:")
	tm.waitPrompt(root)
	tm.line("create eph -ephemeral")
	tm.waitPrompt(root)
	// Held across commands.
	sh(t, s, 1, "trylock", l1)
	sh(t, s, 1, "trylock", l2)
	sh(t, s, 0, "stat", root+"/eph")
	tm.line("exit")
	tm.expect("released 2 locks: " + l1 + ", " + l2)
	if code := tm.wait(); code != 0 {
		t.Fatalf("exit: code %d", code)
	}
	sh(t, s, 0, "trylock", l1)
	sh(t, s, 0, "trylock", l2)
	sh(t, s, 1, "stat", root+"/eph")

	// Ctrl-D too.
	tm = startTerm(t, s, t.TempDir(), nil)
	tm.waitPrompt(root)
	tm.line("lock " + l3)
	tm.expect("X:")
	tm.waitPrompt(root)
	sh(t, s, 1, "trylock", l3)
	tm.send(keyCtrlD)
	tm.expect("released 1 lock: " + l3)
	if code := tm.wait(); code != 0 {
		t.Fatalf("Ctrl-D: code %d", code)
	}
	sh(t, s, 0, "trylock", l3)
}

// TestSignalsLeaveCleanly: SIGHUP (the terminal went away) at the prompt
// and SIGTERM during a command end the shell with exit 0 after closing the
// session, so its locks are free at once.
func TestSignalsLeaveCleanly(t *testing.T) {
	t.Parallel()
	s := proc.StartServer(t, proc.Options{})
	for _, tc := range []struct {
		name    string
		sig     syscall.Signal
		command string // running when the signal comes ("": at the prompt)
	}{
		{"SIGHUP at the prompt", syscall.SIGHUP, ""},
		{"SIGTERM in sleep", syscall.SIGTERM, "sleep 1h"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := root + "/sig-" + tc.sig.String()
			tm := startTerm(t, s, t.TempDir(), nil)
			tm.waitPrompt(root)
			tm.line("lock " + l)
			tm.expect("X:")
			tm.waitPrompt(root)
			if tc.command != "" {
				tm.line(tc.command)
				tm.waitCooked()
			}
			sh(t, s, 1, "trylock", l)
			if err := syscall.Kill(tm.cmd.Process.Pid, tc.sig); err != nil {
				t.Fatal(err)
			}
			if code := tm.wait(); code != 0 {
				t.Errorf("%v: exit %d, want 0", tc.sig, code)
			}
			sh(t, s, 0, "trylock", l)
		})
	}
}

// TestUnknownCommandSuggests: a mistyped command (or flag) gets the nearest
// one, in the shell, one-shot and in a script, with exit code 2 where there
// is one.
func TestUnknownCommandSuggests(t *testing.T) {
	t.Parallel()
	s := proc.StartServer(t, proc.Options{})
	tm := startTerm(t, s, t.TempDir(), nil)
	tm.waitPrompt(root)
	tm.line("lsx /ls/local")
	tm.expect(`chubbysh: lsx: unknown command "lsx"; did you mean "ls"?`)
	tm.waitPrompt(root)
	tm.line("frobnicate")
	tm.expect(`chubbysh: frobnicate: unknown command "frobnicate" (try help)`)
	tm.waitPrompt(root)
	tm.line("help lcok")
	tm.expect(`chubbysh: help: unknown command "lcok"; did you mean "lock"?`)
	tm.waitPrompt(root)

	r := sh(t, s, 2, "lsx", root)
	if want := "chubbysh: lsx: unknown command \"lsx\"; did you mean \"ls\"?\n"; r.Stderr != want {
		t.Errorf("one-shot lsx: stderr %q, want %q", r.Stderr, want)
	}
	r = s.ShStdin(t, "ls "+root+"\nsatt "+root+"\nls "+root+"\n")
	if r.Code != 2 || !strings.Contains(r.Stderr, `did you mean "stat"?`) {
		t.Errorf("script with satt: want exit 2 and a suggestion\n%s", r)
	}
	r = sh(t, s, 2, "create", root+"/x", "-ephemral")
	if !strings.Contains(r.Stderr, "unknown flag -ephemral; did you mean -ephemeral?") {
		t.Errorf("create -ephemral: %s", r)
	}
}

// TestColour: on a terminal errors are red and the prompt is bold; with
// NO_COLOR set, or with -json, nothing is coloured. (One-shot and script
// output through pipes is never coloured: the e2e tests compare it byte for
// byte.)
func TestColour(t *testing.T) {
	t.Parallel()
	s := proc.StartServer(t, proc.Options{})
	for _, tc := range []struct {
		name   string
		env    []string
		args   []string
		colour bool
	}{
		{"terminal", nil, nil, true},
		{"NO_COLOR", []string{"NO_COLOR=1"}, nil, false},
		{"json", nil, []string{"-json"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tm := startTerm(t, s, t.TempDir(), tc.env, tc.args...)
			tm.waitPrompt(root)
			tm.line("cat /ls/local/missing")
			tm.expect("no such node")
			tm.waitPrompt(root)
			tm.line("exit")
			tm.wait()
			raw := tm.Raw()
			red := regexp.MustCompile(`\x1b\[31mchubbysh: cat: `)
			if tc.colour && !red.Match(raw) {
				t.Errorf("on a terminal the error is not red: %q", tail(string(raw), 1500))
			}
			if !tc.colour {
				if m := sgr.Find(raw); m != nil {
					t.Errorf("colour escape %q with %s: %q", m, tc.name, tail(string(raw), 1500))
				}
			}
		})
	}
}

// TestSessionEventsRedrawLine: session events are shown as they happen,
// while the user is typing, without garbling the line being typed: the
// event is printed above it, and the prompt (with the session's state) and
// the typed text are redrawn. The master is paused (SIGSTOP) until the
// shell's local lease runs out (jeopardy), then resumed.
func TestSessionEventsRedrawLine(t *testing.T) {
	t.Parallel()
	s := proc.StartServer(t, proc.Options{})
	tm := startTerm(t, s, t.TempDir(), nil, "-ttl", "2s")
	tm.waitPrompt(root)
	tm.send("cat /ls/lo")
	tm.expect("cat /ls/lo")

	s.Pause(t)
	paused := true
	defer func() {
		if paused {
			s.Resume(t)
		}
	}()
	tm.expect("jeopardy: the session's lease ran out")
	tm.expect("local:/ls/local [jeopardy]> cat /ls/lo")
	s.Resume(t)
	paused = false
	// The master answers within the grace period: safe again, and the line
	// still there.
	tm.expect("safe: the master renewed the session")
	tm.expect(prompt(root) + "cat /ls/lo")
	tm.send(keyCtrlC)
	tm.waitPrompt(root)
	tm.line("exit")
	if code := tm.wait(); code != 0 {
		t.Errorf("exit: code %d", code)
	}
}

// TestHelp: help lists every command with its usage; help COMMAND shows
// the usage, what it does and an example, for every command.
func TestHelp(t *testing.T) {
	t.Parallel()
	s := proc.StartServer(t, proc.Options{})
	tm := startTerm(t, s, t.TempDir(), nil)
	tm.waitPrompt(root)
	tm.line("help")
	tm.expect("lock PATH [-shared] [-delay DUR] [-- CMD ARGS...]")
	tm.expect("Tab completes")
	tm.waitPrompt(root)
	cmds := []string{"ls", "stat", "cat", "write", "cas", "mkdir", "create", "rm", "watch", "lock", "trylock", "unlock",
		"seq", "checkseq", "session", "cache", "members", "remove-server", "sleep", "cd", "pwd", "help", "exit"}
	for _, c := range cmds {
		tm.line("help " + c)
		tm.expect("usage: " + c)
		tm.expect("example: " + c)
		tm.waitPrompt(root)
	}
	// One-shot help is the same text, without the shell's keys.
	r := sh(t, s, 0, "help")
	for _, c := range cmds {
		if !strings.Contains(r.Stdout, "\n  "+c) {
			t.Errorf("help does not list %s:\n%s", c, r.Stdout)
		}
	}
	if strings.Contains(r.Stdout, "Tab completes") || sgr.MatchString(r.Stdout) {
		t.Errorf("one-shot help through a pipe:\n%q", r.Stdout)
	}
}
