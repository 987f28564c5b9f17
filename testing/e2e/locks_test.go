package e2e

import (
	"errors"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/chubby-dev/chubby/testing/proc"
	"github.com/chubby-dev/chubby/testing/wait"
)

// TestLocks: trylock, a lock held by another chubbysh, script-mode
// lock/seq/unlock in one session, checkseq before and after release, shared
// locks.
func TestLocks(t *testing.T) {
	t.Parallel()
	s := proc.StartServer(t, proc.Options{})

	t.Run("trylock free", func(t *testing.T) {
		l := p("free")
		seq := parseSeq(t, wantOK(t, s.Sh(t, "trylock", l)))
		if seq.mode != "X" || seq.path != l {
			t.Errorf("trylock %s printed %q", l, seq.text)
		}
		// The one-shot session ended and released it; a later holder's
		// sequencer compares greater.
		obj := s.Sh(t, "-json", "trylock", l).JSON(t)
		seq2 := parseSeq(t, str(t, obj, "sequencer"))
		if seq2.gen <= seq.gen {
			t.Errorf("second acquisition %q is not newer than %q", seq2.text, seq.text)
		}
	})

	t.Run("held elsewhere", func(t *testing.T) {
		l := p("held")
		holder := s.StartSh(t, "lock", l)
		seq := parseSeq(t, holder.NextLine(t, 15*time.Second).Text)
		if seq.path != l || seq.mode != "X" {
			t.Fatalf("lock %s printed %q", l, seq.text)
		}
		wantFail(t, s.Sh(t, "trylock", l), 1)
		wantJSONFail(t, s.Sh(t, "-json", "trylock", l), 1)
		wantFail(t, s.Sh(t, "trylock", l, "-shared"), 1)

		r := s.Sh(t, "checkseq", seq.text)
		if wantOK(t, r) != "valid" {
			t.Errorf("checkseq of a held lock printed %q", r.Stdout)
		}
		if obj := s.Sh(t, "-json", "checkseq", seq.text).JSON(t); !boolean(t, obj, "valid") {
			t.Errorf("checkseq -json of a held lock: %v", obj)
		}
		// A sequencer of the same lock at another generation, or mode, is not.
		wantCode(t, s.Sh(t, "checkseq", strings.Replace(seq.text, "X:", "S:", 1)), 1)

		// SIGTERM: the holder releases and exits 0.
		holder.Signal(t, syscall.SIGTERM)
		if code := holder.Wait(t, 10*time.Second); code != 0 {
			t.Fatalf("lock holder exited %d on SIGTERM, want 0; stderr %q", code, holder.Stderr())
		}
		r = s.Sh(t, "checkseq", seq.text)
		wantCode(t, r, 1)
		if r.Out() != "invalid" {
			t.Errorf("checkseq of a released lock printed %q, want invalid", r.Stdout)
		}
		r = s.Sh(t, "-json", "checkseq", seq.text)
		wantCode(t, r, 1)
		if obj := r.JSON(t); boolean(t, obj, "valid") {
			t.Errorf("checkseq -json of a released lock: %v", obj)
		}
		next := parseSeq(t, wantOK(t, s.Sh(t, "trylock", l)))
		if next.gen <= seq.gen {
			t.Errorf("after release trylock got %q, not newer than %q", next.text, seq.text)
		}
		wantCode(t, s.Sh(t, "checkseq", "not-a-sequencer"), 1)
	})

	t.Run("script", func(t *testing.T) {
		l := p("script")
		r := s.ShStdin(t, "lock "+l+"\nseq "+l+"\nunlock "+l+"\n")
		wantOK(t, r)
		lines := r.Lines()
		if len(lines) != 2 || lines[0] != lines[1] {
			t.Fatalf("lock/seq/unlock printed %q, want the same sequencer twice\n%s", lines, r)
		}
		seq := parseSeq(t, lines[0])
		if seq.path != l {
			t.Errorf("sequencer %q names another lock", seq.text)
		}
		wantCode(t, s.Sh(t, "checkseq", seq.text), 1)

		r = s.ShStdin(t, "lock "+l+"\nseq "+l+"\nunlock "+l+"\n", "-json")
		wantOK(t, r)
		lines = r.Lines()
		if len(lines) != 3 {
			t.Fatalf("-json lock/seq/unlock printed %d lines, want 3\n%s", len(lines), r)
		}
		a, b := proc.Line{Text: lines[0]}, proc.Line{Text: lines[1]}
		s1, s2 := str(t, jsonLine(t, a), "sequencer"), str(t, jsonLine(t, b), "sequencer")
		if s1 != s2 || parseSeq(t, s1).gen <= seq.gen {
			t.Errorf("-json script sequencers %q, %q (earlier %q)", s1, s2, seq.text)
		}
		if lines[2] != `{"ok":true}` {
			t.Errorf("unlock -json printed %q", lines[2])
		}

		// The script stops at the first failing line, with its exit code.
		r = s.ShStdin(t, "trylock "+l+"\nunlock "+p("never-locked")+"\nwrite "+p("after-failure")+" x\n")
		wantCode(t, r, 1)
		wantErrLine(t, r)
		wantFail(t, s.Sh(t, "cat", p("after-failure")), 1)
		r = s.ShStdin(t, "trylock "+l+"\nnosuchcommand\nwrite "+p("after-failure")+" x\n")
		wantCode(t, r, 2)
		wantFail(t, s.Sh(t, "cat", p("after-failure")), 1)
		// A lock taken in the script is released when the script ends.
		wantOK(t, s.Sh(t, "trylock", l))
	})

	t.Run("shared", func(t *testing.T) {
		l := p("shared")
		holder := s.StartSh(t, "lock", l, "-shared")
		seq := parseSeq(t, holder.NextLine(t, 15*time.Second).Text)
		if seq.mode != "S" {
			t.Fatalf("lock -shared printed %q", seq.text)
		}
		other := parseSeq(t, wantOK(t, s.Sh(t, "trylock", l, "-shared")))
		if other.mode != "S" || other.gen != seq.gen {
			t.Errorf("a second shared holder got %q while %q holds", other.text, seq.text)
		}
		wantFail(t, s.Sh(t, "trylock", l), 1)
		wantOK(t, s.Sh(t, "checkseq", seq.text))
		holder.Signal(t, syscall.SIGINT)
		if code := holder.Wait(t, 10*time.Second); code != 0 {
			t.Fatalf("shared holder exited %d on SIGINT", code)
		}
		x := parseSeq(t, wantOK(t, s.Sh(t, "trylock", l)))
		if x.mode != "X" || x.gen <= seq.gen {
			t.Errorf("exclusive after shared: %q after %q", x.text, seq.text)
		}
	})
}

// TestLockDelayAfterHolderKilled is Chubby §2.4: a holder that dies without
// releasing (SIGKILL) keeps the lock until its session expires (TTL, as the
// master sees it), and then nobody gets it for the lock-delay the holder
// chose. The queued waiter is granted only after both; the dead holder's
// sequencer is then invalid and the new one is newer.
func TestLockDelayAfterHolderKilled(t *testing.T) {
	t.Parallel()
	const ttl, delay = 2 * time.Second, 3 * time.Second
	s := proc.StartServer(t, proc.Options{})
	l := p("kill")
	holder := s.StartSh(t, "-ttl", "2s", "lock", l, "-delay", "3s")
	old := parseSeq(t, holder.NextLine(t, 15*time.Second).Text)

	waiter := s.StartSh(t, "-json", "lock", l)
	// The waiter's session exists (its Acquire follows at once): two sessions.
	wait.For(t, 10*time.Second, "waiter session", func() bool {
		n, _ := s.Status(t)["sessions"].(float64)
		return n == 2
	})
	wantFail(t, s.Sh(t, "trylock", l), 1)

	holder.Kill(t)
	killed := time.Now()

	// Until the waiter is granted, nobody else gets the lock: trylock keeps
	// failing, at first because the dead session still holds it, then
	// because of the lock-delay.
	sawDelay := false
	granted := make(chan proc.Line, 1)
	go func() {
		l, err := waiterLine(waiter, 20*time.Second)
		if err == nil {
			granted <- l
		}
		close(granted)
	}()
	var grant proc.Line
poll:
	for {
		select {
		case g, ok := <-granted:
			if !ok {
				t.Fatalf("waiter printed no sequencer within 20s of the kill; stderr %q", waiter.Stderr())
			}
			grant = g
			break poll
		case <-time.After(200 * time.Millisecond):
		}
		r := s.Sh(t, "trylock", l)
		if r.Code == 0 {
			t.Fatalf("trylock got the lock %v after the holder was killed, before the waiter: %s", time.Since(killed), r)
		}
		wantFail(t, r, 1)
		if strings.Contains(r.Stderr, "lock-delay") {
			sawDelay = true
		}
	}
	after := grant.At.Sub(killed)
	t.Logf("waiter granted %v after the holder was killed (TTL %v + lock-delay %v)", after.Round(time.Millisecond), ttl, delay)
	// The master counts the TTL from the holder's last KeepAlive, sent a
	// renewal interval (at most TTL/3) after the one before, or a little
	// later when the holder process is slow to run (the whole suite under
	// -race: one such send came 16 ms late); TestKillToGrant checks the
	// bound against the KeepAlives the holder reports.
	if floor := ttl - ttl/3 + delay - 200*time.Millisecond; after < floor {
		t.Errorf("waiter granted %v after the kill: earlier than TTL %v after the holder's last KeepAlive + lock-delay %v allow (%v)", after, ttl, delay, floor)
	}
	if after > 15*time.Second {
		t.Errorf("waiter granted %v after the kill: far later than TTL %v + lock-delay %v", after, ttl, delay)
	}
	if !sawDelay {
		t.Errorf("no trylock between the session's expiry and the grant reported the lock-delay")
	}
	next := parseSeq(t, str(t, jsonLine(t, grant), "sequencer"))
	if next.path != old.path || next.gen <= old.gen {
		t.Errorf("new sequencer %q is not newer than the dead holder's %q", next.text, old.text)
	}
	r := s.Sh(t, "checkseq", old.text)
	wantCode(t, r, 1)
	if r.Out() != "invalid" {
		t.Errorf("checkseq of the dead holder's sequencer printed %q", r.Stdout)
	}
	wantOK(t, s.Sh(t, "checkseq", next.text))

	// The waiter holds until SIGTERM, then releases; it printed one object.
	waiter.Signal(t, syscall.SIGTERM)
	if code := waiter.Wait(t, 10*time.Second); code != 0 {
		t.Errorf("waiter exited %d on SIGTERM", code)
	}
	if lines := waiter.PeekLines(); len(lines) != 1 {
		t.Errorf("-json lock printed %d lines, want 1: %v", len(lines), lines)
	}
	wantCode(t, s.Sh(t, "checkseq", next.text), 1)
}

func waiterLine(sh *proc.Shell, timeout time.Duration) (proc.Line, error) {
	var lines []proc.Line
	wait.Until(timeout, func() bool {
		lines = sh.PeekLines()
		return len(lines) > 0 || sh.Exited()
	})
	if len(lines) == 0 {
		return proc.Line{}, errNoLine
	}
	return lines[0], nil
}

var errNoLine = errors.New("no stdout line")

// TestFencing: a write with -seq commits while that sequencer's lock is held;
// once the lock was released and taken by another session, the old
// sequencer's write fails and leaves the contents alone.
func TestFencing(t *testing.T) {
	t.Parallel()
	s := proc.StartServer(t, proc.Options{})
	l, f := p("fence-lock"), p("fenced")
	a := s.StartSh(t, "-json")
	a.Send(t, "lock "+l)
	sa := parseSeq(t, str(t, jsonLine(t, a.NextLine(t, 15*time.Second)), "sequencer"))

	wantOK(t, s.Sh(t, "write", f, "by-a", "-seq", sa.text))
	g := num(t, s.Sh(t, "-json", "stat", f).JSON(t), "content_gen")
	wantOK(t, s.Sh(t, "cas", f, itoa(g), "by-a-2", "-seq", sa.text))

	a.Send(t, "unlock "+l)
	if got := a.NextLine(t, 10*time.Second).Text; got != `{"ok":true}` {
		t.Fatalf("unlock printed %q", got)
	}
	b := s.StartSh(t, "-json")
	b.Send(t, "lock "+l)
	sb := parseSeq(t, str(t, jsonLine(t, b.NextLine(t, 15*time.Second)), "sequencer"))
	if sb.gen <= sa.gen {
		t.Fatalf("second holder's sequencer %q is not newer than %q", sb.text, sa.text)
	}

	wantFail(t, s.Sh(t, "write", f, "stale", "-seq", sa.text), 1)
	wantJSONFail(t, s.Sh(t, "-json", "write", f, "stale", "-seq", sa.text), 1)
	g = num(t, s.Sh(t, "-json", "stat", f).JSON(t), "content_gen")
	wantFail(t, s.Sh(t, "cas", f, itoa(g), "stale", "-seq", sa.text), 1)
	// From the stale holder's own session too.
	a.Send(t, "write "+f+" stale-from-a -seq "+sa.text)
	if obj := jsonLine(t, a.NextLine(t, 10*time.Second)); obj["error"] == nil {
		t.Errorf("stale write in the old holder's session: %v", obj)
	}
	if code := a.Wait(t, 10*time.Second); code != 1 {
		t.Errorf("script with a stale fenced write exited %d, want 1", code)
	}
	if got := wantOK(t, s.Sh(t, "cat", f)); got != "by-a-2" {
		t.Fatalf("after stale fenced writes contents = %q, want by-a-2", got)
	}
	// A fenced write creates a missing file only with a valid sequencer.
	wantFail(t, s.Sh(t, "write", p("fenced-new"), "x", "-seq", sa.text), 1)
	wantFail(t, s.Sh(t, "cat", p("fenced-new")), 1)

	wantOK(t, s.Sh(t, "write", f, "by-b", "-seq", sb.text))
	if got := wantOK(t, s.Sh(t, "cat", f)); got != "by-b" {
		t.Errorf("contents = %q, want by-b", got)
	}
	// Once b's session ends its sequencer fences nothing either.
	b.CloseStdin()
	if code := b.Wait(t, 10*time.Second); code != 0 {
		t.Fatalf("script b exited %d", code)
	}
	wantFail(t, s.Sh(t, "write", f, "late", "-seq", sb.text), 1)
	wantFail(t, s.Sh(t, "write", f, "x", "-seq", "not-a-sequencer"), 1)
	if got := wantOK(t, s.Sh(t, "cat", f)); got != "by-b" {
		t.Errorf("contents = %q, want by-b", got)
	}
}

// TestLockRunsCommand: `lock PATH -- CMD` runs CMD holding the lock with its
// sequencer in $CHUBBY_SEQUENCER, exits with CMD's code and releases.
func TestLockRunsCommand(t *testing.T) {
	t.Parallel()
	s := proc.StartServer(t, proc.Options{})
	l := p("cmd")
	seq := parseSeq(t, wantOK(t, s.Sh(t, "lock", l, "--", "sh", "-c", "echo $CHUBBY_SEQUENCER")))
	if seq.path != l || seq.mode != "X" {
		t.Errorf("CHUBBY_SEQUENCER = %q", seq.text)
	}
	wantCode(t, s.Sh(t, "checkseq", seq.text), 1) // released after CMD

	r := s.Sh(t, "lock", l, "--", "sh", "-c", "exit 7")
	wantCode(t, r, 7)
	wantOK(t, s.Sh(t, "trylock", l))

	// CMD holds the lock while it runs; a signal to chubbysh reaches CMD.
	bg := s.StartSh(t, "lock", l, "--", "sh", "-c", `echo "$CHUBBY_SEQUENCER"; exec sleep 60`)
	held := parseSeq(t, bg.NextLine(t, 15*time.Second).Text)
	if held.gen <= seq.gen {
		t.Errorf("sequencer %q not newer than %q", held.text, seq.text)
	}
	wantOK(t, s.Sh(t, "checkseq", held.text))
	wantFail(t, s.Sh(t, "trylock", l), 1)
	bg.Signal(t, syscall.SIGTERM)
	if code := bg.Wait(t, 10*time.Second); code != 128+int(syscall.SIGTERM) {
		t.Errorf("chubbysh exited %d after its CMD died of SIGTERM, want %d", code, 128+int(syscall.SIGTERM))
	}
	wantCode(t, s.Sh(t, "checkseq", held.text), 1)
	wantOK(t, s.Sh(t, "trylock", l))

	// A CMD that cannot start fails the command and releases the lock.
	r = s.Sh(t, "lock", l, "--", "/nonexistent/command")
	if r.Code == 0 {
		t.Errorf("lock -- /nonexistent/command exited 0")
	}
	wantOK(t, s.Sh(t, "trylock", l))
}

// TestLockLostKillsCommand: when the master stops answering (SIGSTOP), the
// holder's local lease runs out and chubbysh must stop CMD before the lock
// could move to anybody else (TTL + lock-delay after the last renewal),
// then exit 3.
func TestLockLostKillsCommand(t *testing.T) {
	t.Parallel()
	const ttl, delay = 2 * time.Second, 5 * time.Second
	s := proc.StartServer(t, proc.Options{})
	l := p("lost")
	sh := s.StartSh(t, "-ttl", "2s", "lock", l, "-delay", "5s", "--", "sleep", "60")
	var child int
	wait.For(t, 15*time.Second, "CMD started", func() bool {
		if kids := sh.Children(t); len(kids) == 1 {
			child = kids[0]
			return true
		}
		if sh.Exited() {
			t.Fatalf("chubbysh exited before running CMD: stderr %q", sh.Stderr())
		}
		return false
	})
	wantFail(t, s.Sh(t, "trylock", l), 1)
	// A plain one-shot holder (no CMD) in the same situation gives up too.
	plain := s.StartSh(t, "-ttl", "2s", "lock", l+"-plain", "-delay", "5s")
	parseSeq(t, plain.NextLine(t, 15*time.Second).Text)

	s.Pause(t)
	paused := time.Now()
	resumed := false
	defer func() {
		if !resumed {
			s.Resume(t)
		}
	}()
	wait.For(t, ttl+delay+5*time.Second, "CMD stopped", func() bool {
		return !proc.ProcessAlive(child)
	})
	gone := time.Now()
	took := gone.Sub(paused)
	t.Logf("CMD (pid %d) was stopped %v after the master was paused (TTL %v, lock-delay %v)", child, took.Round(time.Millisecond), ttl, delay)
	if took >= ttl+delay {
		t.Errorf("CMD still ran %v after the master stopped answering: past TTL %v + lock-delay %v", took, ttl, delay)
	}
	// The plain holder's local lease may have started a little later than
	// the CMD holder's: keep the master paused until it surely ran out too.
	if rest := ttl - time.Since(paused); rest > 0 {
		time.Sleep(rest) // the scenario: the master stays paused a whole TTL
	}
	s.Resume(t)
	resumed = true
	code := sh.Wait(t, 15*time.Second)
	if code != 3 {
		t.Errorf("chubbysh exited %d after losing the lock, want 3; stderr %q", code, sh.Stderr())
	}
	if !strings.Contains(sh.Stderr(), "chubbysh: ") {
		t.Errorf("no chubbysh error line on stderr: %q", sh.Stderr())
	}
	if code := plain.Wait(t, 15*time.Second); code != 3 {
		t.Errorf("one-shot lock holder exited %d after losing the lock, want 3; stderr %q", code, plain.Stderr())
	}
	if gave := plain.ExitedAt().Sub(paused); gave > 15*time.Second {
		t.Errorf("one-shot holder took %v to give the lock up", gave)
	}
	// The cell serves again.
	wantOK(t, s.Sh(t, "-json", "session"))
}

func itoa(u uint64) string { return strconv.FormatUint(u, 10) }
