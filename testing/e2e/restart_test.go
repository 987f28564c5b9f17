package e2e

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/chubby-dev/chubby/testing/proc"
	"github.com/chubby-dev/chubby/testing/wait"
)

// node is what a restart must keep of one node: its stat (every key
// chubbysh prints) and, for a file, its contents; for a directory, its
// children.
type node struct {
	stat     map[string]any
	contents string
	children []string
}

// scripter runs a chubbysh script: a *proc.Server or a whole *proc.Cell.
type scripter interface {
	ShStdin(t testing.TB, script string, args ...string) *proc.Result
}

// snapshot reads every path in one script session.
func snapshot(t *testing.T, s scripter, paths []string) map[string]node {
	t.Helper()
	var script strings.Builder
	for _, p := range paths {
		fmt.Fprintf(&script, "stat %s\n", p)
	}
	r := s.ShStdin(t, script.String(), "-json")
	wantOK(t, r)
	lines := r.Lines()
	if len(lines) != len(paths) {
		t.Fatalf("snapshot: %d lines for %d paths\n%s", len(lines), len(paths), r)
	}
	out := map[string]node{}
	script.Reset()
	var files, dirs []string
	for i, p := range paths {
		st := jsonLine(t, proc.Line{Text: lines[i]})
		out[p] = node{stat: st}
		if boolean(t, st, "is_dir") {
			dirs = append(dirs, p)
		} else {
			files = append(files, p)
		}
	}
	for _, f := range files {
		fmt.Fprintf(&script, "cat %s\n", f)
	}
	for _, d := range dirs {
		fmt.Fprintf(&script, "ls %s\n", d)
	}
	r = s.ShStdin(t, script.String(), "-json")
	wantOK(t, r)
	lines = r.Lines()
	if len(lines) != len(files)+len(dirs) {
		t.Fatalf("snapshot: %d lines for %d files and %d dirs\n%s", len(lines), len(files), len(dirs), r)
	}
	for i, f := range files {
		n := out[f]
		n.contents = str(t, jsonLine(t, proc.Line{Text: lines[i]}), "data")
		out[f] = n
	}
	for i, d := range dirs {
		n := out[d]
		for _, k := range jsonLine(t, proc.Line{Text: lines[len(files)+i]})["children"].([]any) {
			n.children = append(n.children, k.(string))
		}
		out[d] = n
	}
	return out
}

func compareSnapshots(t *testing.T, what string, before, after map[string]node) {
	t.Helper()
	for _, p := range slices.Sorted(maps.Keys(before)) {
		b, a := before[p], after[p]
		if !maps.EqualFunc(b.stat, a.stat, func(x, y any) bool { return fmt.Sprint(x) == fmt.Sprint(y) }) {
			t.Errorf("%s: stat %s changed:\nbefore %v\nafter  %v", what, p, b.stat, a.stat)
		}
		if b.contents != a.contents {
			t.Errorf("%s: contents of %s changed: %d bytes %.40q... → %d bytes %.40q...", what, p, len(b.contents), b.contents, len(a.contents), a.contents)
		}
		if !slices.Equal(b.children, a.children) {
			t.Errorf("%s: children of %s changed: %q → %q", what, p, b.children, a.children)
		}
	}
}

// TestRestartKeepsState: every node, its contents and its generation numbers
// survive a clean restart (SIGTERM) and a crash (SIGKILL right after the
// writes were acknowledged: they were fsynced before the reply).
func TestRestartKeepsState(t *testing.T) {
	t.Parallel()
	s := proc.StartServer(t, proc.Options{})
	d := p("r")
	big := strings.Repeat("0123456789abcdef", 100<<10/16) // 100 KiB
	var script strings.Builder
	for _, line := range []string{
		"mkdir " + d, "mkdir " + d + "/d1", "mkdir " + d + "/d1/d2", "mkdir " + d + "/empty-dir",
		"write " + d + "/a alpha",
		"write " + d + "/d1/b 'two words'",
		"write " + d + "/d1/d2/c 'ünïcødé ✓'",
		"create " + d + "/empty",
		"write " + d + "/many 1", "write " + d + "/many 2", "write " + d + "/many 3",
		"trylock " + d + "/lockfile", "unlock " + d + "/lockfile", "trylock " + d + "/lockfile",
		"write " + d + "/deleted x", "rm " + d + "/deleted",
	} {
		script.WriteString(line + "\n")
	}
	wantOK(t, s.ShStdin(t, script.String()))
	wantOK(t, s.Sh(t, "write", d+"/big", big))
	paths := []string{d, d + "/d1", d + "/d1/d2", d + "/empty-dir", d + "/a", d + "/d1/b", d + "/d1/d2/c", d + "/empty",
		d + "/many", d + "/lockfile", d + "/big"}
	before := snapshot(t, s, paths)
	if got := before[d+"/big"].contents; got != big {
		t.Fatalf("big file read back %d bytes, wrote %d", len(got), len(big))
	}
	if num(t, before[d+"/lockfile"].stat, "lock_gen") == 0 {
		t.Errorf("lockfile has lock_gen 0 after two acquisitions: %v", before[d+"/lockfile"].stat)
	}

	if code := s.Stop(t); code != 0 {
		t.Errorf("chubbyd exited %d on SIGTERM, want 0", code)
	}
	s.Start(t)
	compareSnapshots(t, "SIGTERM restart", before, snapshot(t, s, paths))
	wantFail(t, s.Sh(t, "cat", d+"/deleted"), 1)

	// Generations keep growing after a restart: nothing is reissued.
	var maxGen uint64
	for _, n := range before {
		for _, k := range []string{"instance", "content_gen", "lock_gen", "acl_gen"} {
			maxGen = max(maxGen, num(t, n.stat, k))
		}
	}
	obj := s.Sh(t, "-json", "write", d+"/new", "after restart").JSON(t)
	if g := num(t, obj, "content_gen"); g <= maxGen {
		t.Errorf("a write after the restart got content_gen %d, not above %d from before", g, maxGen)
	}
	seq := parseSeq(t, wantOK(t, s.Sh(t, "trylock", d+"/lockfile")))
	if seq.gen <= num(t, before[d+"/lockfile"].stat, "lock_gen") {
		t.Errorf("lock acquired after the restart has generation %d, not above %v", seq.gen, before[d+"/lockfile"].stat["lock_gen"])
	}

	// Crash: every acknowledged write is on disk.
	for i := range 5 {
		wantOK(t, s.Sh(t, "write", fmt.Sprintf("%s/crash%d", d, i), fmt.Sprintf("acked %d", i)))
	}
	wantOK(t, s.Sh(t, "mkdir", d+"/crash-dir"))
	paths = append(paths, d+"/new", d+"/crash-dir", d+"/crash0", d+"/crash1", d+"/crash2", d+"/crash3", d+"/crash4")
	before = snapshot(t, s, paths)
	s.Kill(t)
	s.Start(t)
	compareSnapshots(t, "SIGKILL restart", before, snapshot(t, s, paths))
}

// TestRestartLockSurvives: a lock holder's session rides out a quick restart
// of chubbyd (well within its TTL): the session reconnects and renews with
// the restarted server, and the lock stays held past the TTL.
func TestRestartLockSurvives(t *testing.T) {
	t.Parallel()
	const ttl = 10 * time.Second
	s := proc.StartServer(t, proc.Options{})
	l, l2 := p("survivor"), p("probe")
	holder := s.StartSh(t, "-ttl", "10s", "lock", l)
	seq := parseSeq(t, holder.NextLine(t, 15*time.Second).Text)
	// A second holder in script mode lets the test ask its session about
	// its lease.
	probe := s.StartSh(t, "-ttl", "10s", "-json")
	probe.Send(t, "lock "+l2)
	seq2 := parseSeq(t, str(t, jsonLine(t, probe.NextLine(t, 15*time.Second)), "sequencer"))

	stopped := time.Now()
	s.Restart(t)
	up := time.Now()
	t.Logf("chubbyd restarted in %v", up.Sub(stopped).Round(time.Millisecond))

	// The probe's session renews with the restarted server: its local lease
	// now starts from a KeepAlive sent after the old server was gone.
	wait.For(t, ttl, "probe session renewed after the restart", wait.Every(200*time.Millisecond, func() bool {
		asked := time.Now()
		probe.Send(t, "session")
		obj := jsonLine(t, probe.NextLine(t, ttl))
		if state := str(t, obj, "state"); state != "safe" {
			t.Logf("probe session state %s", state)
			return false
		}
		left := time.Duration(num(t, obj, "lease_left_ms")) * time.Millisecond
		// The lease runs from the send time of its last KeepAlive, less the
		// drift margin: sent >= asked + left - TTL.
		sentNoEarlierThan := asked.Add(left - ttl)
		return sentNoEarlierThan.After(stopped)
	}))
	renewed := time.Now()
	t.Logf("probe session renewed by the restarted server %v after it was up", renewed.Sub(up).Round(time.Millisecond))

	// Both locks stay held, checked from other processes, until well past
	// the TTL counted from the restart.
	for {
		wantOK(t, s.Sh(t, "checkseq", seq.text))
		wantOK(t, s.Sh(t, "checkseq", seq2.text))
		wantFail(t, s.Sh(t, "trylock", l), 1)
		if holder.Exited() {
			t.Fatalf("the lock holder exited: stderr %q", holder.Stderr())
		}
		if time.Since(up) > ttl+time.Second {
			break
		}
		time.Sleep(time.Second) // pacing: the checks repeat until the TTL since the restart has passed
	}
	probe.Send(t, "seq "+l2)
	if got := str(t, jsonLine(t, probe.NextLine(t, 10*time.Second)), "sequencer"); got != seq2.text {
		t.Errorf("probe's seq after the restart = %q, want %q", got, seq2.text)
	}

	holder.Signal(t, syscall.SIGTERM)
	if code := holder.Wait(t, 10*time.Second); code != 0 {
		t.Errorf("holder exited %d on SIGTERM", code)
	}
	wantCode(t, s.Sh(t, "checkseq", seq.text), 1)
	probe.CloseStdin()
	if code := probe.Wait(t, 10*time.Second); code != 0 {
		t.Errorf("probe exited %d at the end of its script", code)
	}
	wantCode(t, s.Sh(t, "checkseq", seq2.text), 1)
}
