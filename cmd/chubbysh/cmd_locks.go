package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"sort"
	"syscall"
	"time"

	"github.com/chubby-dev/chubby/client"
)

// The lock commands: lock (also lock -- CMD), trylock, unlock, seq, checkseq.

func lockMode(a *cmdArgs) client.Mode {
	if a.has("shared") {
		return client.Shared
	}
	return client.Exclusive
}

// lockOpts reads -delay: 0s means none, as CONTRACT.md has it.
func (sh *shell) lockOpts(a *cmdArgs) ([]client.LockOption, error) {
	if !a.has("delay") {
		return nil, nil
	}
	d, err := time.ParseDuration(a.flags["delay"])
	if err != nil || d < 0 || d > client.MaxLockDelay {
		return nil, &usageError{fmt.Sprintf("-delay %q: a duration from 0s to %v", a.flags["delay"], client.MaxLockDelay)}
	}
	if d == 0 {
		d = client.NoLockDelay
	}
	return []client.LockOption{client.LockDelay(d)}, nil
}

func (sh *shell) cmdLock(a *cmdArgs) error {
	opts, err := sh.lockOpts(a)
	if err != nil {
		return err
	}
	if a.dash && len(a.rest) == 0 {
		return &usageError{"lock PATH -- CMD: CMD is missing"}
	}
	path := a.pos[0]
	ctx, cancel, detach := sh.interruptible()
	defer cancel()
	h, err := sh.openLockable(ctx, path)
	if err != nil {
		return err
	}
	if a.dash {
		return sh.runHolding(ctx, detach, h, lockMode(a), opts, a.rest)
	}
	stopHint := sh.waitingHint(path)
	err = h.Acquire(ctx, lockMode(a), opts...)
	stopHint()
	if err != nil {
		return acquireFailed(ctx, path, err)
	}
	detach() // from here on the signals belong to the hold below
	sh.setHeld(path, h)
	seq, _ := h.Sequencer()
	sh.out(map[string]any{"sequencer": seq.String()}, seq.String())
	if sh.oneShot {
		return sh.holdUntilSignal(h)
	}
	return nil
}

// acquireFailed is the error of an Acquire that failed: interrupted (Ctrl-C
// cancelled ctx) or the cell's answer.
func acquireFailed(ctx context.Context, path string, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("acquire %s: interrupted, not acquired", path)
	}
	return err
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

// runHolding runs CMD while the lock is held (client.RunLocked): Ctrl-C
// gives up waiting for the lock; once CMD runs, signals go to it, and
// chubbysh exits with its code. When the lock may be lost CMD gets SIGTERM
// and, if still running by the time the library says the lock could move,
// SIGKILL.
func (sh *shell) runHolding(ctx context.Context, detach func(), h *client.Handle, mode client.Mode, opts []client.LockOption, argv []string) error {
	stopHint := sh.waitingHint(h.Path())
	held, ran, exited := false, false, false
	var seq client.Sequencer
	var cmdErr error
	err := h.RunLocked(ctx, mode, func(ctx context.Context, s client.Sequencer) error {
		stopHint()
		held, seq = true, s
		detach()
		switch cause := context.Cause(ctx); {
		case errors.Is(cause, client.ErrLockLost): // already, as it was granted
			return &exitError{code: exitUnreachable, msg: fmt.Sprintf("%v; %s was not started", cause, argv[0])}
		case cause != nil: // Ctrl-C as the lock was granted
			return fmt.Errorf("acquire %s: interrupted, %s not started", h.Path(), argv[0])
		}
		sh.setHeld(h.Path(), h)
		cmd := exec.Command(argv[0], argv[1:]...)
		cmd.Env = append(os.Environ(), "CHUBBY_SEQUENCER="+s.String())
		cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, sh.stdout, sh.stderr
		cmd.SysProcAttr = childAttr()
		if err := cmd.Start(); err != nil {
			return fmt.Errorf("start %s: %w", argv[0], err)
		}
		ran = true
		exited, cmdErr = sh.supervise(ctx, cmd, "lock on "+h.Path())
		return cmdErr
	}, opts...)
	if !held {
		stopHint()
		return acquireFailed(ctx, h.Path(), err)
	}
	sh.dropHeld(h.Path())
	if !ran {
		return err
	}
	// CMD's exit code, whatever the release said (the session's end frees
	// the lock in any case).
	if exited {
		sh.emitExit(seq, cmdErr)
	}
	return cmdErr
}

// emitExit prints, with -json, the object of a command that ran CMD under
// a lock or a leadership: the sequencer and CMD's exit code.
func (sh *shell) emitExit(seq client.Sequencer, cmdErr error) {
	if !sh.json {
		return
	}
	code := exitOK
	var ee *exitError
	if errors.As(cmdErr, &ee) {
		code = ee.code
	}
	sh.emit(map[string]any{"sequencer": seq.String(), "exit_code": code})
}

// supervise waits for the running cmd, relaying signals to it. When ctx is
// done (the lock may be lost) it stops cmd: SIGTERM, then SIGKILL at the
// lock's StopBy. exited: cmd ended by itself; err carries its exit code.
// what names the lock ("lock on PATH", "leadership of PATH").
func (sh *shell) supervise(ctx context.Context, cmd *exec.Cmd, what string) (exited bool, err error) {
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	for {
		select {
		case err := <-done:
			return true, exitCodeOf(err)
		case s := <-sh.signals:
			cmd.Process.Signal(s)
		case <-ctx.Done():
			stopBy := time.Now()
			var lost *client.LockLostError
			if errors.As(context.Cause(ctx), &lost) {
				stopBy = lost.StopBy
			}
			cmd.Process.Signal(syscall.SIGTERM)
			t := time.NewTimer(time.Until(stopBy))
			select {
			case <-done:
			case <-t.C:
				cmd.Process.Kill()
				<-done
			}
			t.Stop()
			return false, &exitError{code: exitUnreachable, msg: fmt.Sprintf("%s may be lost: the session is in jeopardy; %s was stopped", what, cmd.Args[0])}
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
	opts, err := sh.lockOpts(a)
	if err != nil {
		return err
	}
	path := a.pos[0]
	ctx, cancel := sh.ctx()
	defer cancel()
	h, err := sh.openLockable(ctx, path)
	if err != nil {
		return err
	}
	if err := h.TryAcquire(ctx, lockMode(a), opts...); err != nil {
		return err
	}
	sh.setHeld(path, h)
	seq, _ := h.Sequencer()
	sh.out(map[string]any{"sequencer": seq.String()}, seq.String())
	return nil
}

// heldHandle is the handle of a lock this session took on path.
func (sh *shell) heldHandle(path string) (*client.Handle, error) {
	h, ok := sh.held[path]
	if !ok {
		return nil, fmt.Errorf("%s: %w by this session", path, client.ErrNotHeld)
	}
	return h, nil
}

func (sh *shell) cmdUnlock(a *cmdArgs) error {
	h, err := sh.heldHandle(a.pos[0])
	if err != nil {
		return err
	}
	ctx, cancel := sh.ctx()
	defer cancel()
	err = h.Release(ctx)
	sh.dropHeld(a.pos[0])
	if err != nil {
		return err
	}
	sh.out(map[string]any{"ok": true}, "")
	return nil
}

func (sh *shell) cmdSeq(a *cmdArgs) error {
	h, err := sh.heldHandle(a.pos[0])
	if err != nil {
		return err
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

// waitingHint tells the interactive user, if a lock is not granted within a
// moment, that lock is waiting and how to give up. The returned func stops
// the hint; once it has returned nothing more is printed.
func (sh *shell) waitingHint(path string) (stop func()) {
	if !sh.tty || sh.json {
		return func() {}
	}
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		select {
		case <-time.After(300 * time.Millisecond):
			fmt.Fprintf(sh.stderr, "%s\n", sh.errPal.dim(fmt.Sprintf("waiting for %s, held elsewhere (Ctrl-C to give up)", path)))
		case <-quit:
		}
	}()
	return func() {
		close(quit)
		<-done
	}
}

// setHeld records a lock this session took; dropHeld forgets it.
func (sh *shell) setHeld(path string, h *client.Handle) {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	sh.held[path] = h
}

func (sh *shell) dropHeld(path string) {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	delete(sh.held, path)
}

// heldLocks are the paths and sequencers of the locks this session holds,
// sorted by path; safe to call from any goroutine.
func (sh *shell) heldLocks() (paths, seqs []string) {
	sh.mu.Lock()
	hs := make(map[string]*client.Handle, len(sh.held))
	for p, h := range sh.held {
		hs[p] = h
	}
	sh.mu.Unlock()
	for p := range hs {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	for _, p := range paths {
		if seq, err := hs[p].Sequencer(); err == nil {
			seqs = append(seqs, seq.String())
		}
	}
	return paths, seqs
}

// openLockable opens PATH (creating it) to take its lock, refusing a lock
// this session already holds.
func (sh *shell) openLockable(ctx context.Context, path string) (*client.Handle, error) {
	if _, ok := sh.held[path]; ok {
		return nil, fmt.Errorf("%s: %w (already held by this session)", path, client.ErrLockHeld)
	}
	return sh.cli.Open(ctx, path, client.Create())
}
