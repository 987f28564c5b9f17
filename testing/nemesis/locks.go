package nemesis

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/chubby-dev/chubby/client"
	"github.com/chubby-dev/chubby/client/fence"
	"github.com/chubby-dev/chubby/testing/cell"
	"github.com/chubby-dev/chubby/testing/linear"
	"github.com/chubby-dev/chubby/wire"
)

// Store is an in-memory counter guarded by a fence.Guard, the downstream
// store of the fencing workload. Reads and writes both carry the caller's
// sequencer and both go through the guard: a fenced read is what keeps a
// superseded holder that read before the new holder from writing after it
// (with unfenced reads the old holder's write would be admitted as long as
// the new holder had not written yet, and one increment would be lost).
//
// With Unfenced set the store trusts every caller and ignores sequencers:
// it shows the hazard fencing removes (the negative control).
type Store struct {
	guard    *fence.Guard
	Unfenced bool

	mu       sync.Mutex
	counter  int
	ops      []StoreOp
	rejected int
}

// StoreOp is an operation the store admitted, in admission order.
type StoreOp struct {
	Hold  int    // the hold (Hold.ID) it was made under
	Gen   uint64 // its sequencer's generation
	Write bool
	Value int   // a read: the value returned; a write: the value written
	At    int64 // admission time (Recorder time)
}

// NewStore returns a store whose counter is 0.
func NewStore() *Store { return &Store{guard: fence.NewGuard()} }

// Get returns the counter if seq is admitted.
func (s *Store) Get(hold int, seq client.Sequencer, now int64) (int, error) {
	var v int
	err := s.admitAndDo(seq, func() error {
		s.mu.Lock()
		defer s.mu.Unlock()
		v = s.counter
		s.ops = append(s.ops, StoreOp{Hold: hold, Gen: seq.Gen, Value: v, At: now})
		return nil
	})
	s.noteRejected(err)
	return v, err
}

// Put sets the counter to v if seq is admitted.
func (s *Store) Put(hold int, seq client.Sequencer, v int, now int64) error {
	err := s.admitAndDo(seq, func() error {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.counter = v
		s.ops = append(s.ops, StoreOp{Hold: hold, Gen: seq.Gen, Write: true, Value: v, At: now})
		return nil
	})
	s.noteRejected(err)
	return err
}

func (s *Store) admitAndDo(seq client.Sequencer, do func() error) error {
	if s.Unfenced {
		return do()
	}
	return s.guard.AdmitAndDo(seq, do)
}

func (s *Store) noteRejected(err error) {
	if err != nil {
		s.mu.Lock()
		s.rejected++
		s.mu.Unlock()
	}
}

// Snapshot returns the admitted operations, the counter and how many
// operations were rejected.
func (s *Store) Snapshot() (ops []StoreOp, counter, rejected int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]StoreOp(nil), s.ops...), s.counter, s.rejected
}

// Hold is one successful Acquire of the workload's lock.
type Hold struct {
	ID        int
	Client    int
	Gen       uint64
	AcqCall   int64 // Recorder times
	AcqReturn int64
	RelCall   int64 // math.MaxInt64 if Release was never called
	RelOK     bool  // Release returned nil: the cell confirmed the hold then
	Paused    bool  // the nemesis paused the client during this hold
	Fenced    bool  // one of its store operations was refused
}

// CheckLocks checks the fencing workload's history and returns every
// violation found (none: the history is correct). It asserts:
//
//  1. Fencing order: the generations of the store's admitted operations
//     never decrease, in admission order.
//  2. One holder per generation: distinct holds have distinct generations,
//     and every admitted operation of a generation was made under one hold.
//     One exception, which is no second holder: a client whose Release
//     failed (timed out: the cell may still hold the lock for its session)
//     and whose next Acquire returned the same generation was granted the
//     hold its session still had (fs answers a repeated Acquire with the
//     existing hold); the two holds are one, as they are for checks 4
//     and 5.
//  3. No lost or duplicated increment: the admitted writes, in admission
//     order, wrote 1, 2, 3, ... k, each right after an admitted read of the
//     same hold that returned one less, and the final counter is k.
//  4. Generations follow grant order: if hold A's Acquire returned before
//     hold B's Acquire was called, B's generation is greater.
//  5. No two confirmed holders: if the cell confirmed hold A still held at
//     its Release (Release returned nil), no hold with a greater generation
//     returned from Acquire before A's Release was called. (B's grant made
//     the lock generation B's, which never goes back, so A's Release could
//     no longer have succeeded.)
func CheckLocks(holds []Hold, ops []StoreOp, final int) []string {
	var bad []string
	// same maps each hold to the first of the holds it continues (itself
	// when it continues none).
	same := map[int]int{}
	last := map[int]Hold{} // each client's latest hold, in AcqReturn order
	ordered := append([]Hold(nil), holds...)
	sort.SliceStable(ordered, func(i, j int) bool { return ordered[i].AcqReturn < ordered[j].AcqReturn })
	for _, h := range ordered {
		same[h.ID] = h.ID
		if p, ok := last[h.Client]; ok && p.Gen == h.Gen && !p.RelOK {
			same[h.ID] = same[p.ID]
		}
		last[h.Client] = h
	}
	byGen := map[uint64]Hold{}
	byID := map[int]Hold{}
	for _, h := range holds {
		if o, ok := byGen[h.Gen]; ok && same[o.ID] != same[h.ID] {
			bad = append(bad, fmt.Sprintf("holds %d (client %d) and %d (client %d) both got generation %d", o.ID, o.Client, h.ID, h.Client, h.Gen))
		}
		byGen[h.Gen] = h
		byID[h.ID] = h
	}
	var maxGen uint64
	genHold := map[uint64]int{}
	writes := 0
	for i, op := range ops {
		if op.Gen < maxGen {
			bad = append(bad, fmt.Sprintf("store op %d (hold %d) admitted generation %d after generation %d", i, op.Hold, op.Gen, maxGen))
		}
		maxGen = max(maxGen, op.Gen)
		if h, ok := genHold[op.Gen]; ok && same[h] != same[op.Hold] {
			bad = append(bad, fmt.Sprintf("store op %d: generation %d used by holds %d and %d", i, op.Gen, h, op.Hold))
		}
		genHold[op.Gen] = op.Hold
		if !op.Write {
			continue
		}
		writes++
		if op.Value != writes {
			bad = append(bad, fmt.Sprintf("admitted write %d (store op %d, hold %d, gen %d) wrote %d, want %d: an increment was lost or repeated", writes, i, op.Hold, op.Gen, op.Value, writes))
		}
		if i == 0 || ops[i-1].Write || ops[i-1].Hold != op.Hold || ops[i-1].Value != op.Value-1 {
			bad = append(bad, fmt.Sprintf("admitted write of %d (store op %d, hold %d) does not follow its own hold's read of %d", op.Value, i, op.Hold, op.Value-1))
		}
	}
	if final != writes {
		bad = append(bad, fmt.Sprintf("final counter %d, but %d increments were admitted", final, writes))
	}
	for _, a := range holds {
		for _, b := range holds {
			if same[a.ID] == same[b.ID] {
				continue
			}
			if a.AcqReturn < b.AcqCall && b.Gen <= a.Gen {
				bad = append(bad, fmt.Sprintf("hold %d (client %d) acquired generation %d after hold %d (client %d) had acquired generation %d", b.ID, b.Client, b.Gen, a.ID, a.Client, a.Gen))
			}
			if a.RelOK && b.Gen > a.Gen && b.AcqReturn <= a.RelCall {
				bad = append(bad, fmt.Sprintf("two holders: hold %d (client %d, gen %d) acquired at %.3fs while hold %d (client %d, gen %d) still held it until its successful release at %.3fs",
					b.ID, b.Client, b.Gen, float64(b.AcqReturn)/1e9, a.ID, a.Client, a.Gen, float64(a.RelCall)/1e9))
			}
		}
	}
	return bad
}

// LockStats counts the fencing workload's events.
type LockStats struct {
	Holds, Reads, Writes, Refused, AcquireFailed, Redials, Pauses, Checks atomic.Int64
}

func (s *LockStats) String() string {
	return fmt.Sprintf("%d holds, %d reads and %d writes admitted by the store, %d refused by its guard, %d acquires failed, %d sequencer checks answered, %d sessions re-dialed, %d pauses taken",
		s.Holds.Load(), s.Reads.Load(), s.Writes.Load(), s.Refused.Load(), s.AcquireFailed.Load(), s.Checks.Load(), s.Redials.Load(), s.Pauses.Load())
}

// LockConfig is the lock clients' session: short, so that a pause
// straddles it.
var LockConfig = client.Config{
	SessionTTL: time.Second,
	Grace:      time.Second,
	LockDelay:  200 * time.Millisecond,
}

// LockPauseMin is the shortest PauseHolder hold: past the lock client's
// TTL, grace and lock-delay, so the cell expires its session and another
// client can take the lock while it sleeps holding a counter value.
var LockPauseMin = LockConfig.SessionTTL + LockConfig.Grace + LockConfig.LockDelay + 500*time.Millisecond

// LockPause is the pause of the negative control (TestUnfencedPauseLosesIncrement).
var LockPause = LockConfig.SessionTTL + LockConfig.Grace + LockConfig.LockDelay + 1500*time.Millisecond

// LockWorker is one client of the fencing workload: it loops lock → fenced
// read of the counter → fenced write of counter+1 → release, through its
// own proxies to the servers (so the nemesis can silence it).
type LockWorker struct {
	ID      int
	Path    string
	Proxies []*cell.Proxy
	Log     hclog.Logger
	Store   *Store
	Rec     *linear.Recorder
	Stats   *LockStats
	NextID  *atomic.Int64 // hold ids, shared by the workers
	// Clock is the lease clock of the worker's sessions (nil: the real
	// clock). A pause freezes it; on resume it jumps by the pause.
	Clock *cell.SkewClock
	// LockRec, if set, records the worker's lock operations for
	// linear.LockModel: each Acquire, Release and CheckSequencer (porcupine
	// client ID), and each session's end (client LostClient).
	LockRec    *linear.Recorder
	LostClient int

	smu       sync.Mutex
	sid       uint64 // the current session (0: none)
	lastAlive int64  // LockRec time the current session was last known alive
	learned   int64  // LockRec time the cell said it expired; -1: not yet

	mu       sync.Mutex
	pauseReq bool
	frozen   bool // the pause was taken and froze Clock
	resume   chan struct{}

	holds []Hold
}

// Pause asks the worker to stop at its next point between reading the
// counter and writing it back (holding the lock), with its links to the
// cell silent and its lease clock frozen, until Resume — a client stopped
// as by SIGSTOP. If it does not get there before Resume (it cannot acquire
// the lock meanwhile), the pause does not happen.
func (w *LockWorker) Pause() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.pauseReq = true
	w.resume = make(chan struct{})
}

// Resume ends a pause (taken or not).
func (w *LockWorker) Resume() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.pauseReq {
		return
	}
	w.pauseReq = false
	if w.frozen {
		// Woken, the client first sees its clock jump by the pause.
		w.Clock.Unfreeze()
		w.frozen = false
	}
	for _, p := range w.Proxies {
		p.Heal()
	}
	close(w.resume)
}

// gate blocks while a pause is requested and reports whether it did.
func (w *LockWorker) gate() bool {
	w.mu.Lock()
	if !w.pauseReq {
		w.mu.Unlock()
		return false
	}
	for _, p := range w.Proxies {
		p.Blackhole()
	}
	if w.Clock != nil {
		w.Clock.Freeze()
		w.frozen = true
	}
	ch := w.resume
	w.mu.Unlock()
	w.Stats.Pauses.Add(1)
	<-ch
	return true
}

// Holds returns the worker's holds (after Run returned).
func (w *LockWorker) Holds() []Hold { return w.holds }

func (w *LockWorker) dial(stop <-chan struct{}) *client.Client {
	cfg := LockConfig
	cfg.Servers = cell.ProxyAddrs(w.Proxies)
	cfg.FixedServers = true
	cfg.Logger = w.Log
	if w.Clock != nil {
		cfg.Clock = w.Clock
	}
	for !stopped(stop) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		call := w.lockNow()
		cl, err := client.Dial(ctx, cfg)
		cancel()
		if err == nil {
			w.smu.Lock()
			// The session was created during Dial: alive after its call.
			w.sid, w.lastAlive, w.learned = cl.Session().ID, call, -1
			w.smu.Unlock()
			return cl
		}
		time.Sleep(50 * time.Millisecond)
	}
	return nil
}

// lockNow is the lock recorder's time (0 without one).
func (w *LockWorker) lockNow() int64 {
	if w.LockRec == nil {
		return 0
	}
	return w.LockRec.Now()
}

// observe follows the replies to the worker's client (Proxy.OnReply): a
// reply that succeeded for the current session shows it alive when its
// request was forwarded; the first reply saying the session expired is
// when the cell told the client so.
func (w *LockWorker) observe(req *wire.Request, sentAt time.Time, resp *wire.Response) {
	if w.LockRec == nil {
		return
	}
	err := resp.Err()
	now := w.LockRec.Now()
	w.smu.Lock()
	defer w.smu.Unlock()
	if w.sid == 0 || req.Session != w.sid {
		return
	}
	switch {
	case err == nil:
		if at := now - int64(time.Since(sentAt)); at > w.lastAlive {
			w.lastAlive = at
		}
	case errors.Is(err, client.ErrSessionExpired) && w.learned < 0:
		w.learned = now
	}
}

// alive notes that the current session answered an operation called at
// call.
func (w *LockWorker) alive(call int64) {
	w.smu.Lock()
	defer w.smu.Unlock()
	w.lastAlive = max(w.lastAlive, call)
}

// lost records the end of the current session for the lock model: it
// expired after it was last known alive, and either the cell said so
// (learned) or it may have expired any time since (the client gave up on
// its own, or the run ended with it).
func (w *LockWorker) lost() {
	w.smu.Lock()
	sid, lastAlive, learned := w.sid, w.lastAlive, w.learned
	w.sid = 0
	w.smu.Unlock()
	if w.LockRec != nil && sid != 0 {
		w.LockRec.AddLost(w.LostClient, int(sid), w.Path, lastAlive, learned)
	}
}

// session is the current session, as the lock model names it.
func (w *LockWorker) session() int {
	w.smu.Lock()
	defer w.smu.Unlock()
	return int(w.sid)
}

func (w *LockWorker) begin(in linear.LockInput) *linear.LockOp {
	if w.LockRec == nil {
		return nil
	}
	in.Lock, in.Session = w.Path, w.session()
	return w.LockRec.BeginLock(w.ID, in)
}

// end records op's outcome: OK, a definite failure, or unknown.
func end(op *linear.LockOp, out linear.LockOutput, err error, definite func(error) bool) {
	if op == nil {
		return
	}
	switch {
	case err == nil:
		op.End(out)
	case definite(err):
		op.Meta = err.Error()
		op.End(linear.LockOutput{})
	default:
		op.Meta = "outcome unknown: " + err.Error()
		op.EndUnknown()
	}
}

// acquireFailed: an Acquire that returns this error did nothing. Any other
// error leaves it unknown: a grant may race a timeout (the client then
// cancels, and the master releases what it granted), and a session that
// expired may have been granted the lock before.
func acquireFailed(err error) bool { return errors.Is(err, client.ErrClosed) }

// releaseFailed: a Release that returns this error released nothing (the
// handle holds nothing, or the master says the session does not hold the
// lock at that generation).
func releaseFailed(err error) bool {
	return errors.Is(err, client.ErrNotHeld) || errors.Is(err, client.ErrClosed)
}

// Run loops until stop is closed.
func (w *LockWorker) Run(rng *rand.Rand, stop <-chan struct{}) {
	for _, p := range w.Proxies {
		p.OnReply(w.observe)
	}
	var cl *client.Client
	var h *client.Handle
	defer func() {
		if cl != nil {
			w.lost() // the run ends with the session: it may end any time
			cl.Close()
		}
	}()
	for !stopped(stop) {
		if cl != nil && sessionOver(cl) {
			w.lost()
			cl.Close()
			cl, h = nil, nil
			w.Stats.Redials.Add(1)
		}
		if cl == nil {
			if cl = w.dial(stop); cl == nil {
				return
			}
		}
		if h == nil {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			var err error
			h, err = cl.Open(ctx, w.Path, client.Create())
			cancel()
			if err != nil {
				h = nil
				time.Sleep(20 * time.Millisecond)
				continue
			}
		}
		hold := Hold{ID: int(w.NextID.Add(1)), Client: w.ID, AcqCall: w.Rec.Now(), RelCall: math.MaxInt64}
		op := w.begin(linear.LockInput{Kind: linear.LockAcquire})
		call := w.lockNow()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err := h.Acquire(ctx, client.Exclusive)
		cancel()
		hold.AcqReturn = w.Rec.Now()
		if err != nil {
			end(op, linear.LockOutput{}, err, acquireFailed)
			w.Stats.AcquireFailed.Add(1)
			continue
		}
		// Sequencer fails only once Release ran; Acquire just set it.
		seq, err := h.Sequencer()
		if err != nil {
			panic(fmt.Sprintf("lock worker %d: no sequencer right after Acquire: %v", w.ID, err))
		}
		end(op, linear.LockOutput{OK: true, Gen: seq.Gen}, nil, acquireFailed)
		w.alive(call)
		hold.Gen = seq.Gen
		w.Stats.Holds.Add(1)
		w.incr(cl, &hold, seq, rng)
		hold.RelCall = w.Rec.Now()
		op = w.begin(linear.LockInput{Kind: linear.LockRelease, Gen: seq.Gen})
		call = w.lockNow()
		ctx, cancel = context.WithTimeout(context.Background(), 5*time.Second)
		err = h.Release(ctx)
		cancel()
		end(op, linear.LockOutput{OK: true}, err, releaseFailed)
		if err == nil {
			w.alive(call)
		}
		hold.RelOK = err == nil
		w.holds = append(w.holds, hold)
		time.Sleep(time.Duration(rng.Int64N(int64(5 * time.Millisecond))))
	}
}

// incr is the critical section: fenced read, now and then a check of the
// sequencer with the cell, think (maybe paused), fenced write of read+1.
func (w *LockWorker) incr(cl *client.Client, hold *Hold, seq client.Sequencer, rng *rand.Rand) {
	v, err := w.Store.Get(hold.ID, seq, w.Rec.Now())
	if err != nil {
		hold.Fenced = true
		w.Stats.Refused.Add(1)
		return
	}
	w.Stats.Reads.Add(1)
	if rng.IntN(4) == 0 {
		op := w.begin(linear.LockInput{Kind: linear.LockCheck, Gen: seq.Gen, Shared: seq.Mode == client.Shared})
		call := w.lockNow()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		valid, err := cl.CheckSequencer(ctx, seq)
		cancel()
		end(op, linear.LockOutput{OK: valid}, err, func(error) bool { return false })
		if err == nil {
			w.alive(call)
			w.Stats.Checks.Add(1)
		}
	}
	time.Sleep(time.Duration(rng.Int64N(int64(3 * time.Millisecond))))
	if w.gate() {
		hold.Paused = true
	}
	if err := w.Store.Put(hold.ID, seq, v+1, w.Rec.Now()); err != nil {
		if !errors.Is(err, fence.ErrStale) {
			panic(err) // the store refuses nothing else
		}
		hold.Fenced = true
		w.Stats.Refused.Add(1)
		return
	}
	w.Stats.Writes.Add(1)
}

func sessionOver(cl *client.Client) bool {
	select {
	case <-cl.Done():
		return true
	default:
		return false
	}
}

// AllHolds merges the workers' holds, by acquire return time.
func AllHolds(ws []*LockWorker) []Hold {
	var out []Hold
	for _, w := range ws {
		out = append(out, w.Holds()...)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].AcqReturn < out[j].AcqReturn })
	return out
}
