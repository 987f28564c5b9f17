package e2e

import (
	"slices"
	"testing"
	"time"

	"github.com/chubby-dev/chubby/testing/proc"
	"github.com/chubby-dev/chubby/testing/wait"
)

// TestEphemeral: an ephemeral file lives as long as the session that made
// it: gone at once when the session ends cleanly (script exit, one-shot),
// and gone after the TTL when the session's process is SIGKILLed.
func TestEphemeral(t *testing.T) {
	t.Parallel()
	s := proc.StartServer(t, proc.Options{})
	d := p("eph")
	wantOK(t, s.Sh(t, "mkdir", d))
	wantOK(t, s.Sh(t, "write", d+"/permanent", "stays"))

	t.Run("script exit", func(t *testing.T) {
		f := d + "/script"
		r := s.ShStdin(t, "create "+f+" -ephemeral\nstat "+f+"\nls "+d+"\nexit\nwrite "+d+"/after-exit x\n", "-json")
		wantOK(t, r)
		lines := r.Lines()
		if len(lines) != 3 {
			t.Fatalf("script printed %d lines, want 3\n%s", len(lines), r)
		}
		st := jsonLine(t, proc.Line{Text: lines[1]})
		if !boolean(t, st, "ephemeral") || boolean(t, st, "is_dir") {
			t.Errorf("stat of an ephemeral file in its session: %v", st)
		}
		if num(t, st, "instance") != num(t, jsonLine(t, proc.Line{Text: lines[0]}), "instance") {
			t.Errorf("create and stat disagree on the instance: %q", lines[:2])
		}
		if kids := jsonLine(t, proc.Line{Text: lines[2]})["children"]; !slices.Contains(kids.([]any), any("script")) {
			t.Errorf("ls in the session does not show the ephemeral file: %v", kids)
		}
		// The session ended with the script: the file is gone right away.
		wantFail(t, s.Sh(t, "cat", f), 1)
		wantFail(t, s.Sh(t, "stat", f), 1)
		if got := s.Sh(t, "ls", d).Lines(); !slices.Equal(got, []string{"permanent"}) {
			t.Errorf("ls after the session ended = %q, want [permanent]", got)
		}
		// Nothing after `exit` ran.
		wantFail(t, s.Sh(t, "cat", d+"/after-exit"), 1)
	})

	t.Run("one-shot", func(t *testing.T) {
		f := d + "/oneshot"
		obj := s.Sh(t, "-json", "create", f, "-ephemeral").JSON(t)
		if num(t, obj, "instance") == 0 {
			t.Errorf("create -ephemeral: %v", obj)
		}
		wantFail(t, s.Sh(t, "cat", f), 1)
		// The name is free again.
		wantOK(t, s.Sh(t, "create", f))
		wantOK(t, s.Sh(t, "rm", f))
	})

	t.Run("killed session", func(t *testing.T) {
		const ttl = 2 * time.Second
		f := d + "/killed"
		sh := s.StartSh(t, "-ttl", "2s", "-json")
		sh.Send(t, "create "+f+" -ephemeral")
		num(t, jsonLine(t, sh.NextLine(t, 15*time.Second)), "instance")
		st := s.Sh(t, "-json", "stat", f).JSON(t)
		if !boolean(t, st, "ephemeral") {
			t.Errorf("stat from another session: %v", st)
		}
		sh.Kill(t)
		killed := time.Now()
		// The master still counts the session alive (its lease runs for at
		// least TTL after the last KeepAlive it answered).
		wantOK(t, s.Sh(t, "cat", f))
		wait.For(t, 15*time.Second, "ephemeral file of the killed session deleted", wait.Every(50*time.Millisecond, func() bool {
			return s.Sh(t, "cat", f).Code == 1
		}))
		gone := time.Now()
		after := gone.Sub(killed)
		t.Logf("ephemeral file gone %v after its session's process was killed (TTL %v)", after.Round(time.Millisecond), ttl)
		if after < ttl/2 {
			t.Errorf("ephemeral file deleted %v after the kill, well before the TTL %v", after, ttl)
		}
		if slices.Contains(s.Sh(t, "ls", d).Lines(), "killed") {
			t.Errorf("ls still shows the deleted ephemeral file")
		}
		wantOK(t, s.Sh(t, "cat", d+"/permanent"))
	})
}
