package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/chubby-dev/chubby/client"
	"github.com/chubby-dev/chubby/session"
)

// shell is one chubbysh invocation: at most one session, the locks taken in
// it (by path), and how to print.
type shell struct {
	servers []string
	ttl     time.Duration
	timeout time.Duration
	json    bool
	oneShot bool
	stdout  io.Writer
	stderr  io.Writer
	signals chan os.Signal

	cli  *client.Client
	held map[string]*client.Handle

	// emitted: the current command has printed its JSON object already.
	emitted bool
}

// command is an entry of the shell's one command table.
type command struct {
	name       string
	usage      string
	help       string
	min, max   int // positional arguments (max -1: any)
	boolFlags  []string
	valueFlags []string
	noSession  bool
	run        func(sh *shell, a *cmdArgs) error
}

var commands []*command

func init() {
	commands = []*command{
		{name: "ls", usage: "ls PATH", help: "list a directory's children", min: 1, max: 1, run: (*shell).cmdLs},
		{name: "stat", usage: "stat PATH", help: "show a node's metadata", min: 1, max: 1, run: (*shell).cmdStat},
		{name: "cat", usage: "cat PATH", help: "print a file's contents", min: 1, max: 1, run: (*shell).cmdCat},
		{name: "write", usage: "write PATH DATA [-seq SEQ]", help: "set a file's contents, creating it if missing; with -seq only while SEQ is valid", min: 2, max: 2, valueFlags: []string{"seq"}, run: (*shell).cmdWrite},
		{name: "cas", usage: "cas PATH GEN DATA [-seq SEQ]", help: "set contents only if the content generation is GEN (0: only if absent)", min: 3, max: 3, valueFlags: []string{"seq"}, run: (*shell).cmdCAS},
		{name: "mkdir", usage: "mkdir PATH", help: "create a directory (its parent must exist)", min: 1, max: 1, run: (*shell).cmdMkdir},
		{name: "create", usage: "create PATH [-ephemeral]", help: "create an empty file; fails if it exists", min: 1, max: 1, boolFlags: []string{"ephemeral"}, run: (*shell).cmdCreate},
		{name: "rm", usage: "rm PATH", help: "delete a file or an empty directory", min: 1, max: 1, run: (*shell).cmdRm},
		{name: "lock", usage: "lock PATH [-shared] [-delay DUR] [-- CMD ARGS...]", help: "acquire, blocking until held, and print the sequencer; with CMD hold the lock while CMD runs", min: 1, max: 1, boolFlags: []string{"shared"}, valueFlags: []string{"delay"}, run: (*shell).cmdLock},
		{name: "trylock", usage: "trylock PATH [-shared] [-delay DUR]", help: "acquire or fail at once (exit 1)", min: 1, max: 1, boolFlags: []string{"shared"}, valueFlags: []string{"delay"}, run: (*shell).cmdTryLock},
		{name: "unlock", usage: "unlock PATH", help: "release a lock taken in this session", min: 1, max: 1, run: (*shell).cmdUnlock},
		{name: "seq", usage: "seq PATH", help: "print the sequencer of a lock this session holds", min: 1, max: 1, run: (*shell).cmdSeq},
		{name: "checkseq", usage: "checkseq SEQ", help: "print valid (exit 0) or invalid (exit 1)", min: 1, max: 1, run: (*shell).cmdCheckSeq},
		{name: "watch", usage: "watch PATH [-for DUR]", help: "print events on PATH (not in this version)", min: 1, max: 1, valueFlags: []string{"for"}, run: notYet},
		{name: "session", usage: "session", help: "show the session: id, TTL, lease left, master, epoch", run: (*shell).cmdSession},
		{name: "cache", usage: "cache", help: "show cache statistics (not in this version)", run: notYet},
		{name: "members", usage: "members", help: "list the cell's servers, their state and the master", run: (*shell).cmdMembers},
		{name: "remove-server", usage: "remove-server NAME", help: "remove a server from the cell for good (operator command)", min: 1, max: 1, run: (*shell).cmdRemoveServer},
		{name: "sleep", usage: "sleep DUR", help: "wait, keeping the session and its locks alive", min: 1, max: 1, run: (*shell).cmdSleep},
		{name: "help", usage: "help", help: "list the commands", max: 1, noSession: true, run: (*shell).cmdHelp},
		{name: "exit", usage: "exit", help: "end the session (releasing its locks) and leave", noSession: true, run: func(*shell, *cmdArgs) error { return nil }},
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

func commandSummary() string {
	var b strings.Builder
	tw := tabwriter.NewWriter(&b, 2, 8, 2, ' ', 0)
	for _, c := range commands {
		fmt.Fprintf(tw, "  %s\t%s\n", c.usage, c.help)
	}
	tw.Flush()
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
		return nil, nil, &usageError{fmt.Sprintf("unknown command %q (try help)", words[0])}
	}
	a, err := parseArgs(words[1:], c.boolFlags, c.valueFlags)
	if err != nil {
		return nil, nil, &usageError{fmt.Sprintf("%v; usage: %s", err, c.usage)}
	}
	if a.dash && c.name != "lock" {
		return nil, nil, &usageError{fmt.Sprintf("unexpected --; usage: %s", c.usage)}
	}
	if len(a.pos) < c.min || (c.max >= 0 && len(a.pos) > c.max) {
		return nil, nil, &usageError{fmt.Sprintf("usage: %s", c.usage)}
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

func (sh *shell) errorf(format string, args ...any) {
	fmt.Fprintf(sh.stderr, "chubbysh: "+format+"\n", args...)
}

// emit prints one JSON object on one line.
func (sh *shell) emit(v any) {
	b, err := json.Marshal(v)
	if err != nil {
		sh.errorf("encode json: %v", err)
		return
	}
	fmt.Fprintf(sh.stdout, "%s\n", b)
	sh.emitted = true
}

// out prints the JSON object in -json mode and the text otherwise.
func (sh *shell) out(obj any, text string) {
	if sh.json {
		sh.emit(obj)
		return
	}
	if text != "" {
		fmt.Fprint(sh.stdout, text)
		if !strings.HasSuffix(text, "\n") {
			fmt.Fprintln(sh.stdout)
		}
	}
}

func notYet(sh *shell, a *cmdArgs) error {
	return errors.New("not available in this version of chubbysh")
}

// ctx bounds a call; Ctrl-C (SIGINT/SIGTERM) cancels it.
func (sh *shell) ctx() (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		select {
		case <-sh.signals:
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx, cancel
}

func (sh *shell) cmdLs(a *cmdArgs) error {
	ctx, cancel := sh.ctx()
	defer cancel()
	h, err := sh.cli.Open(ctx, a.pos[0])
	if err != nil {
		return err
	}
	kids, err := h.ReadDir(ctx)
	if err != nil {
		return err
	}
	if kids == nil {
		kids = []string{}
	}
	sh.out(map[string]any{"children": kids}, strings.Join(kids, "\n"))
	return nil
}

func (sh *shell) cmdStat(a *cmdArgs) error {
	ctx, cancel := sh.ctx()
	defer cancel()
	h, err := sh.cli.Open(ctx, a.pos[0])
	if err != nil {
		return err
	}
	st, err := h.GetStat(ctx)
	if err != nil {
		return err
	}
	obj := map[string]any{"path": a.pos[0], "instance": st.Instance, "content_gen": st.ContentGen, "lock_gen": st.LockGen,
		"acl_gen": st.ACLGen, "checksum": st.Checksum, "ephemeral": st.Ephemeral, "is_dir": st.IsDir, "size": st.Size,
		"mtime": time.Unix(0, st.Mtime).UTC().Format(time.RFC3339Nano)}
	var b strings.Builder
	tw := tabwriter.NewWriter(&b, 0, 8, 2, ' ', 0)
	kind := "file"
	if st.IsDir {
		kind = "directory"
	}
	if st.Ephemeral {
		kind = "ephemeral file"
	}
	fmt.Fprintf(tw, "path\t%s\nkind\t%s\nsize\t%d bytes\ninstance\t%d\ncontent_gen\t%d\nlock_gen\t%d\nacl_gen\t%d\nchecksum\t%016x\nmodified\t%s ago\n",
		a.pos[0], kind, st.Size, st.Instance, st.ContentGen, st.LockGen, st.ACLGen, st.Checksum,
		time.Since(time.Unix(0, st.Mtime)).Round(time.Millisecond))
	tw.Flush()
	sh.out(obj, b.String())
	return nil
}

func (sh *shell) cmdCat(a *cmdArgs) error {
	ctx, cancel := sh.ctx()
	defer cancel()
	h, err := sh.cli.Open(ctx, a.pos[0])
	if err != nil {
		return err
	}
	data, _, err := h.GetContentsAndStat(ctx)
	if err != nil {
		return err
	}
	if sh.json {
		sh.emit(map[string]any{"data": string(data)})
		return nil
	}
	sh.stdout.Write(data)
	return nil
}

func (sh *shell) seqFlag(a *cmdArgs) ([]client.WriteOption, error) {
	if !a.has("seq") {
		return nil, nil
	}
	seq, err := client.ParseSequencer(a.flags["seq"])
	if err != nil {
		return nil, err
	}
	return []client.WriteOption{client.WithSequencer(seq)}, nil
}

func (sh *shell) cmdWrite(a *cmdArgs) error {
	opts, err := sh.seqFlag(a)
	if err != nil {
		return err
	}
	ctx, cancel := sh.ctx()
	defer cancel()
	st, err := sh.cli.WriteFile(ctx, a.pos[0], []byte(a.pos[1]), opts...)
	if err != nil {
		return err
	}
	sh.out(map[string]any{"content_gen": st.ContentGen}, "")
	return nil
}

func (sh *shell) cmdCAS(a *cmdArgs) error {
	gen, err := strconv.ParseUint(a.pos[1], 10, 64)
	if err != nil {
		return &usageError{fmt.Sprintf("GEN %q is not a content generation; usage: cas PATH GEN DATA [-seq SEQ]", a.pos[1])}
	}
	opts, err := sh.seqFlag(a)
	if err != nil {
		return err
	}
	ctx, cancel := sh.ctx()
	defer cancel()
	st, err := sh.cli.WriteFileIf(ctx, a.pos[0], []byte(a.pos[2]), gen, opts...)
	if err != nil {
		return err
	}
	sh.out(map[string]any{"content_gen": st.ContentGen}, "")
	return nil
}

func (sh *shell) cmdMkdir(a *cmdArgs) error {
	ctx, cancel := sh.ctx()
	defer cancel()
	h, err := sh.cli.Open(ctx, a.pos[0], client.CreateDir(), client.FailIfExists())
	if err != nil {
		return err
	}
	sh.out(map[string]any{"instance": h.Instance()}, "")
	return nil
}

func (sh *shell) cmdCreate(a *cmdArgs) error {
	ctx, cancel := sh.ctx()
	defer cancel()
	opts := []client.OpenOption{client.Create(), client.FailIfExists()}
	if a.has("ephemeral") {
		opts = append(opts, client.Ephemeral())
	}
	h, err := sh.cli.Open(ctx, a.pos[0], opts...)
	if err != nil {
		return err
	}
	sh.out(map[string]any{"instance": h.Instance()}, "")
	return nil
}

func (sh *shell) cmdRm(a *cmdArgs) error {
	ctx, cancel := sh.ctx()
	defer cancel()
	h, err := sh.cli.Open(ctx, a.pos[0])
	if err != nil {
		return err
	}
	if err := h.Delete(ctx); err != nil {
		return err
	}
	delete(sh.held, a.pos[0])
	sh.out(map[string]any{"ok": true}, "")
	return nil
}

func lockMode(a *cmdArgs) client.Mode {
	if a.has("shared") {
		return client.Shared
	}
	return client.Exclusive
}

func (sh *shell) lockOpts(a *cmdArgs) ([]client.LockOption, time.Duration, error) {
	if !a.has("delay") {
		return nil, session.DefaultLockDelay, nil
	}
	d, err := time.ParseDuration(a.flags["delay"])
	if err != nil || d < 0 || d > session.MaxLockDelay {
		return nil, 0, &usageError{fmt.Sprintf("-delay %q: a duration from 0s to %v", a.flags["delay"], session.MaxLockDelay)}
	}
	return []client.LockOption{client.LockDelay(d)}, d, nil
}

func (sh *shell) cmdLock(a *cmdArgs) error {
	opts, delay, err := sh.lockOpts(a)
	if err != nil {
		return err
	}
	if a.dash && len(a.rest) == 0 {
		return &usageError{"lock PATH -- CMD: CMD is missing"}
	}
	path := a.pos[0]
	if _, ok := sh.held[path]; ok {
		return fmt.Errorf("%s: %w (already held by this session)", path, client.ErrLockHeld)
	}
	ctx, cancel := sh.ctx()
	defer cancel()
	h, err := sh.cli.Open(ctx, path, client.Create())
	if err != nil {
		return err
	}
	if err := h.Acquire(ctx, lockMode(a), opts...); err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("acquire %s: interrupted", path)
		}
		return err
	}
	cancel() // from here on the signals belong to the hold below
	sh.held[path] = h
	seq, _ := h.Sequencer()
	if a.dash {
		return sh.runHolding(h, seq, delay, a.rest)
	}
	sh.out(map[string]any{"sequencer": seq.String()}, seq.String())
	if sh.oneShot {
		return sh.holdUntilSignal(h)
	}
	return nil
}

// holdUntilSignal keeps a one-shot lock held until SIGINT/SIGTERM (exit 0,
// released) or until the lock may be lost (exit 3).
func (sh *shell) holdUntilSignal(h *client.Handle) error {
	select {
	case <-sh.signals:
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		return h.Release(ctx)
	case <-h.LockLost():
		return &exitError{code: exitUnreachable, msg: fmt.Sprintf("lock on %s may be lost: the session is in jeopardy", h.Path())}
	}
}

// runHolding runs CMD while the lock is held. If the lock may be lost
// (jeopardy) CMD gets SIGTERM and, if still running, SIGKILL before the
// earliest moment the master could grant the lock to anybody else.
func (sh *shell) runHolding(h *client.Handle, seq client.Sequencer, delay time.Duration, argv []string) error {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), "CHUBBY_SEQUENCER="+seq.String())
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, sh.stdout, sh.stderr
	if err := cmd.Start(); err != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		h.Release(ctx)
		cancel()
		return fmt.Errorf("start %s: %w", argv[0], err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	release := func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		h.Release(ctx)
		delete(sh.held, h.Path())
	}
	for {
		select {
		case err := <-done:
			release()
			err = exitCodeOf(err)
			if sh.json {
				code := exitOK
				var ee *exitError
				if errors.As(err, &ee) {
					code = ee.code
				}
				sh.emit(map[string]any{"sequencer": seq.String(), "exit_code": code})
			}
			return err
		case s := <-sh.signals:
			cmd.Process.Signal(s)
		case <-h.LockLost():
			// The master's lease outlives our local lease by at least the
			// drift margin, and lock-delay adds to that: kill within it.
			grace := session.DriftMargin(sh.cli.Session().TTL) / 2
			if delay > 0 {
				grace = min(delay/2, 2*time.Second)
			}
			cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-done:
			case <-time.After(grace):
				cmd.Process.Kill()
				<-done
			}
			return &exitError{code: exitUnreachable, msg: fmt.Sprintf("lock on %s may be lost: the session is in jeopardy; %s was stopped", h.Path(), argv[0])}
		}
	}
}

func exitCodeOf(err error) error {
	if err == nil {
		return nil
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code := ee.ExitCode()
		if code < 0 {
			code = 128 + int(syscall.SIGKILL)
			if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
				code = 128 + int(ws.Signal())
			}
		}
		return &exitError{code: code}
	}
	return err
}

func (sh *shell) cmdTryLock(a *cmdArgs) error {
	opts, _, err := sh.lockOpts(a)
	if err != nil {
		return err
	}
	path := a.pos[0]
	if _, ok := sh.held[path]; ok {
		return fmt.Errorf("%s: %w (already held by this session)", path, client.ErrLockHeld)
	}
	ctx, cancel := sh.ctx()
	defer cancel()
	h, err := sh.cli.Open(ctx, path, client.Create())
	if err != nil {
		return err
	}
	if err := h.TryAcquire(ctx, lockMode(a), opts...); err != nil {
		return err
	}
	sh.held[path] = h
	seq, _ := h.Sequencer()
	sh.out(map[string]any{"sequencer": seq.String()}, seq.String())
	return nil
}

func (sh *shell) cmdUnlock(a *cmdArgs) error {
	h, ok := sh.held[a.pos[0]]
	if !ok {
		return fmt.Errorf("%s: %w by this session", a.pos[0], client.ErrNotHeld)
	}
	ctx, cancel := sh.ctx()
	defer cancel()
	err := h.Release(ctx)
	delete(sh.held, a.pos[0])
	if err != nil {
		return err
	}
	sh.out(map[string]any{"ok": true}, "")
	return nil
}

func (sh *shell) cmdSeq(a *cmdArgs) error {
	h, ok := sh.held[a.pos[0]]
	if !ok {
		return fmt.Errorf("%s: %w by this session", a.pos[0], client.ErrNotHeld)
	}
	seq, err := h.Sequencer()
	if err != nil {
		return err
	}
	sh.out(map[string]any{"sequencer": seq.String()}, seq.String())
	return nil
}

func (sh *shell) cmdCheckSeq(a *cmdArgs) error {
	seq, err := client.ParseSequencer(a.pos[0])
	valid := false
	if err == nil {
		ctx, cancel := sh.ctx()
		defer cancel()
		valid, err = sh.cli.CheckSequencer(ctx, seq)
		if err != nil {
			return err
		}
	} else {
		sh.errorf("checkseq: %v", err)
	}
	if valid {
		sh.out(map[string]any{"valid": true}, "valid")
		return nil
	}
	sh.out(map[string]any{"valid": false}, "invalid")
	return &exitError{code: exitFailed}
}

func (sh *shell) cmdSession(a *cmdArgs) error {
	si := sh.cli.Session()
	obj := map[string]any{"id": si.ID, "ttl_ms": si.TTL.Milliseconds(), "lease_left_ms": si.LeaseLeft.Milliseconds(),
		"master": si.Master, "epoch": si.Epoch, "state": si.State.String(), "cell": si.Cell}
	text := fmt.Sprintf("id          %d\nstate       %s\nttl         %v\nlease left  %v\nmaster      %s\nepoch       %d\ncell        %s\n",
		si.ID, si.State, si.TTL, si.LeaseLeft.Round(time.Millisecond), si.Master, si.Epoch, si.Cell)
	sh.out(obj, text)
	return nil
}

func (sh *shell) cmdSleep(a *cmdArgs) error {
	d, err := time.ParseDuration(a.pos[0])
	if err != nil || d < 0 {
		return &usageError{fmt.Sprintf("sleep %q: not a duration", a.pos[0])}
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-sh.signals:
		return errors.New("interrupted")
	case <-sh.cli.Done():
		return fmt.Errorf("%w: the session ended while sleeping", client.ErrSessionExpired)
	}
	sh.out(map[string]any{"ok": true}, "")
	return nil
}

func (sh *shell) cmdHelp(a *cmdArgs) error {
	if len(a.pos) == 1 {
		c := lookup(a.pos[0])
		if c == nil {
			return &usageError{fmt.Sprintf("help: unknown command %q", a.pos[0])}
		}
		sh.out(map[string]any{"usage": c.usage, "help": c.help}, c.usage+"\n  "+c.help)
		return nil
	}
	names := make([]string, 0, len(commands))
	for _, c := range commands {
		names = append(names, c.name)
	}
	sort.Strings(names)
	sh.out(map[string]any{"commands": names}, commandSummary())
	return nil
}

func (sh *shell) cmdMembers(a *cmdArgs) error {
	ctx, cancel := sh.ctx()
	defer cancel()
	ms, err := sh.cli.Members(ctx)
	if err != nil {
		return err
	}
	if ms == nil {
		ms = []client.Member{}
	}
	var b strings.Builder
	tw := tabwriter.NewWriter(&b, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tRPC ADDRESS\tSTATE\tROLE")
	for _, m := range ms {
		role := "voter"
		if !m.Voter {
			role = "non-voter"
		}
		if m.Master {
			role = "master"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", m.Name, m.RPCAddr, m.State, role)
	}
	tw.Flush()
	sh.out(map[string]any{"members": ms}, b.String())
	return nil
}

func (sh *shell) cmdRemoveServer(a *cmdArgs) error {
	ctx, cancel := sh.ctx()
	defer cancel()
	if err := sh.cli.RemoveServer(ctx, a.pos[0]); err != nil {
		return err
	}
	sh.out(map[string]any{"ok": true}, "")
	return nil
}
