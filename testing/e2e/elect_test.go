package e2e

// The election commands from outside (CONTRACT.md: elect, leader): real
// chubbyd and chubbysh processes.

import (
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/chubby-dev/chubby/testing/proc"
	"github.com/chubby-dev/chubby/testing/wait"
)

// leadLine is what each campaigner's CMD prints when it starts leading.
const leadCmd = `echo "lead $CHUBBY_LEADER_VALUE $CHUBBY_SEQUENCER"; exec sleep 60`

// leading reads a campaigner's "lead VALUE SEQ" line.
func leading(t *testing.T, l proc.Line, value string) sequencer {
	t.Helper()
	f := strings.Fields(l.Text)
	if len(f) != 3 || f[0] != "lead" || f[1] != value {
		t.Fatalf("campaigner printed %q, want \"lead %s SEQUENCER\"", l.Text, value)
	}
	return parseSeq(t, f[2])
}

// TestElectKillToNewLeader: two campaigners; the leader's CMD runs with
// $CHUBBY_LEADER_VALUE and $CHUBBY_SEQUENCER; `leader` names it. SIGKILL
// of the leading chubbysh kills its CMD at once, and the second campaigner
// acts (its CMD starts) within TTL + lock-delay + 100 ms of the kill, with
// a newer sequencer; the old one is invalid. `leader -watch` prints one
// line per change.
func TestElectKillToNewLeader(t *testing.T) {
	const ttl, delay = 2 * time.Second, time.Second
	s := proc.StartServer(t, proc.Options{})
	dir := p("primary")
	a := s.StartSh(t, "-ttl", "2s", "elect", dir, "A", "-delay", "1s", "--", "sh", "-c", leadCmd)
	seqA := leading(t, a.NextLine(t, 15*time.Second), "A")
	if seqA.path != dir || seqA.mode != "X" {
		t.Fatalf("leader's sequencer %q is not an exclusive lock on %s", seqA.text, dir)
	}
	b := s.StartSh(t, "-ttl", "2s", "elect", dir, "B", "-delay", "1s", "--", "sh", "-c", leadCmd)
	if got := wantOK(t, s.Sh(t, "leader", dir)); got != "A" {
		t.Fatalf("leader printed %q, want A", got)
	}
	obj := s.Sh(t, "-json", "leader", dir).JSON(t)
	if str(t, obj, "value") != "A" || str(t, obj, "sequencer") != seqA.text {
		t.Fatalf("leader -json = %v, want value A, sequencer %s", obj, seqA.text)
	}
	watch := s.StartSh(t, "leader", dir, "-watch")
	if l := watch.NextLine(t, 15*time.Second); l.Text != "A" {
		t.Fatalf("leader -watch printed %q first, want A", l.Text)
	}
	wait.For(t, 10*time.Second, "B's campaign queued", func() bool {
		n, _ := s.Status(t)["sessions"].(float64)
		return n >= 3
	})
	if lines := b.PeekLines(); len(lines) != 0 {
		t.Fatalf("B acted while A leads: %v", lines)
	}
	var childA int
	wait.For(t, 10*time.Second, "A's CMD", func() bool {
		kids := a.Children(t)
		if len(kids) == 1 {
			childA = kids[0]
		}
		return childA != 0
	})

	a.Kill(t)
	killed := time.Now()
	wait.For(t, 5*time.Second, "A's CMD killed with chubbysh", func() bool { return !proc.ProcessAlive(childA) })
	lb := b.NextLine(t, ttl+delay+10*time.Second)
	seqB := leading(t, lb, "B")
	took := lb.At.Sub(killed)
	t.Logf("new leader acting %v after the leader was SIGKILLed (TTL %v + lock-delay %v)", took.Round(time.Millisecond), ttl, delay)
	if took > ttl+delay+100*time.Millisecond {
		t.Errorf("new leader acted %v after the kill, past TTL %v + lock-delay %v + 100ms", took, ttl, delay)
	}
	if took < delay {
		t.Errorf("new leader acted %v after the kill, inside the lock-delay %v", took, delay)
	}
	if seqB.path != dir || seqB.gen <= seqA.gen {
		t.Fatalf("new leader's sequencer %q is not newer than %q", seqB.text, seqA.text)
	}
	wantCode(t, s.Sh(t, "checkseq", seqA.text), 1)
	wantOK(t, s.Sh(t, "checkseq", seqB.text))
	var seen []string
	wait.For(t, 10*time.Second, "leader -watch to print B", func() bool {
		seen = nil
		for _, l := range watch.PeekLines() {
			seen = append(seen, l.Text)
		}
		return len(seen) > 0 && seen[len(seen)-1] == "B"
	})
	if want := []string{"A", "(none)", "B"}; strings.Join(seen, ",") != strings.Join(want, ",") {
		t.Errorf("leader -watch printed %q, want %q", seen, want)
	}

	// SIGTERM goes to B's CMD; chubbysh resigns and exits with its code.
	b.Signal(t, syscall.SIGTERM)
	if code := b.Wait(t, 10*time.Second); code != 128+int(syscall.SIGTERM) {
		t.Errorf("elect exited %d after its CMD died of SIGTERM, want %d", code, 128+int(syscall.SIGTERM))
	}
	wantCode(t, s.Sh(t, "checkseq", seqB.text), 1)
	wantFail(t, s.Sh(t, "leader", dir), 1)
	watch.Signal(t, syscall.SIGINT)
	if code := watch.Wait(t, 10*time.Second); code != 0 {
		t.Errorf("leader -watch exited %d on SIGINT", code)
	}
	if lines := watch.PeekLines(); lines[len(lines)-1].Text != "(none)" {
		t.Errorf("leader -watch's last line %q after B resigned, want (none)", lines[len(lines)-1].Text)
	}
}

// TestElectExitsWithCommandCode: elect runs CMD while leading and exits
// with its code, resigning; usage errors exit 2.
func TestElectExitsWithCommandCode(t *testing.T) {
	t.Parallel()
	s := proc.StartServer(t, proc.Options{})
	dir := p("job")
	r := s.Sh(t, "elect", dir, "v1", "--", "sh", "-c", `echo "$CHUBBY_LEADER_VALUE $CHUBBY_SEQUENCER"; exit 7`)
	wantCode(t, r, 7)
	f := strings.Fields(r.Out())
	if len(f) != 2 || f[0] != "v1" {
		t.Fatalf("CMD printed %q, want \"v1 SEQUENCER\"", r.Out())
	}
	wantCode(t, s.Sh(t, "checkseq", parseSeq(t, f[1]).text), 1)
	wantFail(t, s.Sh(t, "leader", dir), 1)
	wantFail(t, s.Sh(t, "elect", dir, "v1"), 2)
	wantFail(t, s.Sh(t, "elect", dir, "--", "true"), 2)
	wantFail(t, s.Sh(t, "leader", "/nope"), 1)
}
