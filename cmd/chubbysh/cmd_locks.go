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
	"github.com/chubby-dev/chubby/session"
)

// The lock commands: lock (also lock -- CMD), trylock, unlock, seq, checkseq.

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
	ctx, cancel := sh.ctx()
	defer cancel()
	h, err := sh.openLockable(ctx, path)
	if err != nil {
		return err
	}
	stopHint := sh.waitingHint(path)
	err = h.Acquire(ctx, lockMode(a), opts...)
	stopHint()
	if err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("acquire %s: interrupted, not acquired", path)
		}
		return err
	}
	cancel() // from here on the signals belong to the hold below
	sh.setHeld(path, h)
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
		sh.dropHeld(h.Path())
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

func (sh *shell) cmdUnlock(a *cmdArgs) error {
	h, ok := sh.held[a.pos[0]]
	if !ok {
		return fmt.Errorf("%s: %w by this session", a.pos[0], client.ErrNotHeld)
	}
	ctx, cancel := sh.ctx()
	defer cancel()
	err := h.Release(ctx)
	sh.dropHeld(a.pos[0])
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
