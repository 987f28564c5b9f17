package procnemesis

import (
	"fmt"
	"math"
	"sort"

	"github.com/chubby-dev/chubby/testing/linear"
)

// History collects porcupine operations and the nemesis's notes from any
// goroutine (a linear.Recorder), with times in nanoseconds since base on
// MonoNow's clock, so the lock clients' events, stamped in their own
// processes, fit in.
type History struct {
	*linear.Recorder
	base int64
}

// NewHistory starts a history whose time zero is now.
func NewHistory() *History {
	base := MonoNow()
	return &History{Recorder: linear.NewRecorderClock(func() int64 { return MonoNow() - base }), base: base}
}

// At converts a MonoNow reading to the history's time.
func (h *History) At(mono int64) int64 { return mono - h.base }

// Hold is one successful Acquire of the fencing workload's lock by a
// worker, with its Release.
type Hold struct {
	Worker, ID int
	Session    uint64
	Gen        uint64
	AcqCall    int64 // History times
	AcqRet     int64
	RelCall    int64 // math.MaxInt64 if Release was never called
	RelOK      bool  // Release returned nil: the cell confirmed the hold then
}

func (h Hold) String() string {
	return fmt.Sprintf("hold %d/%d (session %d, gen %d)", h.Worker, h.ID, h.Session, h.Gen)
}

// HoldsFrom builds the holds from the workers' events, with times converted
// by at (History.At).
func HoldsFrom(events []Event, at func(int64) int64) []Hold {
	type key struct{ w, h int }
	byKey := map[key]*Hold{}
	var order []key
	for _, e := range events {
		k := key{e.Worker, e.Hold}
		switch e.Ev {
		case "acq":
			if e.OK {
				byKey[k] = &Hold{Worker: e.Worker, ID: e.Hold, Session: e.Session, Gen: e.Gen, AcqCall: at(e.Call), AcqRet: at(e.Ret), RelCall: math.MaxInt64}
				order = append(order, k)
			}
		case "rel":
			if h := byKey[k]; h != nil {
				h.RelCall, h.RelOK = at(e.Call), e.OK
			}
		}
	}
	out := make([]Hold, 0, len(order))
	for _, k := range order {
		out = append(out, *byKey[k])
	}
	return out
}

// CheckFencing checks the fencing workload's history — the holds, the
// store's admitted operations in admission order, and its final counter —
// and returns every violation found (none: the history is correct):
//
//  1. One holder per generation: holds that share a generation are
//     re-acquisitions by the session that held it (Acquire on a lock the
//     session holds returns it), never after a Release of that generation
//     succeeded.
//  2. No stale sequencer admitted: the generations of the admitted
//     operations never decrease, in admission order; and each admitted
//     operation carries the generation of a hold its worker was granted.
//  3. No lost or repeated increment: the admitted writes wrote 1, 2, ... k
//     in admission order, each right after an admitted read of its own hold
//     that returned one less, and the final counter is k.
//  4. Generations follow grant order: if hold A's Acquire returned before
//     hold B's Acquire was called, B's generation is not smaller (equal
//     only for a re-acquisition, see 1).
//  5. No two confirmed holders: if Release of hold A succeeded, no hold of
//     a greater generation returned from Acquire before A's Release was
//     called.
func CheckFencing(holds []Hold, ops []StoreOp, final int) []string {
	var bad []string
	type key struct{ w, h int }
	byKey := map[key]Hold{}
	byGen := map[uint64][]Hold{}
	for _, h := range holds {
		byKey[key{h.Worker, h.ID}] = h
		byGen[h.Gen] = append(byGen[h.Gen], h)
	}
	gens := make([]uint64, 0, len(byGen))
	for g := range byGen {
		gens = append(gens, g)
	}
	sort.Slice(gens, func(i, j int) bool { return gens[i] < gens[j] })
	for _, g := range gens {
		hs := byGen[g]
		sort.Slice(hs, func(i, j int) bool { return hs[i].AcqCall < hs[j].AcqCall })
		for i := 1; i < len(hs); i++ {
			switch {
			case hs[i].Session != hs[0].Session:
				bad = append(bad, fmt.Sprintf("one generation, two sessions: %s and %s", hs[0], hs[i]))
			case hs[i-1].RelOK:
				bad = append(bad, fmt.Sprintf("%s got generation %d again after %s released it", hs[i], g, hs[i-1]))
			}
		}
	}

	var maxGen uint64
	writes := 0
	for i, op := range ops {
		h, ok := byKey[key{op.Worker, op.Hold}]
		switch {
		case !ok:
			bad = append(bad, fmt.Sprintf("store op %d: admitted for hold %d/%d, which no successful Acquire started", i, op.Worker, op.Hold))
		case h.Gen != op.Gen:
			bad = append(bad, fmt.Sprintf("store op %d: %s carried generation %d", i, h, op.Gen))
		}
		if op.Gen < maxGen {
			bad = append(bad, fmt.Sprintf("store op %d (hold %d/%d): stale sequencer admitted: generation %d after generation %d", i, op.Worker, op.Hold, op.Gen, maxGen))
		}
		maxGen = max(maxGen, op.Gen)
		if !op.Write {
			continue
		}
		writes++
		if op.Value != writes {
			bad = append(bad, fmt.Sprintf("admitted write %d (store op %d, hold %d/%d, gen %d) wrote %d, want %d: an increment was lost or repeated", writes, i, op.Worker, op.Hold, op.Gen, op.Value, writes))
		}
		if i == 0 || ops[i-1].Write || ops[i-1].Worker != op.Worker || ops[i-1].Hold != op.Hold || ops[i-1].Value != op.Value-1 {
			bad = append(bad, fmt.Sprintf("admitted write of %d (store op %d, hold %d/%d) does not follow its own hold's read of %d", op.Value, i, op.Worker, op.Hold, op.Value-1))
		}
	}
	if final != writes {
		bad = append(bad, fmt.Sprintf("final counter %d, but %d increments were admitted", final, writes))
	}

	// 4 and 5 with the greatest generation granted before a time.
	grants := newGrantIndex(holds)
	for _, b := range holds {
		if a, ok := grants.maxBefore(b.AcqCall); ok && a.Gen > b.Gen {
			bad = append(bad, fmt.Sprintf("%s was granted after %s had been: generations went back", b, a))
		}
	}
	for _, a := range holds {
		if !a.RelOK {
			continue
		}
		if b, ok := grants.maxBefore(a.RelCall); ok && b.Gen > a.Gen {
			bad = append(bad, fmt.Sprintf("two holders: %s returned from Acquire at %.3fs while %s held the lock until its successful Release at %.3fs",
				b, float64(b.AcqRet)/1e9, a, float64(a.RelCall)/1e9))
		}
	}
	return bad
}

// grantIndex answers "which hold of the greatest generation had returned
// from Acquire before time t": holds sorted by the return of their Acquire,
// with a prefix maximum of their generations.
type grantIndex struct {
	byRet  []Hold
	prefix []int // index of the greatest generation among byRet[:i+1]
}

func newGrantIndex(holds []Hold) grantIndex {
	g := grantIndex{byRet: append([]Hold(nil), holds...)}
	sort.Slice(g.byRet, func(i, j int) bool { return g.byRet[i].AcqRet < g.byRet[j].AcqRet })
	g.prefix = make([]int, len(g.byRet))
	for i := range g.byRet {
		g.prefix[i] = i
		if i > 0 && g.byRet[g.prefix[i-1]].Gen >= g.byRet[i].Gen {
			g.prefix[i] = g.prefix[i-1]
		}
	}
	return g
}

func (g grantIndex) maxBefore(t int64) (Hold, bool) {
	n := sort.Search(len(g.byRet), func(i int) bool { return g.byRet[i].AcqRet >= t })
	if n == 0 {
		return Hold{}, false
	}
	return g.byRet[g.prefix[n-1]], true
}

// CellWrite is a worker's sequencer-fenced write to a file of the cell
// (WorkerConfig.Fenced), in History times.
type CellWrite struct {
	Worker, Hold int
	Gen          uint64
	Data         string
	Call, Ret    int64
	OK           bool // the cell acknowledged it
	BadSeq       bool // the cell refused it: the sequencer was not valid
}

// CellWritesFrom picks the fenced cell writes out of the workers' events.
func CellWritesFrom(events []Event, at func(int64) int64) []CellWrite {
	var out []CellWrite
	for _, e := range events {
		if e.Ev == "cwrite" {
			out = append(out, CellWrite{Worker: e.Worker, Hold: e.Hold, Gen: e.Gen, Data: e.Data, Call: at(e.Call), Ret: at(e.Ret), OK: e.OK, BadSeq: e.BadSeq})
		}
	}
	return out
}

// CheckCellFencing checks the cell's side of fencing (DESIGN invariant 2: a
// write carrying a sequencer commits only if the sequencer is valid then):
// no fenced write the cell acknowledged was called after a hold of a
// greater generation had returned from Acquire — that grant made the
// sequencer stale before the write could commit.
func CheckCellFencing(holds []Hold, writes []CellWrite) []string {
	var bad []string
	grants := newGrantIndex(holds)
	for _, w := range writes {
		if !w.OK {
			continue
		}
		if b, ok := grants.maxBefore(w.Call); ok && b.Gen > w.Gen {
			bad = append(bad, fmt.Sprintf("stale fenced write committed: worker %d hold %d wrote %q with generation %d at %.3fs, after %s returned from Acquire at %.3fs",
				w.Worker, w.Hold, w.Data, w.Gen, float64(w.Call)/1e9, b, float64(b.AcqRet)/1e9))
		}
	}
	return bad
}

// Durable is one acknowledged write of the durability workload.
type Durable struct {
	Path  string
	Value string
}

// CheckDurable returns a violation for every acknowledged write whose file
// is missing or holds another value at the end (found: path → contents of
// every file there is).
func CheckDurable(acked []Durable, found map[string]string) []string {
	var bad []string
	for _, d := range acked {
		v, ok := found[d.Path]
		switch {
		case !ok:
			bad = append(bad, fmt.Sprintf("acknowledged write of %s is lost: the file is missing", d.Path))
		case v != d.Value:
			bad = append(bad, fmt.Sprintf("acknowledged write of %q to %s: the file holds %q", d.Value, d.Path, v))
		}
	}
	return bad
}
