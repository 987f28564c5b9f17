package core

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/anishathalye/porcupine"
	"github.com/chubby-dev/chubby/client"
	"github.com/chubby-dev/chubby/testing/fencedstore"

	"github.com/chubby-dev/chubby/testing/linear"
)

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

// StoreOp is an operation the fenced store admitted on the counter.
type StoreOp struct {
	Worker, Hold int
	Gen          uint64
	Write        bool
	Value        int   // a read: the value returned; a write: the value written
	At           int64 // the store's clock at admission
}

// CounterKey is the fenced store's key of the fencing workload's counter.
const CounterKey = "counter"

// NewCounterStore returns an in-memory fenced store (testing/fencedstore)
// whose counter (CounterKey) is 0 and whose log is stamped by now;
// unfenced, it trusts every caller (the negative control). The process
// nemesis serves it over HTTP (Store.Serve).
func NewCounterStore(fenced bool, now func() int64) *fencedstore.Store {
	s := fencedstore.New(fenced, now)
	s.Set(CounterKey, "0")
	return s
}

// CounterSnapshot returns the store's admitted operations on the counter,
// the counter and how many operations the store's guard refused.
func CounterSnapshot(s *fencedstore.Store) (ops []StoreOp, counter, rejected int) {
	for _, op := range s.Log() {
		if op.Key != CounterKey {
			continue
		}
		v, _ := strconv.Atoi(op.Value)
		ops = append(ops, StoreOp{Worker: op.Worker, Hold: op.Hold, Gen: op.Gen, Write: op.Write, Value: v, At: op.At})
	}
	counter, _ = strconv.Atoi(s.Value(CounterKey))
	_, rejected = s.Counts()
	return ops, counter, rejected
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

// Event is an operation a lock worker finished, with its call and return
// times on the harness's clock: the in-process workers hand them to a
// Recorder, the process workers write them as JSON lines to stdout (on
// CLOCK_MONOTONIC, one clock for every process).
//
//	session  a session was created (Session; Call..Ret the Dial)
//	acq      Acquire of the lock: OK with Gen, or Err
//	read     fenced read of the counter from the store: OK with Value, or
//	         Refused (stale sequencer), or Err
//	check    CheckSequencer of the hold's sequencer: OK is its answer
//	         (valid) unless Err says it failed
//	write    fenced write of Value to the store: OK, Refused, or Err
//	cwrite   sequencer-fenced write of Data to the cell file Fenced: OK,
//	         or BadSeq (the cell found the sequencer invalid), or Err. One
//	         that failed because the session ended is tried once more
//	         through the next session with the same sequencer (Hold and
//	         Gen are the old hold's, Session the new one's)
//	rel      Release: OK, or Err
//	lost     the session ended without Close (expired): Call is the last
//	         time the worker knew it alive (the call time of its last
//	         successful call that needs a live session), Ret when it
//	         learned; OK if a server told it (a reply saying the session
//	         had expired: Ret then bounds the expiry), not if the client
//	         gave up on its own or the run ended with the session
//	pause    the worker was paused in the middle of the hold, between its
//	         read and its write (in-process workers; a process worker's
//	         pauses are SIGSTOPs the harness keeps itself)
//	exit     the worker stops (after its stdin closed and its session was
//	         closed)
//
// A call that failed because the client was closed has Closed set: it did
// nothing. An acq that failed because its context ended has Cancelled set: the
// client then asked the master to drop the request, which gives back the
// lock if the grant raced the cancel.
type Event struct {
	Ev      string `json:"ev"`
	Worker  int    `json:"w"`
	Hold    int    `json:"h,omitempty"`
	Session uint64 `json:"s,omitempty"`
	Gen     uint64 `json:"g,omitempty"`
	Call    int64  `json:"c"`
	Ret     int64  `json:"r"`
	OK      bool   `json:"ok,omitempty"`
	Value   int    `json:"v,omitempty"`
	Data    string `json:"d,omitempty"`
	Refused bool   `json:"refused,omitempty"`
	// Err is the error of a failed call; Expired, NotHeld, Cancelled,
	// BadSeq and Closed classify it.
	Err       string `json:"err,omitempty"`
	Expired   bool   `json:"expired,omitempty"`
	NotHeld   bool   `json:"not_held,omitempty"`
	Cancelled bool   `json:"cancelled,omitempty"`
	BadSeq    bool   `json:"bad_seq,omitempty"`
	Closed    bool   `json:"closed,omitempty"`
}

// ErrEvent fills an event's error fields.
func ErrEvent(e *Event, err error) {
	e.Err = err.Error()
	e.Expired = errors.Is(err, client.ErrSessionExpired)
	e.NotHeld = errors.Is(err, client.ErrNotHeld)
	e.Cancelled = errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled)
	e.BadSeq = errors.Is(err, client.ErrBadSequencer)
	e.Closed = errors.Is(err, client.ErrClosed)
}

// LockHistory turns the lock workers' events into a history for
// linear.LockModel on lock (one porcupine client per worker), with times
// converted by at (History.At):
//
//   - acq OK → Acquire OK at its generation; failed because the client was
//     closed → an Acquire that did nothing; failed otherwise → Acquire of
//     unknown outcome (the grant may have happened before the failure, and
//     a session that expired may have been granted the lock before), and
//     if its context ended, a Release of unknown outcome naming no
//     generation (the client's CancelAcquire gives back a grant that raced
//     it);
//   - check answered → Check valid or invalid (failed checks say nothing);
//   - rel OK → Release OK; ErrNotHeld from the cell, or the client closed
//     → a Release that changed nothing; any other failure → unknown;
//   - lost → the session's expiry (Lock "": every lock it touched), from
//     the call of its last successful call that needed it alive to when a
//     server said it had expired (OK); without that (the client's expiry
//     may be its own grace period running out) it may be linearized any
//     time after its call.
func LockHistory(events []Event, lock string, at func(int64) int64) []porcupine.Operation {
	var ops []porcupine.Operation
	for _, e := range events {
		s := int(e.Session)
		meta := fmt.Sprintf("worker %d hold %d", e.Worker, e.Hold)
		if e.Err != "" {
			meta += ": " + e.Err
		}
		add := func(in linear.LockInput, out linear.LockOutput) {
			op := linear.LockOperation(e.Worker, in, out, at(e.Call), at(e.Ret))
			op.Metadata = meta
			ops = append(ops, op)
		}
		switch e.Ev {
		case "acq":
			in := linear.LockInput{Kind: linear.LockAcquire, Lock: lock, Session: s}
			switch {
			case e.OK:
				add(in, linear.LockOutput{OK: true, Gen: e.Gen})
				continue
			case e.Closed:
				add(in, linear.LockOutput{})
				continue
			}
			add(in, linear.LockOutput{Unknown: true})
			if e.Cancelled {
				add(linear.LockInput{Kind: linear.LockRelease, Lock: lock, Session: s}, linear.LockOutput{Unknown: true})
			}
		case "check":
			if e.Err == "" {
				add(linear.LockInput{Kind: linear.LockCheck, Lock: lock, Session: s, Gen: e.Gen}, linear.LockOutput{OK: e.OK})
			}
		case "rel":
			in := linear.LockInput{Kind: linear.LockRelease, Lock: lock, Session: s, Gen: e.Gen}
			switch {
			case e.OK:
				add(in, linear.LockOutput{OK: true})
			case e.NotHeld || e.Closed:
				add(in, linear.LockOutput{})
			default:
				add(in, linear.LockOutput{Unknown: true})
			}
		case "lost":
			learned, how := int64(-1), "the client gave up on it"
			if e.OK {
				learned, how = at(e.Ret), "a server said so"
			}
			op := linear.LostOperation(e.Worker, s, "", at(e.Call), learned)
			op.Metadata = fmt.Sprintf("worker %d: session ended, learned at %.3fs (%s)", e.Worker, float64(at(e.Ret))/1e9, how)
			ops = append(ops, op)
		}
	}
	return ops
}

// EventLog collects lock workers' events from any goroutine, stamped on
// one clock (Now).
type EventLog struct {
	Now func() int64

	mu     sync.Mutex
	events []Event
}

// Add appends e.
func (l *EventLog) Add(e Event) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.events = append(l.events, e)
}

// Events are the events so far, in the order they were added.
func (l *EventLog) Events() []Event {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]Event(nil), l.events...)
}

// LockCounts summarises lock workers' events.
type LockCounts struct {
	Holds, Reads, Writes, Refused, AcquireFailed, Lost, Checks, Invalid int
	// PausedMid counts pause events (a worker stopped between its read and
	// its write), PausedRefused those whose write the store refused on
	// waking.
	PausedMid, PausedRefused int
	AcquireErrors            map[string]int // failed Acquires by error, numbers left out
}

// CountLocks counts the events.
func CountLocks(events []Event) LockCounts {
	c := LockCounts{AcquireErrors: map[string]int{}}
	type key struct{ w, h int }
	paused := map[key]bool{}
	for _, e := range events {
		switch {
		case e.Ev == "acq" && e.OK:
			c.Holds++
		case e.Ev == "acq":
			c.AcquireFailed++
			c.AcquireErrors[errClass(e.Err)]++
		case e.Ev == "lost":
			c.Lost++
		case (e.Ev == "read" || e.Ev == "write") && e.Refused:
			c.Refused++
			if e.Ev == "write" && paused[key{e.Worker, e.Hold}] {
				c.PausedRefused++
			}
		case e.Ev == "read" && e.OK:
			c.Reads++
		case e.Ev == "write" && e.OK:
			c.Writes++
		case e.Ev == "check" && e.Err == "":
			c.Checks++
			if !e.OK {
				c.Invalid++
			}
		case e.Ev == "pause":
			c.PausedMid++
			paused[key{e.Worker, e.Hold}] = true
		}
	}
	return c
}

func (c LockCounts) String() string {
	var why []string
	for w, n := range c.AcquireErrors {
		why = append(why, fmt.Sprintf("%d× %s", n, w))
	}
	sort.Strings(why)
	return fmt.Sprintf("%d holds, %d reads and %d writes admitted by the store, %d store calls refused, %d acquires failed (%s), %d sessions lost, %d sequencer checks (%d invalid)",
		c.Holds, c.Reads, c.Writes, c.Refused, c.AcquireFailed, strings.Join(why, "; "), c.Lost, c.Checks, c.Invalid)
}

// errClass is an error message without its numbers (session ids,
// generations, addresses), to count errors by kind.
func errClass(msg string) string {
	return strings.Map(func(r rune) rune {
		if r >= '0' && r <= '9' {
			return -1
		}
		return r
	}, msg)
}
