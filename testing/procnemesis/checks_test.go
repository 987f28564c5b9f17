package procnemesis

import (
	"math"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/chubby-dev/chubby/fs"
	"github.com/chubby-dev/chubby/testing/linear"
	"github.com/chubby-dev/chubby/testing/netproxy"
)

func hold(w, id int, session, gen uint64, acqCall, acqRet, rel int64, relOK bool) Hold {
	return Hold{Worker: w, ID: id, Session: session, Gen: gen, AcqCall: acqCall, AcqRet: acqRet, RelCall: rel, RelOK: relOK}
}

func rd(w, h int, gen uint64, v int) StoreOp { return StoreOp{Worker: w, Hold: h, Gen: gen, Value: v} }
func wr(w, h int, gen uint64, v int) StoreOp {
	return StoreOp{Worker: w, Hold: h, Gen: gen, Write: true, Value: v}
}

// TestCheckFencing: the checker accepts a correct history (with a
// re-acquisition after a failed release) and names each kind of violation.
func TestCheckFencing(t *testing.T) {
	good := []Hold{
		hold(0, 1, 100, 10, 0, 1, 2, true),
		hold(1, 1, 200, 12, 1, 3, 4, false), // release failed: the session kept it
		hold(1, 2, 200, 12, 5, 6, 7, true),  // and Acquire gave it back
		hold(2, 1, 300, 15, 2, 8, 9, false),
	}
	goodOps := []StoreOp{rd(0, 1, 10, 0), wr(0, 1, 10, 1), rd(1, 1, 12, 1), wr(1, 1, 12, 2), rd(1, 2, 12, 2), wr(1, 2, 12, 3), rd(2, 1, 15, 3), wr(2, 1, 15, 4)}
	if bad := CheckFencing(good, goodOps, 4); len(bad) != 0 {
		t.Fatalf("a correct history: %v", bad)
	}
	for _, tc := range []struct {
		name  string
		holds []Hold
		ops   []StoreOp
		final int
		want  string
	}{
		{"one generation, two sessions", []Hold{hold(0, 1, 1, 10, 0, 1, 2, false), hold(1, 1, 2, 10, 3, 4, 5, false)}, nil, 0, "two sessions"},
		{"generation reused after its release", []Hold{hold(0, 1, 1, 10, 0, 1, 2, true), hold(0, 2, 1, 10, 3, 4, 5, false)}, nil, 0, "again after"},
		{"stale sequencer admitted", good, []StoreOp{rd(1, 1, 12, 0), rd(0, 1, 10, 0)}, 0, "stale sequencer admitted"},
		{"operation of no hold", good, []StoreOp{rd(5, 1, 10, 0)}, 0, "no successful Acquire"},
		{"wrong generation for its hold", good, []StoreOp{rd(0, 1, 11, 0)}, 0, "carried generation 11"},
		{"lost increment", good, []StoreOp{rd(0, 1, 10, 0), rd(1, 1, 12, 0), wr(1, 1, 12, 1), wr(0, 1, 10, 1)}, 2, "does not follow"},
		{"repeated increment", good, []StoreOp{rd(0, 1, 10, 0), wr(0, 1, 10, 1), rd(1, 1, 12, 0), wr(1, 1, 12, 1)}, 1, "lost or repeated"},
		{"counter disagrees", good, []StoreOp{rd(0, 1, 10, 0), wr(0, 1, 10, 1)}, 2, "final counter 2"},
		{"generation went back", []Hold{hold(0, 1, 1, 12, 0, 1, 2, false), hold(1, 1, 2, 11, 3, 4, 5, false)}, nil, 0, "generations went back"},
		{"two confirmed holders", []Hold{hold(0, 1, 1, 10, 0, 1, 9, true), hold(1, 1, 2, 12, 0, 5, 20, true)}, nil, 0, "two holders"},
	} {
		bad := CheckFencing(tc.holds, tc.ops, tc.final)
		if !strings.Contains(strings.Join(bad, "\n"), tc.want) {
			t.Errorf("%s: violations %q, want one containing %q", tc.name, bad, tc.want)
		}
	}
	// A superseded holder whose release failed may overlap its successor.
	if bad := CheckFencing([]Hold{hold(0, 1, 1, 10, 0, 1, 9, false), hold(1, 1, 2, 12, 0, 5, 20, true)}, nil, 0); len(bad) != 0 {
		t.Errorf("an expired holder overlapping its successor: %v", bad)
	}
}

func TestHoldsFrom(t *testing.T) {
	evs := []Event{
		{Ev: "acq", Worker: 0, Hold: 1, Session: 7, Gen: 3, Call: 100, Ret: 110, OK: true},
		{Ev: "acq", Worker: 1, Hold: 1, Session: 8, Call: 105, Ret: 200, Err: "timeout"},
		{Ev: "read", Worker: 0, Hold: 1, Gen: 3, Call: 111, Ret: 112, OK: true},
		{Ev: "rel", Worker: 0, Hold: 1, Gen: 3, Call: 120, Ret: 130, OK: true},
		{Ev: "acq", Worker: 0, Hold: 2, Session: 7, Gen: 5, Call: 140, Ret: 150, OK: true},
	}
	got := HoldsFrom(evs, func(t int64) int64 { return t - 100 })
	want := []Hold{
		{Worker: 0, ID: 1, Session: 7, Gen: 3, AcqCall: 0, AcqRet: 10, RelCall: 20, RelOK: true},
		{Worker: 0, ID: 2, Session: 7, Gen: 5, AcqCall: 40, AcqRet: 50, RelCall: math.MaxInt64},
	}
	if len(got) != len(want) {
		t.Fatalf("holds %+v", got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("hold %d: %+v, want %+v", i, got[i], want[i])
		}
	}
}

func TestCheckDurable(t *testing.T) {
	acked := []Durable{{"/a", "1"}, {"/b", "2"}, {"/c", "3"}}
	bad := CheckDurable(acked, map[string]string{"/a": "1", "/b": "x", "/d": "unacked but there"})
	if len(bad) != 2 || !strings.Contains(bad[0], "/b") || !strings.Contains(bad[1], "/c") {
		t.Fatalf("violations %q", bad)
	}
}

// TestLockHistory: the workers' events become a LockModel history that
// porcupine accepts when the cell behaved, and rejects when a sequencer
// check saw a superseded generation valid.
func TestLockHistory(t *testing.T) {
	const lock = "/ls/local/counter-lock"
	id := func(x int64) int64 { return x }
	evs := []Event{
		{Ev: "acq", Worker: 0, Hold: 1, Session: 7, Gen: 3, Call: 0, Ret: 10, OK: true},
		{Ev: "acq", Worker: 1, Hold: 1, Session: 8, Call: 5, Ret: 60, Err: "context deadline exceeded", Cancelled: true},
		{Ev: "check", Worker: 0, Hold: 1, Session: 7, Gen: 3, Call: 11, Ret: 12, OK: true},
		{Ev: "rel", Worker: 0, Hold: 1, Session: 7, Gen: 3, Call: 20, Ret: 30, Err: "timeout"},
		{Ev: "lost", Worker: 0, Session: 7, Call: 0, Ret: 70},
		{Ev: "acq", Worker: 2, Hold: 1, Session: 9, Gen: 5, Call: 80, Ret: 90, OK: true},
		{Ev: "rel", Worker: 2, Hold: 1, Session: 9, Gen: 5, Call: 91, Ret: 95, Err: "not held", NotHeld: true},
	}
	h := LockHistory(evs, lock, id)
	kinds := map[linear.LockKind]int{}
	unknown := 0
	for _, op := range h {
		kind := op.Input.(linear.LockInput).Kind
		kinds[kind]++
		if kind != linear.LockLost && op.Output.(linear.LockOutput).Unknown {
			unknown++
			if op.Return != math.MaxInt64 {
				t.Errorf("an unknown outcome with a return time: %+v", op)
			}
		}
	}
	// The cancelled acquire adds an unknown release; the failed release is
	// unknown; not-held is a definite failure.
	if kinds[linear.LockAcquire] != 3 || kinds[linear.LockRelease] != 3 || kinds[linear.LockCheck] != 1 || kinds[linear.LockLost] != 1 || unknown != 3 {
		t.Fatalf("kinds %v, %d unknown: %+v", kinds, unknown, h)
	}
	if !porcupine.CheckOperations(linear.LockModel, h) {
		t.Fatalf("a correct lock history is not linearizable: %+v", h)
	}
	stale := append(h, LockHistory([]Event{{Ev: "check", Worker: 1, Hold: 2, Session: 8, Gen: 3, Call: 100, Ret: 101, OK: true}}, lock, id)...)
	if porcupine.CheckOperations(linear.LockModel, stale) {
		t.Fatalf("a superseded generation checked valid after its successor was granted passes")
	}
}

// TestStoreFences: the store admits a sequencer not older than the newest
// it has seen, refuses an older one with 409, and logs only what it
// admitted; unfenced, it admits everything.
func TestStoreFences(t *testing.T) {
	for _, unfenced := range []bool{false, true} {
		s, err := StartStore(!unfenced)
		if err != nil {
			t.Fatal(err)
		}
		w := &worker{cfg: WorkerConfig{Store: s.Addr()}, store: &http.Client{Timeout: 5 * time.Second}}
		seq := func(gen uint64) fs.Sequencer { return fs.Sequencer{Path: "/ls/local/l", Mode: fs.Exclusive, Gen: gen} }
		w.hold = 1
		if _, refused, err := w.storeCall(http.MethodPut, seq(5), 1); err != nil || refused {
			t.Fatalf("first write: %v %v", refused, err)
		}
		w.hold = 2
		v, refused, err := w.storeCall(http.MethodGet, seq(4), 0)
		if err != nil || refused != !unfenced || (unfenced && v != 1) {
			t.Fatalf("unfenced=%v: read with an older sequencer: %d %v %v", unfenced, v, refused, err)
		}
		ops, counter, rejected := s.Snapshot()
		wantOps, wantRejected := 1, 1
		if unfenced {
			wantOps, wantRejected = 2, 0
		}
		if len(ops) != wantOps || counter != 1 || rejected != wantRejected || ops[0] != (StoreOp{Worker: 0, Hold: 1, Gen: 5, Write: true, Value: 1, At: ops[0].At}) {
			t.Fatalf("unfenced=%v: ops %+v counter %d rejected %d", unfenced, ops, counter, rejected)
		}
		s.Close()
	}
}

// TestNetComposes: overlapping faults on one link combine (the most severe
// cut, the longest delay) and withdrawing one leaves the others.
func TestNetComposes(t *testing.T) {
	nt, err := NewNet(3)
	if err != nil {
		t.Fatal(err)
	}
	defer nt.Close()
	l := nt.Raft[0][1]
	state := func() (netproxy.Mode, time.Duration) { return l.State() }
	want := func(m netproxy.Mode, d time.Duration) {
		t.Helper()
		if gm, gd := state(); gm != m || gd != d {
			t.Fatalf("link %s: %v %v, want %v %v", l.Name(), gm, gd, m, d)
		}
	}
	stall := nt.Contribute(nt.RaftLinksOf(0), netproxy.Stall, 0)
	want(netproxy.Stall, 0)
	delay := nt.Contribute(nt.AllRaft(), netproxy.Pass, 30*time.Millisecond)
	want(netproxy.Stall, 30*time.Millisecond)
	refuse := nt.Contribute([]*netproxy.Link{l}, netproxy.Refuse, 10*time.Millisecond)
	want(netproxy.Refuse, 30*time.Millisecond)
	if m, _ := nt.Raft[2][0].State(); m != netproxy.Stall {
		t.Fatalf("another link of n1: %v", m)
	}
	if m, d := nt.Raft[1][2].State(); m != netproxy.Pass || d != 30*time.Millisecond {
		t.Fatalf("a link not of n1: %v %v", m, d)
	}
	nt.Withdraw(refuse)
	want(netproxy.Stall, 30*time.Millisecond)
	nt.Withdraw(stall)
	want(netproxy.Pass, 30*time.Millisecond)
	nt.Withdraw(delay)
	want(netproxy.Pass, 0)
	nt.Contribute(nt.AllRaft(), netproxy.Blackhole, 0)
	nt.HealAll()
	for _, l := range nt.AllRaft() {
		if m, d := l.State(); m != netproxy.Pass || d != 0 {
			t.Fatalf("after HealAll %s: %v %v", l.Name(), m, d)
		}
	}
}

// TestCheckCellFencing: a fenced write the cell acknowledged after a
// greater generation was granted is a violation; one acknowledged before,
// or refused, is not.
func TestCheckCellFencing(t *testing.T) {
	holds := []Hold{hold(0, 1, 1, 10, 0, 10, 50, false), hold(1, 1, 2, 12, 20, 30, 60, true)}
	ok := []CellWrite{
		{Worker: 0, Hold: 1, Gen: 10, Call: 25, Ret: 40, OK: true},     // called before gen 12 was granted
		{Worker: 0, Hold: 1, Gen: 10, Call: 45, Ret: 46, BadSeq: true}, // refused
		{Worker: 1, Hold: 1, Gen: 12, Call: 35, Ret: 36, OK: true},
	}
	if bad := CheckCellFencing(holds, ok); len(bad) != 0 {
		t.Fatalf("a correct history: %v", bad)
	}
	stale := append(ok, CellWrite{Worker: 0, Hold: 1, Gen: 10, Data: "x", Call: 31, Ret: 32, OK: true})
	if bad := CheckCellFencing(holds, stale); len(bad) != 1 || !strings.Contains(bad[0], "stale fenced write committed") {
		t.Fatalf("a stale fenced write committed: %v", bad)
	}
	evs := []Event{{Ev: "cwrite", Worker: 2, Hold: 3, Gen: 7, Data: "d", Call: 100, Ret: 110, OK: true}, {Ev: "write", Worker: 2, Hold: 3}}
	if got := CellWritesFrom(evs, func(x int64) int64 { return x - 100 }); len(got) != 1 || got[0] != (CellWrite{Worker: 2, Hold: 3, Gen: 7, Data: "d", Call: 0, Ret: 10, OK: true}) {
		t.Fatalf("CellWritesFrom: %+v", got)
	}
}
