package main

import (
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/chubby-dev/chubby/client"
)

// The shell's own commands: cd, pwd (interactive only) and help.

// dir is the interactive shell's current directory.
func (sh *shell) dir() string {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	return sh.cwd
}

// cmdCd changes the current directory to an existing directory of the
// cell: DIR resolved against the current one, /ls/CELL without DIR, the
// previous one for "-".
func (sh *shell) cmdCd(a *cmdArgs) error {
	home := cellRoot(sh.cli.Cell())
	sh.mu.Lock()
	cwd, prev := sh.cwd, sh.prevDir
	sh.mu.Unlock()
	target := home
	if len(a.pos) == 1 {
		if a.pos[0] == "-" {
			if prev == "" {
				return errors.New("no previous directory")
			}
			target = prev
		} else {
			target = resolvePath(cwd, a.pos[0])
		}
	}
	if !within(home, target) {
		return fmt.Errorf("%w: %s is outside the cell's namespace %s", client.ErrBadPath, target, home)
	}
	st, err := atPath(sh, target, (*client.Handle).GetStat)
	if err != nil {
		return err
	}
	if !st.IsDir {
		return fmt.Errorf("%s: %w", target, client.ErrNotDir)
	}
	sh.mu.Lock()
	sh.prevDir, sh.cwd = cwd, target
	sh.mu.Unlock()
	text := ""
	if len(a.pos) == 1 && a.pos[0] == "-" {
		text = target // like a POSIX shell, say where `cd -` went
	}
	sh.out(map[string]any{"cwd": target}, text)
	return nil
}

func (sh *shell) cmdPwd(a *cmdArgs) error {
	cwd := sh.dir()
	sh.out(map[string]any{"cwd": cwd}, cwd)
	return nil
}

// shellHint is help's footer in the interactive shell.
const shellHint = `In this shell a PATH may be relative to the current directory (cd, pwd),
and ls and stat without PATH show the current directory. Tab completes
commands, flags and paths; Up/Down and Ctrl-R search the history; Ctrl-C
cancels a running command; exit or Ctrl-D ends the session, releasing its
locks.`

func (sh *shell) cmdHelp(a *cmdArgs) error {
	if len(a.pos) == 1 {
		c := lookup(a.pos[0])
		if c == nil {
			return &usageError{unknownCommand(a.pos[0])}
		}
		example := c.example
		if sh.tty && sh.cli != nil {
			// Examples are written for the default cell; show this one's.
			example = strings.ReplaceAll(example, cellRoot("local"), cellRoot(sh.cli.Cell()))
		}
		var b strings.Builder
		fmt.Fprintf(&b, "usage: %s\n  %s\n", sh.outPal.bold(c.usage), c.help)
		if fl := flagSummary(c); fl != "" {
			fmt.Fprintf(&b, "flags: %s\n", fl)
		}
		fmt.Fprintf(&b, "example: %s\n", example)
		sh.out(map[string]any{"usage": c.usage, "help": c.help, "example": example}, b.String())
		return nil
	}
	names := commandNames()
	sort.Strings(names)
	text := commandSummary(sh.outPal) + "\nhelp COMMAND shows a command's usage and an example.\n"
	if sh.tty {
		text += "\n" + shellHint + "\n"
	}
	sh.out(map[string]any{"commands": names}, text)
	return nil
}

// flagSummary lists a command's flags: -shared, -delay DUR.
func flagSummary(c *command) string {
	var fl []string
	for _, f := range c.boolFlags {
		fl = append(fl, "-"+f)
	}
	for _, f := range c.valueFlags {
		fl = append(fl, "-"+f+" "+flagValueName(f))
	}
	return strings.Join(fl, ", ")
}

func flagValueName(f string) string {
	switch f {
	case "seq":
		return "SEQ"
	case "delay", "for":
		return "DUR"
	}
	return "VALUE"
}
