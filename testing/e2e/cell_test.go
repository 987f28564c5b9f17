package e2e

import (
	"context"
	"fmt"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/chubby-dev/chubby/client"
	"github.com/chubby-dev/chubby/testing/proc"
	"github.com/chubby-dev/chubby/testing/wait"
	"github.com/chubby-dev/chubby/wire"
)

// The replicated cell on real processes (issue 3, acceptance point 1): three
// chubbyd with -bootstrap-expect 3 on loopback, fsync on, driven through
// chubbysh and the Go client.
//
//	TestCellMasterKill     SIGKILL the master with locks held and a waiter blocked:
//	                       new master within seconds, no session lost, sequencers
//	                       valid, waiter granted on release, acked writes readable
//	TestCellMasterPause    SIGSTOP the master for 2x TTL: sessions kept, the old
//	                       master answers nothing stale (reads and writes sent to it
//	                       with its old epoch), one master
//	TestCellRestartAll     SIGTERM all three, start all three: nodes, locks and
//	                       sessions are still there
//	TestCellAddRemove      a fourth server joins as a voter, remove-server takes one
//	                       out for good; a write loop keeps succeeding throughout
//	TestCellFailoverTimes  CHUBBY_FAILOVER_RUNS=N: N kills, time to the first write

// failoverBound is the sanity bound on a failover: a new master elected, or
// writes resumed, within it after the master was killed or stopped.
const failoverBound = 5 * time.Second

// masterOf checks a `-json members` object: every member listed once, exactly
// one master; it returns the master's name and the members by name.
func masterOf(t *testing.T, obj map[string]any) (string, map[string]map[string]any) {
	t.Helper()
	list, ok := obj["members"].([]any)
	if !ok {
		t.Fatalf("members: no list in %v", obj)
	}
	byName := map[string]map[string]any{}
	var masters []string
	for _, e := range list {
		m, ok := e.(map[string]any)
		if !ok {
			t.Fatalf("members: entry %v is not an object", e)
		}
		for _, k := range []string{"name", "rpc_addr", "state", "voter", "master"} {
			if _, ok := m[k]; !ok {
				t.Errorf("members: entry %v has no %q", m, k)
			}
		}
		name := str(t, m, "name")
		if _, dup := byName[name]; dup {
			t.Errorf("members: %s listed twice: %v", name, obj)
		}
		byName[name] = m
		if boolean(t, m, "master") {
			masters = append(masters, name)
		}
	}
	if len(masters) != 1 {
		t.Fatalf("members: want exactly one master, got %q: %v", masters, obj)
	}
	return masters[0], byName
}

// members runs `chubbysh -json members` against the whole cell.
func members(t *testing.T, c *proc.Cell) (string, map[string]map[string]any) {
	t.Helper()
	r := c.Sh(t, "-json", "members")
	wantOK(t, r)
	return masterOf(t, r.JSON(t))
}

// scriptSession is a script-mode chubbysh kept open: one session whose
// commands the test sends one at a time.
type scriptSession struct {
	*proc.Shell
	id uint64
}

func startScript(t *testing.T, c *proc.Cell, ttl string) *scriptSession {
	t.Helper()
	sh := c.StartSh(t, "-ttl", ttl, "-json")
	s := &scriptSession{Shell: sh}
	s.id = num(t, s.do(t, "session"), "id")
	return s
}

// do sends one command and returns its JSON line.
func (s *scriptSession) do(t *testing.T, line string) map[string]any {
	t.Helper()
	s.Send(t, line)
	return jsonLine(t, s.NextLine(t, 20*time.Second))
}

// waitSafe polls the session until its state is safe and checks that it is
// still the same session.
func (s *scriptSession) waitSafe(t *testing.T, timeout time.Duration, what string) {
	t.Helper()
	var last map[string]any
	wait.For(t, timeout, what, wait.Every(50*time.Millisecond, func() bool {
		last = s.do(t, "session")
		return str(t, last, "state") == "safe"
	}))
	if id := num(t, last, "id"); id != s.id {
		t.Errorf("%s: session id %d, was %d", what, id, s.id)
	}
}

// end closes the script (the session ends, its locks are released) and
// checks that chubbysh exits 0.
func (s *scriptSession) end(t *testing.T) {
	t.Helper()
	s.CloseStdin()
	if code := s.Wait(t, 15*time.Second); code != 0 {
		t.Errorf("script session exited %d at the end of its script; stderr %q", code, s.Stderr())
	}
}

// ack is one acknowledged write: the file, what was written and the content
// generation the write returned.
type ack struct {
	path, data string
	gen        uint64
	// started and at are when the write was sent and when its reply came.
	started, at time.Time
}

// checkAcked reads every acknowledged write back through the whole cell in
// one script session: the contents and content generation are what the
// write returned (each file is written once, or acks holds its last write).
func checkAcked(t *testing.T, c *proc.Cell, what string, acks []ack) {
	t.Helper()
	if len(acks) == 0 {
		return
	}
	last := map[string]ack{}
	var paths []string
	for _, a := range acks {
		if _, ok := last[a.path]; !ok {
			paths = append(paths, a.path)
		}
		last[a.path] = a
	}
	var script strings.Builder
	for _, p := range paths {
		fmt.Fprintf(&script, "cat %s\nstat %s\n", p, p)
	}
	r := c.ShStdin(t, script.String(), "-json")
	wantOK(t, r)
	lines := r.Lines()
	if len(lines) != 2*len(paths) {
		t.Fatalf("%s: %d lines for %d files\n%s", what, len(lines), len(paths), r)
	}
	bad := 0
	for i, p := range paths {
		a := last[p]
		data := str(t, jsonLine(t, proc.Line{Text: lines[2*i]}), "data")
		gen := num(t, jsonLine(t, proc.Line{Text: lines[2*i+1]}), "content_gen")
		if data != a.data || gen != a.gen {
			bad++
			if bad <= 10 {
				t.Errorf("%s: %s reads %q at content_gen %d; the acknowledged write was %q at %d", what, p, data, gen, a.data, a.gen)
			}
		}
	}
	if bad > 0 {
		t.Errorf("%s: %d of %d acknowledged writes not readable as acknowledged", what, bad, len(paths))
	}
}

// writeLoop is a Go client writing distinct files one after another, each
// write bounded by a timeout; it records every acknowledged write and every
// failure.
type writeLoop struct {
	cli  *client.Client
	stop chan struct{}
	done chan struct{}

	mu    sync.Mutex
	acks  []ack
	fails []string
	added chan struct{} // closed and replaced on each ack
}

// startWriteLoop dials the cell and writes dir/w<i> until stopped, for at
// most max writes or maxTime.
func startWriteLoop(t *testing.T, servers []string, dir string, max int, maxTime time.Duration) *writeLoop {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cli, err := client.Dial(ctx, client.Config{Servers: servers, SessionTTL: 6 * time.Second})
	if err != nil {
		t.Fatalf("dial the cell: %v", err)
	}
	w := &writeLoop{cli: cli, stop: make(chan struct{}), done: make(chan struct{}), added: make(chan struct{})}
	t.Cleanup(func() {
		w.halt()
		cli.Close()
	})
	go w.run(dir, max, maxTime)
	return w
}

func (w *writeLoop) run(dir string, max int, maxTime time.Duration) {
	defer close(w.done)
	end := time.Now().Add(maxTime)
	for i := 0; i < max && time.Now().Before(end); i++ {
		select {
		case <-w.stop:
			return
		default:
		}
		path, data := fmt.Sprintf("%s/w%04d", dir, i), fmt.Sprintf("write %d", i)
		ctx, cancel := context.WithTimeout(context.Background(), 2*failoverBound)
		started := time.Now()
		st, err := w.cli.WriteFile(ctx, path, []byte(data))
		cancel()
		w.mu.Lock()
		if err != nil {
			w.fails = append(w.fails, fmt.Sprintf("%s: %v after %v", path, err, time.Since(started).Round(time.Millisecond)))
		} else {
			w.acks = append(w.acks, ack{path: path, data: data, gen: st.ContentGen, started: started, at: time.Now()})
			close(w.added)
			w.added = make(chan struct{})
		}
		w.mu.Unlock()
		if err != nil {
			time.Sleep(10 * time.Millisecond) // no busy loop on a failing call
		}
	}
}

// halt stops the loop and waits for its last write.
func (w *writeLoop) halt() {
	select {
	case <-w.stop:
	default:
		close(w.stop)
	}
	<-w.done
}

// waitAck waits for the first write sent after from to be acknowledged and
// returns it.
func (w *writeLoop) waitAck(t *testing.T, from time.Time, timeout time.Duration) ack {
	t.Helper()
	deadline := time.After(timeout)
	for {
		w.mu.Lock()
		for _, a := range w.acks {
			if !a.started.Before(from) {
				w.mu.Unlock()
				return a
			}
		}
		added := w.added
		w.mu.Unlock()
		select {
		case <-added:
		case <-w.done:
			t.Fatalf("write loop ended with no write sent after %v acknowledged; failures: %q", from.Format(time.StampMilli), w.failures())
		case <-deadline:
			t.Fatalf("no write sent after %v acknowledged within %v; failures: %q", from.Format(time.StampMilli), timeout, w.failures())
		}
	}
}

// waitCount waits until n writes have been acknowledged in all.
func (w *writeLoop) waitCount(t *testing.T, n int, timeout time.Duration) {
	t.Helper()
	deadline := time.After(timeout)
	for {
		w.mu.Lock()
		got, added := len(w.acks), w.added
		w.mu.Unlock()
		if got >= n {
			return
		}
		select {
		case <-added:
		case <-w.done:
			t.Fatalf("write loop ended with %d of %d writes acknowledged; failures: %q", got, n, w.failures())
		case <-deadline:
			t.Fatalf("%d of %d writes acknowledged within %v; failures: %q", got, n, timeout, w.failures())
		}
	}
}

func (w *writeLoop) acked() []ack {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]ack(nil), w.acks...)
}

// failures are the failed writes (the first and last few of them).
func (w *writeLoop) failures() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	if n := len(w.fails); n > 10 {
		return append(append(append([]string(nil), w.fails[:5]...), fmt.Sprintf("... %d more ...", n-10)), w.fails[n-5:]...)
	}
	return append([]string(nil), w.fails...)
}

func (w *writeLoop) failed() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.fails)
}

// acquireCalls is how many Acquire calls server s has received.
func acquireCalls(t *testing.T, s *proc.Server) float64 {
	t.Helper()
	return s.Metric(t, `chubby_rpc_calls_total{method="Acquire"}`)
}

// cellAcquireCalls is the number of Acquire calls the servers of c have
// received, together.
func cellAcquireCalls(t *testing.T, c *proc.Cell) float64 {
	t.Helper()
	n := 0.0
	for _, s := range c.Servers() {
		n += acquireCalls(t, s)
	}
	return n
}

// expiredSessions is how many sessions server s has expired as master.
func expiredSessions(t *testing.T, s *proc.Server) float64 {
	t.Helper()
	return s.Metric(t, "chubby_sessions_expired_total")
}

// expiredIDs are the sessions server s logged as expired.
func expiredIDs(t *testing.T, s *proc.Server) []uint64 {
	t.Helper()
	var ids []uint64
	for _, l := range strings.Split(s.Log(), "\n") {
		_, rest, ok := strings.Cut(l, "session expired: session=")
		if !ok {
			continue
		}
		id, err := strconv.ParseUint(strings.Fields(rest + " ")[0], 10, 64)
		if err != nil {
			t.Fatalf("%s log: %q: %v", s.NodeID, l, err)
		}
		ids = append(ids, id)
	}
	return ids
}

// holdChecks checks, once a second until until, that the background lock
// holders are alive and their sequencers valid: a session a master failed to
// keep would expire within its TTL of the master's start.
func holdChecks(t *testing.T, c *proc.Cell, until time.Time, holders []*proc.Shell, seqs []sequencer) {
	t.Helper()
	for {
		for _, h := range holders {
			if h.Exited() {
				t.Fatalf("lock holder %q exited: stderr %q", h.Args, h.Stderr())
			}
		}
		var script strings.Builder
		for _, s := range seqs {
			fmt.Fprintf(&script, "checkseq %s\n", s.text)
		}
		r := c.ShStdin(t, script.String())
		if r.Code != 0 || len(r.Lines()) != len(seqs) || slices.ContainsFunc(r.Lines(), func(l string) bool { return l != "valid" }) {
			t.Fatalf("a held lock's sequencer is not valid\n%s", r)
		}
		if time.Now().After(until) {
			return
		}
		time.Sleep(time.Second) // pacing: the checks repeat until the time the scenario is about has passed
	}
}

// TestCellMasterKill: SIGKILL the master of a three-server cell while a
// one-shot chubbysh holds a lock, a script session holds another, a third
// chubbysh waits for the first lock and a Go client writes in a loop. A new
// master is elected within seconds (every server agrees; members says so);
// no live client's session expires and the held locks' sequencers stay
// valid past the longest TTL counted from the new master's start; the
// waiter is granted the lock, with a greater sequencer, when the holder
// releases it; every write acknowledged before or around the kill is
// readable with its content generation. (Chubby §2.8–2.9: fail-over keeps
// sessions, locks and acknowledged state.)
func TestCellMasterKill(t *testing.T) {
	t.Parallel()
	c := proc.StartCell(t, 3, proc.CellOptions{})
	old := c.Master(t)
	d := p("kill")
	wantOK(t, c.Sh(t, "mkdir", d))

	// Writes acknowledged before the kill, one file rewritten.
	var before []ack
	for i := range 4 {
		path, data := fmt.Sprintf("%s/f%d", d, i), fmt.Sprintf("before the kill %d", i)
		before = append(before, ack{path: path, data: data, gen: num(t, c.Sh(t, "-json", "write", path, data).JSON(t), "content_gen")})
	}
	for i := range 3 {
		data := fmt.Sprintf("version %d", i)
		before = append(before, ack{path: d + "/rewritten", data: data, gen: num(t, c.Sh(t, "-json", "write", d+"/rewritten", data).JSON(t), "content_gen")})
	}

	// The holders, and a waiter blocked on the first lock.
	l1, l2 := d+"/lock1", d+"/lock2"
	holder := c.StartSh(t, "-ttl", "6s", "-json", "lock", l1)
	seq1 := parseSeq(t, str(t, jsonLine(t, holder.NextLine(t, 15*time.Second)), "sequencer"))
	script := startScript(t, c, "3s")
	seq2 := parseSeq(t, str(t, script.do(t, "lock "+l2), "sequencer"))
	// Counted on every server: under a loaded machine the cell may elect a
	// new master on its own before the planned kill (see below).
	calls := cellAcquireCalls(t, c)
	waiter := c.StartSh(t, "-ttl", "6s", "-json", "lock", l1)
	wait.For(t, 10*time.Second, "the waiter's Acquire reached the master", func() bool {
		return cellAcquireCalls(t, c) > calls
	})
	wantFail(t, c.Sh(t, "trylock", l1), 1) // held, with a waiter queued

	wantOK(t, c.Sh(t, "mkdir", d+"/loop"))
	loop := startWriteLoop(t, c.AddrList(), d+"/loop", 5000, time.Minute)
	loop.waitCount(t, 20, 20*time.Second)

	// The kill is of the master of the moment. If heartbeats were late
	// enough (the -race suite on two cores) for the cell to have elected
	// another master already, that one is killed and the test says so; what
	// is checked after is the same.
	unplanned := false
	if cur := c.Master(t); cur != old {
		t.Logf("the cell elected %s on its own before the planned kill of %s: killing %s", cur.NodeID, old.NodeID, cur.NodeID)
		old, unplanned = cur, true
	}
	killed := time.Now()
	old.Kill(t)
	nm := c.WaitMaster(t, 2*failoverBound, old)
	elected := time.Since(killed)
	first := loop.waitAck(t, killed, 2*failoverBound)
	t.Logf("SIGKILL of master %s: %s serving as master (its log) after %v, agreed by every server after %v; first write sent after the kill acknowledged after %v (%d writes acknowledged before the kill)",
		old.NodeID, nm.NodeID, servingSince(t, nm).Sub(killed).Round(time.Millisecond), elected.Round(time.Millisecond),
		first.at.Sub(killed).Round(time.Millisecond), countBefore(loop.acked(), killed))
	if elected > failoverBound {
		t.Errorf("new master after %v, want < %v", elected, failoverBound)
	}
	if took := first.at.Sub(killed); took > failoverBound {
		t.Errorf("writes resumed %v after the kill, want < %v", took, failoverBound)
	}
	// The new master measured the failover it served (chubby_failover_seconds:
	// from its last contact with the old leader to serving) and saw the
	// leadership change.
	// After an election of its own before the kill, the new master may have
	// served one failover before this one.
	if n, sum := nm.Metric(t, "chubby_failover_seconds_count"), nm.Metric(t, "chubby_failover_seconds_sum"); n < 1 || (n != 1 && !unplanned) || sum <= 0 || sum > n*failoverBound.Seconds() {
		t.Errorf("new master %s: chubby_failover_seconds count %v, sum %vs; want one failover of at most %v", nm.NodeID, n, sum, failoverBound)
	}
	if n := nm.Metric(t, "chubby_leader_changes_total"); n < 2 {
		t.Errorf("new master %s: chubby_leader_changes_total %v, want the first leader and the new one at least", nm.NodeID, n)
	}
	loop.waitCount(t, len(loop.acked())+20, 20*time.Second)
	loop.halt()

	// members (through the cell) names the new master; the killed server is
	// still a member: only remove-server takes a server out.
	master, byName := members(t, c)
	if master != nm.NodeID || master == old.NodeID {
		t.Errorf("members names master %s; the cell agreed on %s, the killed one was %s", master, nm.NodeID, old.NodeID)
	}
	if _, ok := byName[old.NodeID]; !ok || len(byName) != 3 {
		t.Errorf("members after the kill: %v, want n1..n3 (the killed %s included)", byName, old.NodeID)
	}

	// No live client lost its session: the holders are alive, the script
	// session is the same and safe, the sequencers valid — until past the
	// longest TTL (6s) counted from the new master's start.
	script.waitSafe(t, 10*time.Second, "script session safe after the failover")
	if waiter.Exited() {
		t.Fatalf("the waiter exited: %q", waiter.Stderr())
	}
	if ls := waiter.PeekLines(); len(ls) != 0 {
		t.Fatalf("the waiter was granted a held lock: %q", ls)
	}
	holdChecks(t, c, time.Now().Add(6*time.Second+500*time.Millisecond), []*proc.Shell{holder, waiter, script.Shell}, []sequencer{seq1, seq2})
	if got := str(t, script.do(t, "seq "+l2), "sequencer"); got != seq2.text {
		t.Errorf("script session's seq %s = %q, want %q", l2, got, seq2.text)
	}
	if n := expiredSessions(t, nm); n != 0 {
		t.Errorf("the new master expired %v sessions; every client is alive", n)
	}

	// The holder releases: the waiter (blocked across the failover) is granted.
	released := time.Now()
	holder.Signal(t, syscall.SIGTERM)
	if code := holder.Wait(t, 10*time.Second); code != 0 {
		t.Fatalf("holder exited %d on SIGTERM, want 0; stderr %q", code, holder.Stderr())
	}
	l := waiter.NextLine(t, 10*time.Second)
	seq3 := parseSeq(t, str(t, jsonLine(t, l), "sequencer"))
	t.Logf("waiter granted %v after the holder's SIGTERM", l.At.Sub(released).Round(time.Millisecond))
	if seq3.path != l1 || seq3.gen <= seq1.gen {
		t.Errorf("waiter got %q after %q was released; want a greater generation of %s", seq3.text, seq1.text, l1)
	}
	wantCode(t, c.Sh(t, "checkseq", seq1.text), 1)
	wantOK(t, c.Sh(t, "checkseq", seq3.text))
	waiter.Signal(t, syscall.SIGTERM)
	if code := waiter.Wait(t, 10*time.Second); code != 0 {
		t.Errorf("waiter exited %d on SIGTERM; stderr %q", code, waiter.Stderr())
	}
	script.end(t)
	wantCode(t, c.Sh(t, "checkseq", seq2.text), 1)

	// Gossip has noticed the killed server by now (it stays a member).
	wait.For(t, 15*time.Second, "members shows the killed "+old.NodeID+" not alive", wait.Every(200*time.Millisecond, func() bool {
		_, byName = members(t, c)
		return byName[old.NodeID] != nil && byName[old.NodeID]["state"] != "alive"
	}))
	t.Logf("%.1fs after the kill members shows %s %v", time.Since(killed).Seconds(), old.NodeID, byName[old.NodeID]["state"])

	// Every acknowledged write is readable.
	checkAcked(t, c, "writes before the kill", before)
	acks := loop.acked()
	t.Logf("write loop: %d writes acknowledged, %d failed: %q", len(acks), loop.failed(), loop.failures())
	checkAcked(t, c, "the write loop's acknowledged writes", acks)
}

func countBefore(acks []ack, t time.Time) int {
	n := 0
	for _, a := range acks {
		if a.at.Before(t) {
			n++
		}
	}
	return n
}

// staleCheck checks the reply of a read or write sent to the old master with
// its old epoch: it must have failed, or (a read) returned the latest value.
func staleCheck(t *testing.T, what string, resp *wire.Response, err error, latest string) {
	t.Helper()
	if err != nil {
		t.Logf("%s: %v", what, err)
		return
	}
	if rerr := resp.Err(); rerr != nil {
		t.Logf("%s: refused: %v", what, rerr)
		return
	}
	var rep wire.ContentsReply
	if err := wire.Unmarshal(resp.Body, &rep); err != nil {
		t.Errorf("%s: answered with a body that is not contents: %v", what, err)
		return
	}
	if latest == "" {
		t.Errorf("%s: the deposed master applied a write: %+v", what, rep.Stat)
		return
	}
	if string(rep.Data) != latest {
		t.Errorf("%s: the old master answered %q; the latest value (written through the new master) is %q", what, rep.Data, latest)
	}
}

// TestCellMasterPause: SIGSTOP the master for twice the clients' TTL (3 s),
// then SIGCONT. Meanwhile the others elect a master that takes a write.
// After SIGCONT: the live clients' sessions and locks are intact; the old
// master answers nothing stale — a read and a write it received with its
// old epoch while stopped, and reads sent to it alone after, either fail or
// return the value written through the new master; every server agrees on
// one master. (Chubby §2.9, DESIGN invariant 6: one master; reads only
// after the master confirmed it still is.)
func TestCellMasterPause(t *testing.T) {
	t.Parallel()
	const ttl = 3 * time.Second
	c := proc.StartCell(t, 3, proc.CellOptions{})
	old := c.Master(t)
	d := p("pause")
	f := d + "/f"
	wantOK(t, c.Sh(t, "mkdir", d))
	gen1 := num(t, c.Sh(t, "-json", "write", f, "v1").JSON(t), "content_gen")

	sA := startScript(t, c, ttl.String())
	seqA := parseSeq(t, str(t, sA.do(t, "lock "+d+"/a"), "sequencer"))
	sB := startScript(t, c, ttl.String())
	seqB := parseSeq(t, str(t, sB.do(t, "lock "+d+"/b -shared"), "sequencer"))

	// A raw session on the old master, for calls stamped with its epoch. It
	// never renews: the new master carries it over with a lease of its TTL
	// (writes wait that long for it, as it may cache anything) and expires it.
	rc, err := proc.DialRaw(old.RPCAddr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	if h, err := rc.Hello(5 * time.Second); err != nil || !h.IsMaster {
		t.Fatalf("Hello to the master %s: %+v, %v", old.NodeID, h, err)
	}
	if err := rc.CreateSession(ttl, 5*time.Second); err != nil {
		t.Fatalf("raw session on the master: %v", err)
	}
	var cr wire.ContentsReply
	if err := rc.Call(wire.MGetContents, wire.NodeArgs{Path: f}, &cr, 5*time.Second); err != nil || string(cr.Data) != "v1" {
		t.Fatalf("raw read on the master before the pause: %q, %v", cr.Data, err)
	}

	paused := time.Now()
	old.Pause(t)
	// Queued in the stopped master's socket: answered (or not) after SIGCONT.
	queuedRead, err := rc.Go(wire.MGetContents, wire.NodeArgs{Path: f})
	if err != nil {
		t.Fatal(err)
	}
	queuedWrite, err := rc.Go(wire.MSetContents, wire.SetContentsArgs{Path: f, Data: []byte("stale write"), Create: true})
	if err != nil {
		t.Fatal(err)
	}
	nm := c.WaitMaster(t, 2*failoverBound, old)
	t.Logf("master %s stopped; %s agreed master after %v", old.NodeID, nm.NodeID, time.Since(paused).Round(time.Millisecond))
	if took := time.Since(paused); took > failoverBound {
		t.Errorf("new master %v after the old one stopped, want < %v", took, failoverBound)
	}
	r := c.Sh(t, "-json", "write", f, "v2")
	gen2 := num(t, r.JSON(t), "content_gen")
	t.Logf("write through the new master took %v (chubbysh may try the stopped server first; the write waits for the raw session's lease)", r.Took.Round(time.Millisecond))
	if gen2 <= gen1 {
		t.Errorf("content_gen %d after %d", gen2, gen1)
	}

	time.Sleep(time.Until(paused.Add(2 * ttl))) // the scenario: stopped for 2x TTL
	// Where the live clients are at the end of the pause: renewed by the
	// new master (safe, new epoch), or still waiting in jeopardy.
	for _, s := range []*scriptSession{sA, sB} {
		obj := s.do(t, "session")
		t.Logf("session %d %.1fs into the pause: state %s, epoch %v, master %v (new master %s at %s)", s.id, time.Since(paused).Seconds(),
			obj["state"], obj["epoch"], obj["master"], nm.NodeID, nm.RPCAddr)
	}
	old.Resume(t)
	resumed := time.Now()

	resp, err := rc.Await(queuedRead, 10*time.Second)
	staleCheck(t, "read queued at the stopped master", resp, err, "v2")
	resp, err = rc.Await(queuedWrite, 10*time.Second)
	staleCheck(t, "write queued at the stopped master", resp, err, "")
	// Reads sent to the old master alone right after SIGCONT: raw with its
	// old epoch, and chubbysh -cell <old master> (which may follow its
	// Hello to the new master).
	for i := 0; i < 20 && time.Since(resumed) < 3*time.Second; i++ {
		id, err := rc.Go(wire.MGetContents, wire.NodeArgs{Path: f})
		if err == nil {
			resp, err = rc.Await(id, 5*time.Second)
		}
		staleCheck(t, fmt.Sprintf("raw read %d after SIGCONT", i), resp, err, "v2")
		r := proc.RunSh(t, old.RPCAddr, proc.ShOptions{}, "-timeout", "3s", "-json", "cat", f)
		if r.Code == 0 {
			if got := str(t, r.JSON(t), "data"); got != "v2" {
				t.Errorf("chubbysh -cell <old master> cat after SIGCONT read %q, want v2 (or a failure)", got)
			}
		} else {
			t.Logf("chubbysh -cell <old master> cat after SIGCONT: exit %d %q", r.Code, r.Stderr)
		}
	}

	// One master, on every server (the old one included).
	if m := c.WaitMaster(t, 2*failoverBound, nil); m != nm {
		t.Errorf("after SIGCONT the cell agrees on %s; the new master was %s", m.NodeID, nm.NodeID)
	}
	for _, v := range c.Views(t) {
		if v.Err != nil || v.MembersMaster() != nm.NodeID || v.Status != (v.Server == nm) {
			t.Errorf("%s: status master=%v, members name %q, err %v; want %s the one master", v.Server.NodeID, v.Status, v.MembersMaster(), v.Err, nm.NodeID)
		}
	}
	if master, _ := members(t, c); master != nm.NodeID {
		t.Errorf("members names %s, want %s", master, nm.NodeID)
	}
	if got := str(t, c.Sh(t, "-json", "cat", f).JSON(t), "data"); got != "v2" {
		t.Errorf("%s = %q after SIGCONT, want v2", f, got)
	}

	// No session of a live client was lost, and none is lost past the TTL.
	sA.waitSafe(t, 10*time.Second, "session A safe after SIGCONT")
	sB.waitSafe(t, 10*time.Second, "session B safe after SIGCONT")
	holdChecks(t, c, time.Now().Add(ttl+500*time.Millisecond), []*proc.Shell{sA.Shell, sB.Shell}, []sequencer{seqA, seqB})
	if got := str(t, sA.do(t, "seq "+d+"/a"), "sequencer"); got != seqA.text {
		t.Errorf("session A's seq = %q, want %q", got, seqA.text)
	}
	for _, s := range []*proc.Server{nm, old} {
		ids := expiredIDs(t, s)
		t.Logf("%s expired sessions %v (the raw session is %d)", s.NodeID, ids, rc.Session)
		for _, live := range []uint64{sA.id, sB.id} {
			if slices.Contains(ids, live) {
				t.Errorf("%s expired session %d of a live client", s.NodeID, live)
			}
		}
	}
	sA.end(t)
	sB.end(t)
	wantCode(t, c.Sh(t, "checkseq", seqA.text), 1)
}

// TestCellRestartAll: SIGTERM all three servers at once, start all three
// again on the same data directories with the same flags. Every node with
// its contents and generations, the held locks and the sessions come back:
// a one-shot lock holder and a script session (TTL 10 s) that kept running
// through the outage still hold their locks, the session keeps its id and
// its ephemeral file, and nothing expires past the TTL after the restart.
// (CONTRACT: restarting with the same -data-dir brings back state and
// membership; DESIGN invariant 7.)
func TestCellRestartAll(t *testing.T) {
	t.Parallel()
	const ttl = 10 * time.Second
	c := proc.StartCell(t, 3, proc.CellOptions{})
	d := p("restart")
	var script strings.Builder
	for _, line := range []string{
		"mkdir " + d, "mkdir " + d + "/sub", "mkdir " + d + "/sub/deeper",
		"write " + d + "/a alpha", "write " + d + "/sub/b 'two words'", "write " + d + "/sub/deeper/c 'ünïcødé ✓'",
		"create " + d + "/empty",
		"write " + d + "/many 1", "write " + d + "/many 2", "write " + d + "/many 3",
		"trylock " + d + "/lockfile", "unlock " + d + "/lockfile",
		"write " + d + "/gone x", "rm " + d + "/gone",
	} {
		script.WriteString(line + "\n")
	}
	wantOK(t, c.ShStdin(t, script.String()))

	holder := c.StartSh(t, "-ttl", ttl.String(), "-json", "lock", d+"/held")
	seqH := parseSeq(t, str(t, jsonLine(t, holder.NextLine(t, 15*time.Second)), "sequencer"))
	sess := startScript(t, c, ttl.String())
	seqS := parseSeq(t, str(t, sess.do(t, "lock "+d+"/held2"), "sequencer"))
	sess.do(t, "create "+d+"/eph -ephemeral")

	paths := []string{d, d + "/sub", d + "/sub/deeper", d + "/a", d + "/sub/b", d + "/sub/deeper/c", d + "/empty",
		d + "/many", d + "/lockfile", d + "/held", d + "/held2", d + "/eph"}
	before := snapshot(t, c, paths)
	if !boolean(t, before[d+"/eph"].stat, "ephemeral") {
		t.Fatalf("%s/eph is not ephemeral: %v", d, before[d+"/eph"].stat)
	}

	stopped := time.Now()
	for name, code := range c.StopAll(t) {
		if code != 0 {
			t.Errorf("%s exited %d on SIGTERM, want 0", name, code)
		}
	}
	down := time.Now()
	c.StartAll(t)
	up := time.Now()
	m := c.Master(t)
	t.Logf("all three stopped in %v; started again and agreed on master %s %v later (outage %v)",
		down.Sub(stopped).Round(time.Millisecond), m.NodeID, time.Since(down).Round(time.Millisecond), up.Sub(stopped).Round(time.Millisecond))
	if master, byName := members(t, c); len(byName) != 3 || master != m.NodeID {
		t.Errorf("members after the restart: master %s of %v, want n1..n3 with %s", master, byName, m.NodeID)
	}

	compareSnapshots(t, "restart of all three", before, snapshot(t, c, paths))
	wantFail(t, c.Sh(t, "cat", d+"/gone"), 1)

	// The clients ride out the outage: same session, locks held, nothing
	// expires past the TTL counted from the restart.
	sess.waitSafe(t, ttl, "script session safe after the restart")
	holdChecks(t, c, up.Add(ttl+time.Second), []*proc.Shell{holder, sess.Shell}, []sequencer{seqH, seqS})
	wantOK(t, c.Sh(t, "stat", d+"/eph"))
	if n := expiredSessions(t, m); n != 0 {
		t.Errorf("master %s expired %v sessions after the restart", m.NodeID, n)
	}

	holder.Signal(t, syscall.SIGTERM)
	if code := holder.Wait(t, 10*time.Second); code != 0 {
		t.Errorf("holder exited %d on SIGTERM; stderr %q", code, holder.Stderr())
	}
	wantCode(t, c.Sh(t, "checkseq", seqH.text), 1)
	sess.end(t)
	wantCode(t, c.Sh(t, "checkseq", seqS.text), 1)
	wantFail(t, c.Sh(t, "stat", d+"/eph"), 1) // the session ended cleanly
	seq := parseSeq(t, wantOK(t, c.Sh(t, "trylock", d+"/held")))
	if seq.gen <= seqH.gen {
		t.Errorf("lock taken after the restart has generation %d, not above %d", seq.gen, seqH.gen)
	}
}

// shWrite is one chubbysh write of the background loop.
type shWrite struct {
	path, data string
	ok         bool
	gen        uint64
	started    time.Time
	took       time.Duration
	err        string
}

// shLoop runs one-shot `chubbysh -json write` against the whole cell, one
// after another, until stopped, or max writes, or maxTime.
type shLoop struct {
	stop chan struct{}
	done chan struct{}

	mu    sync.Mutex
	ws    []shWrite
	added chan struct{} // closed and replaced on each write
}

func startShLoop(t *testing.T, c *proc.Cell, dir string, max int, maxTime time.Duration) *shLoop {
	l := &shLoop{stop: make(chan struct{}), done: make(chan struct{}), added: make(chan struct{})}
	t.Cleanup(l.halt)
	go l.run(c, dir, max, maxTime)
	return l
}

func (l *shLoop) run(c *proc.Cell, dir string, max int, maxTime time.Duration) {
	defer close(l.done)
	end := time.Now().Add(maxTime)
	for i := 0; i < max && time.Now().Before(end); i++ {
		select {
		case <-l.stop:
			return
		default:
		}
		w := shWrite{path: fmt.Sprintf("%s/s%04d", dir, i), data: fmt.Sprintf("sh write %d", i), started: time.Now()}
		r, err := c.TrySh(30*time.Second, "-json", "write", w.path, w.data)
		w.took = time.Since(w.started)
		switch {
		case err != nil:
			w.err = err.Error()
		case r.Code != 0:
			w.err = fmt.Sprintf("exit %d: %s", r.Code, strings.TrimSpace(r.Stderr))
		default:
			obj, err := proc.OneJSONObject(r.Stdout)
			if err != nil {
				w.err = err.Error()
				break
			}
			g, err := strconv.ParseUint(fmt.Sprint(obj["content_gen"]), 10, 64)
			if err != nil {
				w.err = fmt.Sprintf("content_gen %v", obj["content_gen"])
				break
			}
			w.ok, w.gen = true, g
		}
		l.mu.Lock()
		l.ws = append(l.ws, w)
		close(l.added)
		l.added = make(chan struct{})
		l.mu.Unlock()
	}
}

// halt stops the loop and waits for its last write.
func (l *shLoop) halt() {
	select {
	case <-l.stop:
	default:
		close(l.stop)
	}
	<-l.done
}

// waitAck waits until a write the loop started at or after from is
// acknowledged: the service works again after whatever happened at from.
func (l *shLoop) waitAck(t *testing.T, what string, from time.Time, timeout time.Duration) {
	t.Helper()
	deadline := time.After(timeout)
	for {
		l.mu.Lock()
		ok := slices.ContainsFunc(l.ws, func(w shWrite) bool { return w.ok && !w.started.Before(from) })
		added := l.added
		l.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-added:
		case <-l.done:
			t.Fatalf("chubbysh write loop ended without an acknowledged write after %s", what)
		case <-deadline:
			t.Fatalf("chubbysh write loop: no write started after %s acknowledged within %v", what, timeout)
		}
	}
}

func (l *shLoop) writes() []shWrite {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]shWrite(nil), l.ws...)
}

// TestCellAddRemove: a fourth server started with -join (default
// -bootstrap-expect) joins the running cell and members lists it as a
// voter; remove-server takes one of the original followers out and members
// stops listing it (on every server, and it is not added back while its
// process runs on). The new server's vote counts: the master is then killed
// and the remaining voters (the new one among them) elect another. A loop of
// chubbysh writes runs throughout: it has a write acknowledged after each
// step, no failure streak longer than a failover, and every acknowledged
// write is readable at the end.
func TestCellAddRemove(t *testing.T) {
	t.Parallel()
	c := proc.StartCell(t, 3, proc.CellOptions{})
	d := p("grow")
	wantOK(t, c.Sh(t, "mkdir", d))
	loop := startShLoop(t, c, d, 1000, 45*time.Second)
	loop.waitAck(t, "the start", time.Time{}, 20*time.Second)

	added := time.Now()
	n4 := c.AddServer(t)
	var byName map[string]map[string]any
	wait.For(t, 10*time.Second, "members lists n4 as an alive voter", wait.Every(50*time.Millisecond, func() bool {
		_, byName = members(t, c)
		m, ok := byName[n4.NodeID]
		return ok && m["voter"] == true && m["state"] == "alive"
	}))
	if got := byName[n4.NodeID]["rpc_addr"]; got != n4.RPCAddr || len(byName) != 4 {
		t.Errorf("members after adding n4: %v (want 4 servers, n4 at %s)", byName, n4.RPCAddr)
	}
	for _, v := range c.Views(t) {
		if !slices.ContainsFunc(v.Members, func(m wire.Member) bool { return m.Name == n4.NodeID && m.Voter }) {
			t.Errorf("%s does not list n4 as a voter: %+v (err %v)", v.Server.NodeID, v.Members, v.Err)
		}
	}
	loop.waitAck(t, "n4 was added", added, 20*time.Second)

	master := c.Master(t)
	var victim *proc.Server
	for _, s := range c.Servers() {
		if s != master && s != n4 {
			victim = s
			break
		}
	}
	removed := time.Now()
	r := c.Sh(t, "-json", "remove-server", victim.NodeID)
	if obj := r.JSON(t); r.Code != 0 || obj["ok"] != true {
		t.Fatalf("remove-server %s\n%s", victim.NodeID, r)
	}
	c.MarkRemoved(victim)
	wait.For(t, 10*time.Second, "members no longer lists "+victim.NodeID, wait.Every(50*time.Millisecond, func() bool {
		_, byName = members(t, c)
		_, listed := byName[victim.NodeID]
		return !listed && len(byName) == 3
	}))
	wantFail(t, c.Sh(t, "remove-server", "no-such-server"), 1)
	loop.waitAck(t, victim.NodeID+" was removed", removed, 20*time.Second)

	// The new voter counts: kill the master; the other two voters elect.
	killed := time.Now()
	master.Kill(t)
	nm := c.WaitMaster(t, 2*failoverBound, master)
	t.Logf("killed master %s; %s agreed master after %v", master.NodeID, nm.NodeID, time.Since(killed).Round(time.Millisecond))
	loop.waitAck(t, "the master was killed", killed, 20*time.Second)

	// The removed server, still running, is not added back.
	if !victim.Running(t) {
		t.Errorf("removed server %s exited", victim.NodeID)
	}
	for _, v := range c.Views(t) {
		if slices.ContainsFunc(v.Members, func(m wire.Member) bool { return m.Name == victim.NodeID }) {
			t.Errorf("%s still lists removed %s: %+v", v.Server.NodeID, victim.NodeID, v.Members)
		}
	}
	if _, byName = members(t, c); len(byName) != 3 || byName[victim.NodeID] != nil {
		t.Errorf("members at the end: %v, want 3 servers without %s", byName, victim.NodeID)
	}

	loop.halt()
	ws := loop.writes()
	var acks []ack
	var longest time.Duration
	var streakFrom time.Time
	var fails []string
	for _, w := range ws {
		if !w.ok {
			fails = append(fails, fmt.Sprintf("%s after %v: %s", w.path, w.took.Round(time.Millisecond), w.err))
			if streakFrom.IsZero() {
				streakFrom = w.started
			}
			continue
		}
		acks = append(acks, ack{path: w.path, data: w.data, gen: w.gen})
		// How long writes were not succeeding: from the start of the first
		// failed write of a streak (or of this write) to this success.
		from := w.started
		if !streakFrom.IsZero() {
			from = streakFrom
		}
		if gap := w.started.Add(w.took).Sub(from); gap > longest {
			longest = gap
		}
		streakFrom = time.Time{}
	}
	t.Logf("chubbysh write loop: %d writes, %d acknowledged, longest time to an acknowledgement %v; failures %q", len(ws), len(acks), longest.Round(time.Millisecond), fails)
	if !streakFrom.IsZero() {
		t.Errorf("the write loop ended failing: %q", fails)
	}
	if longest > failoverBound {
		t.Errorf("writes did not succeed for %v, want < %v", longest, failoverBound)
	}
	checkAcked(t, c, "the chubbysh loop's acknowledged writes", acks)

	if code := victim.Stop(t); code != 0 {
		t.Errorf("removed server %s exited %d on SIGTERM", victim.NodeID, code)
	}
}

// TestCellFailoverTimes measures the time from SIGKILL of the master to the
// first acknowledged write of a Go client session that was writing in a
// loop, and to an agreed new master, over CHUBBY_FAILOVER_RUNS kills (the
// killed server is started again between runs). Not part of the default run:
// TestCellMasterKill measures one failover.
func TestCellFailoverTimes(t *testing.T) {
	runs, _ := strconv.Atoi(os.Getenv("CHUBBY_FAILOVER_RUNS"))
	if runs <= 0 {
		t.Skip("set CHUBBY_FAILOVER_RUNS=N to measure N failovers")
	}
	c := proc.StartCell(t, 3, proc.CellOptions{LogLevel: "info"})
	d := p("timing")
	wantOK(t, c.Sh(t, "mkdir", d))
	var writes, elections, servings []time.Duration
	for run := range runs {
		old := c.Master(t)
		wantOK(t, c.Sh(t, "mkdir", fmt.Sprintf("%s/r%d", d, run)))
		loop := startWriteLoop(t, c.AddrList(), fmt.Sprintf("%s/r%d", d, run), 100000, time.Minute)
		loop.waitAck(t, time.Now(), 10*time.Second)
		loop.waitAck(t, time.Now(), 10*time.Second)
		killed := time.Now()
		old.Kill(t)
		nm := c.WaitMaster(t, 2*failoverBound, old)
		elected := time.Since(killed)
		first := loop.waitAck(t, killed, 2*failoverBound)
		loop.halt()
		took := first.at.Sub(killed)
		serving := servingSince(t, nm).Sub(killed)
		writes, elections, servings = append(writes, took), append(elections, elected), append(servings, serving)
		t.Logf("run %d: killed %s; %s serving as master (its log) after %v, agreed by every server after %v; first write acknowledged after %v",
			run+1, old.NodeID, nm.NodeID, serving.Round(time.Millisecond), elected.Round(time.Millisecond), took.Round(time.Millisecond))
		if took > failoverBound {
			t.Errorf("run %d: writes resumed after %v, want < %v", run+1, took, failoverBound)
		}
		checkAcked(t, c, fmt.Sprintf("run %d", run+1), loop.acked())
		old.Start(t) // back to three for the next run
	}
	t.Logf("SIGKILL → first acknowledged write over %d runs: median %v, all %v", runs, median(writes), writes)
	t.Logf("SIGKILL → new master serving (its log) over %d runs: median %v, all %v", runs, median(servings), servings)
	t.Logf("SIGKILL → every server agrees on the new master over %d runs: median %v, all %v", runs, median(elections), elections)
}

// servingSince is the time of server s's last "serving as master" log line.
func servingSince(t *testing.T, s *proc.Server) time.Time {
	t.Helper()
	lines := strings.Split(s.Log(), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if !strings.Contains(lines[i], "serving as master") {
			continue
		}
		ts, _, _ := strings.Cut(lines[i], " ")
		at, err := time.Parse("2006-01-02T15:04:05.000Z0700", ts)
		if err != nil {
			t.Fatalf("%s log: no time in %q: %v", s.NodeID, lines[i], err)
		}
		return at
	}
	t.Fatalf("%s never logged serving as master", s.NodeID)
	return time.Time{}
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	if len(s) == 0 {
		return 0
	}
	if len(s)%2 == 1 {
		return s[len(s)/2].Round(time.Millisecond)
	}
	return ((s[len(s)/2-1] + s[len(s)/2]) / 2).Round(time.Millisecond)
}
