package e2e

import (
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/chubby-dev/chubby/testing/proc"
)

// TestJSONEveryCommand: every command of `chubbysh help` prints exactly one
// JSON object on one line with -json — one-shot and in a script, succeeding
// and failing — and the test fails when a command is added without a case
// here. Two exceptions, as the other tests have them: watch prints one
// object per event (every line must be one), and exit, which ends a script,
// prints nothing.
func TestJSONEveryCommand(t *testing.T) {
	t.Parallel()
	s := proc.StartServer(t, proc.Options{})
	d := p("everyjson")
	wantOK(t, s.Sh(t, "mkdir", d))
	wantOK(t, s.Sh(t, "write", d+"/f", "x"))

	// One-shot: each command succeeding (where it can here) and failing.
	oneShot := map[string][][]string{
		"ls":            {{"ls", d}, {"ls", d + "/missing"}},
		"stat":          {{"stat", d}, {"stat", d + "/missing"}},
		"cat":           {{"cat", d + "/f"}, {"cat", d}},
		"write":         {{"write", d + "/w", "x"}, {"write", d + "/no/w", "x"}},
		"cas":           {{"cas", d + "/cas", "0", "x"}, {"cas", d + "/cas", "0", "y"}},
		"mkdir":         {{"mkdir", d + "/m"}, {"mkdir", d + "/m"}},
		"create":        {{"create", d + "/c", "-ephemeral"}, {"create", d + "/f"}},
		"rm":            {{"rm", d + "/w"}, {"rm", d + "/w"}},
		"trylock":       {{"trylock", d + "/l"}, {"trylock", "/etc/passwd"}},
		"unlock":        {{"unlock", d + "/l"}},
		"seq":           {{"seq", d + "/l"}},
		"checkseq":      {{"checkseq", "X:1:" + d + "/l"}, {"checkseq", "garbage"}},
		"session":       {{"session"}},
		"cache":         {{"cache"}},
		"members":       {{"members"}},
		"remove-server": {{"remove-server", "no-such-server"}},
		"snapshot":      {{"snapshot", "save", filepath.Join(t.TempDir(), "cell.backup")}, {"snapshot", "save", "/no/such/dir/backup"}, {"snapshot", "load", "x"}},
		"sleep":         {{"sleep", "1ms"}, {"sleep", "forever"}},
		"cd":            {{"cd", d}},
		"pwd":           {{"pwd"}},
		"help":          {{"help"}, {"help", "lock"}, {"help", "lcok"}},
		"exit":          {{"exit"}},
		"lock":          {{"lock", d + "/run", "--", "true"}, {"lock", d + "/run", "--", "false"}, {"lock", d + "/run", "-delay", "soon"}},
		"watch":         {{"watch", d, "-for", "100ms"}},
		"elect":         {{"elect", d + "/el", "v", "--", "true"}, {"elect", d + "/el", "v", "--", "false"}, {"elect", d + "/f", "v", "--", "true"}},
		"leader":        {{"leader", d + "/el"}, {"leader", d + "/f"}},
		"whoami":        {{"whoami"}},
		"acl":           {{"acl", "get", d}, {"acl", "set", d, "-read", "r"}, {"acl", "get", d + "/missing"}, {"acl", "set", d, "-read", "a/b"}, {"acl", "frob", d}},
	}
	obj := s.Sh(t, "-json", "help").JSON(t)
	names, ok := obj["commands"].([]any)
	if !ok || len(names) == 0 {
		t.Fatalf("help -json: commands = %v", obj["commands"])
	}
	for _, n := range names {
		name, _ := n.(string)
		if _, ok := oneShot[name]; !ok {
			t.Errorf("command %q has no -json case in this test", name)
		}
	}
	for name, runs := range oneShot {
		for _, argv := range runs {
			r := s.Sh(t, append([]string{"-json"}, argv...)...)
			if name == "exit" && r.Stdout != "" {
				t.Errorf("exit printed %q", r.Stdout)
			}
			if name == "watch" || name == "exit" {
				for _, l := range r.Lines() {
					if _, err := proc.DecodeJSONLine(l); err != nil {
						t.Errorf("watch: %v\n%s", err, r)
					}
				}
				continue
			}
			if _, err := proc.OneJSONObject(r.Stdout); err != nil {
				t.Errorf("%v\n%s", err, r)
			}
			if strings.Contains(r.Stdout+r.Stderr, "\x1b[") {
				t.Errorf("escape sequence in -json output through a pipe\n%s", r)
			}
		}
	}

	// A one-shot lock holds until a signal: one object when it is granted,
	// nothing more on release.
	holder := s.StartSh(t, "-json", "lock", d+"/held")
	jsonLine(t, holder.NextLine(t, 15*time.Second))
	holder.Signal(t, syscall.SIGTERM)
	if code := holder.Wait(t, 10*time.Second); code != 0 {
		t.Fatalf("-json lock holder exited %d on SIGTERM", code)
	}
	if lines := holder.PeekLines(); len(lines) != 1 {
		t.Errorf("-json one-shot lock printed %d lines, want 1: %v", len(lines), lines)
	}

	// A script of succeeding commands: one object a line until exit.
	script := []string{
		"session", "help", "help ls", "members", "cache", "sleep 1ms",
		"mkdir " + d + "/s", "create " + d + "/s/c", "write " + d + "/s/w data", "cas " + d + "/s/new 0 other",
		"cat " + d + "/s/w", "ls " + d + "/s", "stat " + d + "/s/w",
		"lock " + d + "/s/l", "seq " + d + "/s/l", "trylock " + d + "/s/t", "unlock " + d + "/s/t",
		"rm " + d + "/s/c", "exit", "ls " + d,
	}
	r := s.ShStdin(t, strings.Join(script, "\n")+"\n", "-json")
	wantCode(t, r, 0)
	lines := r.Lines()
	if len(lines) != len(script)-2 {
		t.Fatalf("script of %d lines, then exit and one after it, printed %d lines, want %d\n%s", len(script)-2, len(lines), len(script)-2, r)
	}
	for i, l := range lines {
		if _, err := proc.DecodeJSONLine(l); err != nil {
			t.Errorf("script line %d (%s): %v", i+1, script[i], err)
		}
	}

	// Each failing command ends its script with one object and its code.
	for _, line := range []string{
		"cat " + d + "/missing", "cas " + d + "/f 999 x", "unlock " + d + "/never", "seq " + d + "/never",
		"checkseq garbage", "members extra", "watch " + d + "/missing", "cd " + d, "pwd", "satt " + d, "sleep", "write " + d + "/f x -seq X:1:" + d + "/nolock",
	} {
		r := s.ShStdin(t, "session\n"+line+"\nsession\n", "-json")
		if r.Code == 0 {
			t.Errorf("script line %q succeeded\n%s", line, r)
			continue
		}
		lines := r.Lines()
		if len(lines) != 2 {
			t.Errorf("script session/%q/session printed %d lines, want 2 (then stop)\n%s", line, len(lines), r)
			continue
		}
		for _, l := range lines {
			if _, err := proc.DecodeJSONLine(l); err != nil {
				t.Errorf("script line %q: %v\n%s", line, err, r)
			}
		}
	}
}
