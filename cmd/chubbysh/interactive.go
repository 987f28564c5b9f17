package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/chubby-dev/chubby/client"
	"github.com/chzyer/readline"
	"golang.org/x/term"
)

// The interactive shell: chubbysh with no command and a terminal on stdin.
//
//	keyboard ─► readline (raw mode at the prompt: editing, history, Tab ─► completer)
//	              │ a line
//	              ▼
//	            loop ── exec ─► command (cooked mode: Ctrl-C is SIGINT)
//	                               ▲ sh.signals
//	OS signals ─► relay ───────────┘ while a command runs; SIGTERM/SIGHUP
//	                                 also leave the shell
//	client.Events() ─► pump ─► notify ─► readline's writer at the prompt,
//	                                     the terminal during a command
//
// Output that arrives while the user may be typing — session events now,
// anything asynchronous later (notify) — goes through readline's writer
// when readline has the terminal: it clears the input line, prints, and
// redraws the prompt and what was typed, so the line being edited is never
// garbled. A command's own output, printed while readline is idle, goes
// straight to the terminal (readline's writer may still believe it is
// reading just after Enter, and would redraw a prompt into the output).
// The pump owns client.Events() here: a command that wants handle events
// (watch) must take them from it (show's default case), not from the
// client directly.
//
// Leaving (exit, Ctrl-D, SIGTERM, SIGHUP) closes the session, which
// releases its locks at once. Ctrl-C cancels a running command (a blocked
// lock leaves the queue without the lock) and at the prompt only discards
// the line.

const (
	historyName  = ".chubbysh_history"
	historyLimit = 1000
)

// historyPath is ~/.chubbysh_history, created private (it holds what was
// written to the cell); "" (no history file) without a home directory.
func historyPath() string {
	home, err := os.UserHomeDir()
	if err != nil || home == "" {
		return ""
	}
	p := filepath.Join(home, historyName)
	if f, err := os.OpenFile(p, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600); err == nil {
		f.Close()
	}
	return p
}

// syncWriter serialises the writes of the command goroutine, the event pump
// and the lock-wait hint.
type syncWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (w *syncWriter) Write(b []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.w.Write(b)
}

// repl is one interactive session of the shell.
type repl struct {
	sh      *shell
	rl      *readline.Instance
	stdin   *readline.CancelableStdin // closing it ends a pending read of the terminal
	cmdSigs chan os.Signal            // the running command's signals (sh.signals)
	// raw: readline has the terminal in raw mode (at the prompt), where
	// Ctrl-C is a key; it is set only once ISIG is off and cleared before
	// ISIG is back, so a keyboard SIGINT never arrives while it is true.
	raw  atomic.Bool
	stop chan struct{}
	// outMu serialises everything written to the terminal; stderr is the
	// terminal itself, for notify outside readline.
	outMu   sync.Mutex
	stderr  io.Writer
	leaving atomic.Bool // the session is being closed: its events are ours

	mu       sync.Mutex
	quit     bool
	quitCode int
}

// interactive runs the shell on the terminal stdin until exit, Ctrl-D, a
// terminating signal or the end of the session.
func (sh *shell) interactive(stdin *os.File, osSigs chan os.Signal) int {
	sh.tty = true
	fd := int(stdin.Fd())
	if st, err := term.GetState(fd); err == nil {
		defer term.Restore(fd, st) // however we leave, the terminal is usable again
	}
	signal.Notify(osSigs, syscall.SIGHUP)

	// The session first: the prompt shows the cell. The terminal is in
	// cooked mode, so Ctrl-C here is SIGINT and gives up.
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		select {
		case <-osSigs:
			cancel()
		case <-ctx.Done():
		}
	}()
	err := sh.dial(ctx)
	interrupted := ctx.Err() != nil
	cancel()
	if err != nil {
		if interrupted {
			err = fmt.Errorf("%w: interrupted", client.ErrUnavailable)
		}
		return sh.report("connect", err)
	}
	sh.cwd = cellRoot(sh.cli.Cell())

	r := &repl{sh: sh, cmdSigs: make(chan os.Signal, 1), stop: make(chan struct{}), stderr: sh.stderr,
		stdin: readline.NewCancelableStdin(stdin)}
	rm := new(readline.RawMode)
	rl, err := readline.NewEx(&readline.Config{
		FuncMakeRaw: func() error {
			err := rm.Enter()
			r.raw.Store(true)
			return err
		},
		FuncExitRaw: func() error {
			r.raw.Store(false)
			return rm.Exit()
		},
		Prompt:            sh.prompt(),
		HistoryFile:       historyPath(),
		HistoryLimit:      historyLimit,
		HistorySearchFold: true,
		AutoComplete:      &completer{sh: sh},
		InterruptPrompt:   "^C",
		EOFPrompt:         "exit",
		Stdin:             r.stdin,
		Stdout:            sh.stdout,
		Stderr:            sh.stderr,
	})
	if err != nil {
		return sh.report("terminal", err)
	}
	r.rl = rl
	defer r.closeReadline()
	sh.stdout = &syncWriter{&r.outMu, sh.stdout}
	sh.stderr = &syncWriter{&r.outMu, sh.stderr}
	sh.signals = r.cmdSigs
	sh.forward = new(atomic.Pointer[chan client.Event])

	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); r.relay(osSigs) }()
	go func() { defer wg.Done(); r.pump() }()
	defer wg.Wait()
	defer close(r.stop)

	if !sh.json {
		si := sh.cli.Session()
		fmt.Fprintf(sh.stderr, "%s\n", sh.errPal.dim(fmt.Sprintf(
			"session %d with cell %s (master %s). help lists the commands; Tab completes; Ctrl-D leaves.",
			si.ID, si.Cell, si.Master)))
	}
	return r.loop()
}

func (r *repl) loop() int {
	sh := r.sh
	for {
		if code, ok := r.quitting(); ok {
			return r.leave(code)
		}
		r.drainSignals()
		r.rl.SetPrompt(sh.prompt())
		line, err := r.rl.Readline()
		if code, ok := r.quitting(); ok {
			if err != nil {
				fmt.Fprintln(sh.stderr) // the prompt was left unfinished
			}
			return r.leave(code)
		}
		switch {
		case errors.Is(err, readline.ErrInterrupt):
			if strings.TrimSpace(line) == "" {
				fmt.Fprintf(sh.stderr, "%s\n", sh.errPal.dim("(use exit or Ctrl-D to leave)"))
			}
			continue
		case errors.Is(err, io.EOF):
			return r.leave(exitOK)
		case err != nil:
			return sh.report("read", err)
		}
		words, err := splitLine(line)
		if err != nil {
			sh.report("parse", &usageError{err.Error()})
			continue
		}
		if len(words) == 0 {
			continue
		}
		if words[0] == "exit" || words[0] == "quit" {
			return r.leave(exitOK)
		}
		if code := sh.exec(words); code == exitUnreachable && sh.sessionGone() {
			return r.leave(code)
		}
	}
}

// drainSignals forgets signals that arrived after the last command ended:
// they were meant for no command. One that arrives after the line is
// entered (the terminal back in cooked mode) is the next command's.
func (r *repl) drainSignals() {
	for {
		select {
		case <-r.cmdSigs:
		default:
			return
		}
	}
}

// leave ends the session, releasing its locks, and says which it released.
func (r *repl) leave(code int) int {
	sh := r.sh
	paths, _ := sh.heldLocks()
	if sh.sessionGone() {
		return code
	}
	r.leaving.Store(true)
	err := sh.cli.Close()
	switch {
	case err != nil:
		sh.errorf("exit: %v", err)
	case len(paths) > 0 && !sh.json:
		fmt.Fprintf(sh.stderr, "%s\n", sh.errPal.dim("released "+plural(len(paths), "lock")+": "+strings.Join(paths, ", ")))
	}
	return code
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}

// requestQuit makes the shell leave with code: at once at the prompt (the
// pending Readline returns), after the running command otherwise. The
// first request wins.
func (r *repl) requestQuit(code int) {
	r.mu.Lock()
	if !r.quit {
		r.quit, r.quitCode = true, code
	}
	r.mu.Unlock()
	r.closeReadline()
}

// closeReadline makes a pending Readline return io.EOF and stops readline.
// The terminal's reader is closed first: readline's Close waits for its
// reading goroutine, which may be blocked reading the terminal.
func (r *repl) closeReadline() {
	r.stdin.Close()
	r.rl.Close()
}

func (r *repl) quitting() (int, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.quitCode, r.quit
}

// relay hands the process's signals to the running command. At the prompt
// the keyboard's Ctrl-C is a key, not a signal, and a SIGINT sent from
// elsewhere is ignored. SIGTERM and SIGHUP (the terminal went away) also
// make the shell leave, which closes the session cleanly.
func (r *repl) relay(osSigs <-chan os.Signal) {
	for {
		select {
		case s := <-osSigs:
			quit := s == syscall.SIGTERM || s == syscall.SIGHUP
			if quit || !r.raw.Load() {
				select {
				case r.cmdSigs <- s:
				default:
				}
			}
			if s == syscall.SIGINT && !r.raw.Load() {
				// The terminal echoed ^C: what the command says next
				// goes on a line of its own.
				r.outMu.Lock()
				io.WriteString(r.stderr, "\n")
				r.outMu.Unlock()
			}
			if quit {
				r.requestQuit(exitOK)
			}
		case <-r.stop:
			return
		}
	}
}

// pump shows session events as they happen, redrawing the prompt (whose
// state they change) around them.
func (r *repl) pump() {
	for {
		select {
		case ev := <-r.sh.cli.Events():
			r.show(ev)
		case <-r.stop:
			return
		}
	}
}

func (r *repl) show(ev client.Event) {
	sh := r.sh
	if r.leaving.Load() {
		return // closing the session ends it: not news
	}
	pal := sh.errPal
	var msg string
	switch ev.Type {
	case client.EventJeopardy:
		msg = pal.yellow("jeopardy: the session's lease ran out without word from the master; its locks may be lost")
	case client.EventSafe:
		msg = pal.green("safe: the master renewed the session; its locks are still held")
	case client.EventExpired:
		msg = pal.red("expired: the session ended; its locks and ephemeral files are gone (leaving the shell, exit 3)")
	case client.EventMasterFailover:
		si := sh.cli.Session()
		msg = pal.cyan(fmt.Sprintf("master_failover: the session moved to the new master %s (epoch %d)", si.Master, si.Epoch))
	default:
		// A handle event: it belongs to the running watch, if any.
		if p := sh.forward.Load(); p != nil {
			select {
			case *p <- ev:
			default:
			}
		}
		return
	}
	if p := sh.forward.Load(); p != nil {
		select {
		case *p <- ev:
		default:
		}
	}
	r.rl.SetPrompt(sh.prompt())
	r.notify(fmt.Sprintf("%s %s\n", pal.dim(ev.Time.Format("15:04:05")), msg))
	if ev.Type == client.EventExpired {
		r.requestQuit(exitUnreachable)
	}
}

// notify prints text that arrives asynchronously: above the line being
// typed, which readline then redraws, when at the prompt; straight to the
// terminal while a command runs.
func (r *repl) notify(text string) {
	r.outMu.Lock()
	defer r.outMu.Unlock()
	if r.raw.Load() {
		io.WriteString(r.rl.Stderr(), text)
		return
	}
	io.WriteString(r.stderr, text)
}

// prompt is CELL:DIR> with the session's state when it is not safe:
// local:/ls/local/app [jeopardy]>
func (sh *shell) prompt() string {
	si := sh.cli.Session()
	p := sh.outPal.bold(si.Cell + ":" + sh.dir())
	switch si.State {
	case client.SessionSafe:
	case client.SessionJeopardy:
		p += " " + sh.outPal.yellow("["+si.State.String()+"]")
	default:
		p += " " + sh.outPal.red("["+si.State.String()+"]")
	}
	return p + "> "
}
