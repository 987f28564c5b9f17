package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/chubby-dev/chubby/client"
)

// shell is one chubbysh invocation: at most one session, the locks taken in
// it (by path), and how to print.
type shell struct {
	servers []string
	tls     *tls.Config // nil: plain TCP
	ttl     time.Duration
	timeout time.Duration
	json    bool
	oneShot bool
	// tty: the interactive shell (a current directory, paths resolved,
	// hints and colour on a terminal).
	tty    bool
	stdout io.Writer
	stderr io.Writer
	// stdin is where `write PATH -` reads contents: the one-shot command's
	// standard input (nil in script and interactive mode, where stdin
	// carries the commands).
	stdin   io.Reader
	signals chan os.Signal
	// errPal colours stderr, outPal stdout (both off unless a terminal).
	errPal, outPal palette

	cli *client.Client
	// held: locks taken in this session, by path. Written only by the
	// goroutine running commands, under mu (the completer reads it).
	held map[string]*client.Handle

	mu      sync.Mutex
	cwd     string // interactive only: the current directory
	prevDir string // for `cd -`

	// emitted: the current command has printed its JSON object already.
	emitted bool

	// forward is set in the interactive shell, whose pump owns the
	// client's events: while a watch runs it points at the watch's channel.
	forward *atomic.Pointer[chan client.Event]
}

// argKind says what a positional argument is: how the interactive shell
// resolves and completes it.
type argKind int

const (
	argOther   argKind = iota
	argPath            // a node: resolved against the current directory, completed from the cell
	argDir             // cd's directory: completed, resolved by cd itself (`cd -`, `cd` alone)
	argCommand         // a command name (help COMMAND)
	argSeq             // a sequencer: completed from the locks this session holds
)

// command is an entry of the shell's one command table.
type command struct {
	name       string
	group      string
	usage      string
	help       string
	example    string
	min, max   int // positional arguments (max -1: any)
	args       []argKind
	boolFlags  []string
	valueFlags []string
	noSession  bool
	// cwdDefault: in the interactive shell PATH may be left out and is
	// then the current directory.
	cwdDefault bool
	// interactiveOnly: meaningful only with a current directory.
	interactiveOnly bool
	run             func(sh *shell, a *cmdArgs) error
}

// Command groups, in the order help lists them.
var groups = []string{"files", "locks", "session and cell", "shell"}

var commands []*command

func init() {
	path1 := []argKind{argPath}
	commands = []*command{
		{name: "ls", group: "files", usage: "ls PATH", help: "list a directory's children, one a line",
			example: "ls /ls/local/app", min: 1, max: 1, args: path1, cwdDefault: true, run: (*shell).cmdLs},
		{name: "stat", group: "files", usage: "stat PATH", help: "show a node's metadata",
			example: "stat /ls/local/app/config", min: 1, max: 1, args: path1, cwdDefault: true, run: (*shell).cmdStat},
		{name: "cat", group: "files", usage: "cat PATH", help: "print a file's contents",
			example: "cat /ls/local/app/config", min: 1, max: 1, args: path1, run: (*shell).cmdCat},
		{name: "write", group: "files", usage: "write PATH DATA|- [-file F] [-seq SEQ]", help: "set a file's contents (-: from stdin; -file F: from a file), creating it if missing; with -seq only while SEQ is valid",
			example: "write /ls/local/app/config 'replicas=3'", min: 1, max: 2, args: []argKind{argPath, argOther}, valueFlags: []string{"seq", "file"}, run: (*shell).cmdWrite},
		{name: "cas", group: "files", usage: "cas PATH GEN DATA|- [-file F] [-seq SEQ]", help: "set contents only if the content generation is GEN (0: only if absent)",
			example: "cas /ls/local/app/config 4 'replicas=5'", min: 2, max: 3, args: []argKind{argPath, argOther, argOther}, valueFlags: []string{"seq", "file"}, run: (*shell).cmdCAS},
		{name: "mkdir", group: "files", usage: "mkdir PATH [-read NAME] [-write NAME] [-change NAME]", help: "create a directory (its parent must exist); ACL names not given are copied from the parent",
			example: "mkdir /ls/local/app -write app-admins", min: 1, max: 1, args: path1, valueFlags: aclFlags, run: (*shell).cmdMkdir},
		{name: "create", group: "files", usage: "create PATH [-ephemeral] [-read NAME] [-write NAME] [-change NAME]", help: "create an empty file; fails if it exists",
			example: "create /ls/local/app/me -ephemeral", min: 1, max: 1, args: path1, boolFlags: []string{"ephemeral"}, valueFlags: aclFlags, run: (*shell).cmdCreate},
		{name: "rm", group: "files", usage: "rm PATH", help: "delete a file or an empty directory",
			example: "rm /ls/local/app/me", min: 1, max: 1, args: path1, run: (*shell).cmdRm},
		{name: "acl", group: "files", usage: "acl get PATH | acl set PATH [-read NAME] [-write NAME] [-change NAME]", help: "show a node's ACL names (read, write, change-ACL) and acl_gen, or change them (change-ACL permission); NAME is a file in /ls/CELL/acl/ listing principals, one a line (*: all)",
			example: "acl set /ls/local/app/config -read app-readers", min: 2, max: 2, args: []argKind{argOther, argPath}, valueFlags: aclFlags, run: (*shell).cmdACL},
		{name: "watch", group: "files", usage: "watch PATH [-for DUR]", help: "print events on PATH (and its children, for a directory) until DUR or Ctrl-C",
			example: "watch /ls/local/app -for 1m", min: 1, max: 1, args: path1, valueFlags: []string{"for"}, run: (*shell).cmdWatch},
		{name: "lock", group: "locks", usage: "lock PATH [-shared] [-delay DUR] [-- CMD ARGS...]", help: "acquire, blocking until held, and print the sequencer; with CMD hold the lock while CMD runs",
			example: "lock /ls/local/app/leader -- ./serve --leader", min: 1, max: 1, args: path1, boolFlags: []string{"shared"}, valueFlags: []string{"delay"}, run: (*shell).cmdLock},
		{name: "trylock", group: "locks", usage: "trylock PATH [-shared] [-delay DUR]", help: "acquire or fail at once (exit 1)",
			example: "trylock /ls/local/app/leader -delay 5s", min: 1, max: 1, args: path1, boolFlags: []string{"shared"}, valueFlags: []string{"delay"}, run: (*shell).cmdTryLock},
		{name: "unlock", group: "locks", usage: "unlock PATH", help: "release a lock taken in this session",
			example: "unlock /ls/local/app/leader", min: 1, max: 1, args: path1, run: (*shell).cmdUnlock},
		{name: "seq", group: "locks", usage: "seq PATH", help: "print the sequencer of a lock this session holds",
			example: "seq /ls/local/app/leader", min: 1, max: 1, args: path1, run: (*shell).cmdSeq},
		{name: "checkseq", group: "locks", usage: "checkseq SEQ", help: "print valid (exit 0) or invalid (exit 1)",
			example: "checkseq X:7:/ls/local/app/leader", min: 1, max: 1, args: []argKind{argSeq}, run: (*shell).cmdCheckSeq},
		{name: "elect", group: "locks", usage: "elect PATH VALUE [-delay DUR] -- CMD ARGS...", help: "campaign in the election PATH (a directory); while leading run CMD ($CHUBBY_SEQUENCER, $CHUBBY_LEADER_VALUE), stop it before leadership can move, then resign; exit with CMD's code",
			example: "elect /ls/local/app/primary host1:8080 -- ./serve --primary", min: 2, max: 2, args: []argKind{argPath, argOther}, valueFlags: []string{"delay"}, run: (*shell).cmdElect},
		{name: "leader", group: "locks", usage: "leader PATH [-watch]", help: "print the value of the election's current leader (exit 1 if none); -watch: one line per change until Ctrl-C",
			example: "leader /ls/local/app/primary -watch", min: 1, max: 1, args: path1, boolFlags: []string{"watch"}, run: (*shell).cmdLeader},
		{name: "session", group: "session and cell", usage: "session", help: "show the session: id, TTL, lease left, master, epoch",
			example: "session", run: (*shell).cmdSession},
		{name: "cache", group: "session and cell", usage: "cache", help: "show this session's cache statistics: hits, misses, entries, invalidations",
			example: "cache", run: (*shell).cmdCache},
		{name: "members", group: "session and cell", usage: "members", help: "list the cell's servers, their state and the master",
			example: "members", run: (*shell).cmdMembers},
		{name: "remove-server", group: "session and cell", usage: "remove-server NAME [-force]", help: "remove a server from the cell for good (operator command; -force: even if fewer voters than a quorum of the current configuration remain)",
			example: "remove-server n3", min: 1, max: 1, boolFlags: []string{"force"}, run: (*shell).cmdRemoveServer},
		{name: "snapshot", group: "session and cell", usage: "snapshot save FILE", help: "write a consistent backup of the cell's state to FILE (chubbyd restore -from FILE starts a new cell from it)",
			example: "snapshot save cell.backup", min: 2, max: 2, run: (*shell).cmdSnapshot},
		{name: "whoami", group: "session and cell", usage: "whoami", help: "print this session's principal (the TLS certificate's common name; anonymous without TLS)",
			example: "whoami", run: (*shell).cmdWhoami},
		{name: "sleep", group: "session and cell", usage: "sleep DUR", help: "wait, keeping the session and its locks alive",
			example: "sleep 30s", min: 1, max: 1, run: (*shell).cmdSleep},
		{name: "cd", group: "shell", usage: "cd [DIR]", help: "change the current directory (interactive; DIR alone: /ls/CELL, -: the previous one)",
			example: "cd app", max: 1, args: []argKind{argDir}, interactiveOnly: true, run: (*shell).cmdCd},
		{name: "pwd", group: "shell", usage: "pwd", help: "print the current directory (interactive)",
			example: "pwd", interactiveOnly: true, noSession: true, run: (*shell).cmdPwd},
		{name: "help", group: "shell", usage: "help [COMMAND]", help: "list the commands, or show one's usage and an example",
			example: "help lock", max: 1, args: []argKind{argCommand}, noSession: true, run: (*shell).cmdHelp},
		{name: "exit", group: "shell", usage: "exit", help: "end the session (releasing its locks) and leave; also Ctrl-D",
			example: "exit", noSession: true, run: func(*shell, *cmdArgs) error { return nil }},
	}
}

func lookup(name string) *command {
	for _, c := range commands {
		if c.name == name {
			return c
		}
	}
	return nil
}

func commandNames() []string {
	names := make([]string, 0, len(commands))
	for _, c := range commands {
		names = append(names, c.name)
	}
	return names
}

// unknownCommand is the message for a word that names no command, with the
// nearest command when one is close.
func unknownCommand(word string) string {
	if near, ok := nearest(word, commandNames()); ok {
		return fmt.Sprintf("unknown command %q; did you mean %q?", word, near)
	}
	return fmt.Sprintf("unknown command %q (try help)", word)
}

// commandSummary lists the commands by group, usage and what each does,
// in one column; a usage too long for it has its text on the next line.
func commandSummary(pal palette) string {
	const longUsage = 36
	width := 0
	for _, c := range commands {
		if n := len(c.usage); n <= longUsage && n > width {
			width = n
		}
	}
	var b strings.Builder
	for gi, g := range groups {
		if gi > 0 {
			b.WriteString("\n")
		}
		fmt.Fprintf(&b, "%s\n", pal.bold(g))
		for _, c := range commands {
			if c.group != g {
				continue
			}
			if len(c.usage) > width {
				fmt.Fprintf(&b, "  %s\n  %-*s  %s\n", c.usage, width, "", c.help)
				continue
			}
			fmt.Fprintf(&b, "  %-*s  %s\n", width, c.usage, c.help)
		}
	}
	return b.String()
}

// usageError is a bad command line (exit 2).
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

// exitError carries an explicit exit code (a CMD's, or "invalid").
type exitError struct {
	code int
	msg  string
}

func (e *exitError) Error() string { return e.msg }

func (sh *shell) parse(words []string) (*command, *cmdArgs, error) {
	c := lookup(words[0])
	if c == nil {
		return nil, nil, &usageError{unknownCommand(words[0])}
	}
	a, err := parseArgs(words[1:], c.boolFlags, c.valueFlags)
	if err != nil {
		return nil, nil, &usageError{fmt.Sprintf("%v; usage: %s", err, c.usage)}
	}
	if a.dash && c.name != "lock" && c.name != "elect" {
		return nil, nil, &usageError{fmt.Sprintf("unexpected --; usage: %s", c.usage)}
	}
	if c.interactiveOnly && !sh.tty {
		return nil, nil, &usageError{"only in the interactive shell: scripts and one-shot commands take absolute paths"}
	}
	if sh.tty && c.cwdDefault && len(a.pos) == 0 {
		a.pos = []string{sh.dir()}
	}
	if len(a.pos) < c.min || (c.max >= 0 && len(a.pos) > c.max) {
		return nil, nil, &usageError{fmt.Sprintf("usage: %s", c.usage)}
	}
	if sh.tty {
		cwd := sh.dir()
		for i, k := range c.args {
			if k == argPath && i < len(a.pos) {
				a.pos[i] = resolvePath(cwd, a.pos[i])
			}
		}
	}
	return c, a, nil
}

// checkUsage validates a one-shot command line before any session is made.
func (sh *shell) checkUsage(words []string) (int, bool) {
	if _, _, err := sh.parse(words); err != nil {
		return sh.report(words[0], err), false
	}
	return exitOK, true
}

// exec runs one command line and returns its exit code.
func (sh *shell) exec(words []string) int {
	sh.emitted = false
	c, a, err := sh.parse(words)
	if err != nil {
		return sh.report(words[0], err)
	}
	if !c.noSession {
		if err := sh.ensureSession(); err != nil {
			return sh.report("connect", err)
		}
	}
	return sh.report(c.name, c.run(sh, a))
}

// report prints a command's failure and maps it to an exit code.
func (sh *shell) report(what string, err error) int {
	if err == nil {
		return exitOK
	}
	code := exitFailed
	var ue *usageError
	var ee *exitError
	switch {
	case errors.As(err, &ue):
		code = exitUsage
	case errors.As(err, &ee):
		if ee.msg == "" {
			return ee.code
		}
		code = ee.code
	case errors.Is(err, client.ErrSessionExpired), errors.Is(err, client.ErrUnavailable), errors.Is(err, context.DeadlineExceeded):
		code = exitUnreachable
	}
	sh.errorf("%s: %v", what, err)
	if sh.json && !sh.emitted {
		sh.emit(map[string]any{"error": err.Error(), "exit_code": code})
	}
	return code
}

// ctx bounds a call; Ctrl-C (SIGINT/SIGTERM) cancels it.
func (sh *shell) ctx() (context.Context, context.CancelFunc) {
	ctx, cancel, _ := sh.interruptible()
	return ctx, cancel
}

// interruptible is ctx for a command that hands the signals on after a
// while (to a lock's hold, to CMD): detach stops Ctrl-C from cancelling
// ctx and returns once it no longer can.
func (sh *shell) interruptible() (ctx context.Context, cancel context.CancelFunc, detach func()) {
	ctx, cancel = context.WithCancel(context.Background())
	stop, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		select {
		case <-sh.signals:
			cancel()
		case <-ctx.Done():
		case <-stop:
		}
	}()
	var once sync.Once
	detach = func() {
		once.Do(func() { close(stop) })
		<-stopped
	}
	return ctx, cancel, detach
}
