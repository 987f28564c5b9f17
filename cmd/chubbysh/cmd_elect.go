package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"time"

	"github.com/chubby-dev/chubby/client"
	"github.com/chubby-dev/chubby/client/election"
)

// The election commands: elect PATH VALUE -- CMD, leader PATH [-watch]
// (package client/election).

// cmdElect campaigns and runs CMD while leading. Ctrl-C gives up the
// campaign; once CMD runs, signals go to it. When leadership may be lost
// CMD gets SIGTERM and, if still running when the term's StopBy comes
// (before anybody else can lead), SIGKILL. When CMD ends the term resigns,
// so the next campaigner leads at once; chubbysh exits with CMD's code.
func (sh *shell) cmdElect(a *cmdArgs) error {
	if !a.dash || len(a.rest) == 0 {
		return &usageError{"elect PATH VALUE -- CMD: CMD is missing"}
	}
	lockOpts, err := sh.lockOpts(a) // -delay
	if err != nil {
		return err
	}
	path, value, argv := a.pos[0], a.pos[1], a.rest
	ctx, cancel, detach := sh.interruptible()
	defer cancel()
	e := election.New(sh.cli, path, election.LockOptions(lockOpts...))
	stopHint := sh.waitingHint(path)
	term, err := e.Campaign(ctx, []byte(value))
	stopHint()
	if err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("campaign %s: interrupted, not leading", path)
		}
		return err
	}
	detach()
	resign := func() {
		rctx, rcancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer rcancel()
		if err := e.Resign(rctx); err != nil {
			sh.errorf("resign %s: %v", path, err)
		}
	}
	defer resign()
	if err := term.Err(); err != nil {
		return &exitError{code: exitUnreachable, msg: fmt.Sprintf("%v; %s was not started", err, argv[0])}
	}
	seq := term.Sequencer()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), "CHUBBY_SEQUENCER="+seq.String(), "CHUBBY_LEADER_VALUE="+value)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, sh.stdout, sh.stderr
	cmd.SysProcAttr = childAttr()
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", argv[0], err)
	}
	exited, cmdErr := sh.supervise(term.Context(), cmd, "leadership of "+path)
	if exited {
		sh.emitExit(seq, cmdErr)
	}
	return cmdErr
}

// cmdLeader prints the election's leader: its value (-json: value and
// sequencer), exit 1 if nobody leads. With -watch it prints the leader now
// and then one line per change — "(none)" (-json: empty sequencer) while
// nobody leads — until Ctrl-C.
func (sh *shell) cmdLeader(a *cmdArgs) error {
	path := a.pos[0]
	ctx, cancel := sh.ctx()
	defer cancel()
	e := election.New(sh.cli, path)
	if !a.has("watch") {
		l, err := e.Leader(ctx)
		if err != nil {
			return err
		}
		sh.out(leaderJSON(l), string(l.Value))
		return nil
	}
	changes := e.Observe(ctx)
	for {
		select {
		case l, ok := <-changes:
			if !ok {
				if ctx.Err() != nil {
					return nil // Ctrl-C ends a watch normally
				}
				return errors.Join(client.ErrSessionExpired, errors.New("the session ended while watching"))
			}
			text := string(l.Value)
			if l.Sequencer.Gen == 0 {
				text = "(none)"
			}
			sh.out(leaderJSON(l), text)
		case <-ctx.Done():
			return nil
		}
	}
}

func leaderJSON(l election.Leader) map[string]any {
	seq := ""
	if l.Sequencer.Gen != 0 {
		seq = l.Sequencer.String()
	}
	return map[string]any{"value": string(l.Value), "sequencer": seq}
}
