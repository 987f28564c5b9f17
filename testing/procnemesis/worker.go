package procnemesis

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/chubby-dev/chubby/client"
	"github.com/chubby-dev/chubby/testing/fencedstore"
	"github.com/chubby-dev/chubby/testing/nemesis/core"
	"github.com/hashicorp/go-hclog"
)

// WorkerEnv names the environment variable that turns the test binary into
// a lock-client worker: its value is the worker's WorkerConfig as JSON.
// The package's TestMain checks it first (see RunWorkerIfAsked).
const WorkerEnv = "CHUBBY_PROCNEMESIS_WORKER"

// WorkerConfig configures one lock-client worker process.
type WorkerConfig struct {
	ID int `json:"id"`
	// Servers are the worker's own proxies, one per server: its only way
	// to the cell.
	Servers []string `json:"servers"`
	// Store is the fenced store's URL (testing/fencedstore).
	Store string `json:"store"`
	// Lock is the path of the lock file.
	Lock string `json:"lock"`
	Seed uint64 `json:"seed"`
	// Session parameters of the worker's client.
	TTL       time.Duration `json:"ttl"`
	Grace     time.Duration `json:"grace"`
	LockDelay time.Duration `json:"lock_delay"`
	// Think is the most the worker waits between reading the counter and
	// writing it back (the window a pause aims at).
	Think time.Duration `json:"think"`
	// Fenced, if set, is a file of the cell the worker writes in each hold
	// whose read was admitted, before its store write, with the hold's
	// sequencer (client.WithSequencer: the cell commits it only if the
	// sequencer is still valid then).
	Fenced string `json:"fenced,omitempty"`
}

// RunWorkerIfAsked runs a lock-client worker and exits the process if
// WorkerEnv is set; otherwise it returns. Call it first in TestMain.
func RunWorkerIfAsked() {
	v := os.Getenv(WorkerEnv)
	if v == "" {
		return
	}
	var cfg WorkerConfig
	if err := json.Unmarshal([]byte(v), &cfg); err != nil {
		fmt.Fprintf(os.Stderr, "worker: %s: %v\n", WorkerEnv, err)
		os.Exit(2)
	}
	os.Exit(runWorker(cfg, os.Stdin, os.Stdout))
}

// worker is the lock client: it loops lock → fenced read → (think, maybe
// CheckSequencer) → fenced write of read+1 → release, and reports each step.
type worker struct {
	cfg   WorkerConfig
	rng   *rand.Rand
	out   io.Writer
	outMu sync.Mutex
	store fencedstore.Client
	log   hclog.Logger
	stop  atomic.Bool

	cl        *client.Client
	h         *client.Handle
	lastAlive int64 // call time of the last successful call that needed the current session alive
	hold      int
	// zombie is a fenced cell write that failed because its session had
	// ended: the worker retries it once, through its next session, with
	// the old hold's sequencer — a holder that lost its lock and does not
	// know it. The cell must refuse it unless that sequencer is still
	// valid.
	zombie *zombieWrite
}

type zombieWrite struct {
	hold int
	seq  client.Sequencer
	data string
}

func runWorker(cfg WorkerConfig, stdin io.Reader, stdout io.Writer) int {
	w := &worker{cfg: cfg, rng: rand.New(rand.NewPCG(cfg.Seed, uint64(cfg.ID))), out: stdout,
		store: fencedstore.Client{URL: cfg.Store, HTTP: &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 2}}},
		log:   hclog.New(&hclog.LoggerOptions{Name: fmt.Sprintf("lockworker%d", cfg.ID), Level: hclog.Warn, Output: os.Stderr})}
	stopped := make(chan struct{})
	go func() {
		io.Copy(io.Discard, stdin) // the test closes stdin to stop the worker
		w.stop.Store(true)
		close(stopped)
	}()
	for !w.stop.Load() {
		w.iterate(stopped)
	}
	if w.cl != nil {
		w.cl.Close()
	}
	now := MonoNow()
	w.emit(core.Event{Ev: "exit", Call: now, Ret: now})
	return 0
}

func (w *worker) emit(e core.Event) {
	e.Worker = w.cfg.ID
	b, err := json.Marshal(e)
	if err != nil {
		panic(err)
	}
	w.outMu.Lock()
	defer w.outMu.Unlock()
	if _, err := w.out.Write(append(b, '\n')); err != nil {
		os.Exit(3) // the test is gone
	}
}

// session makes sure the worker has a live session and a handle on the
// lock; false if it has none now (it retries on the next iteration).
func (w *worker) session(stopped <-chan struct{}) bool {
	if w.cl != nil {
		select {
		case <-w.cl.Done():
			now := MonoNow()
			w.emit(core.Event{Ev: "lost", Session: w.cl.Session().ID, Call: w.lastAlive, Ret: now})
			w.cl.Close()
			w.cl, w.h = nil, nil
		default:
		}
	}
	if w.cl == nil {
		cfg := client.Config{Servers: w.cfg.Servers, FixedServers: true, SessionTTL: w.cfg.TTL, Grace: w.cfg.Grace,
			LockDelay: w.cfg.LockDelay, Logger: w.log}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		go func() {
			select {
			case <-stopped:
				cancel()
			case <-ctx.Done():
			}
		}()
		call := MonoNow()
		cl, err := client.Dial(ctx, cfg)
		cancel()
		if err != nil {
			return false
		}
		w.cl, w.lastAlive = cl, call
		w.emit(core.Event{Ev: "session", Session: cl.Session().ID, Call: call, Ret: MonoNow(), OK: true})
	}
	if w.h == nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		call := MonoNow()
		h, err := w.cl.Open(ctx, w.cfg.Lock, client.Create())
		cancel()
		if err != nil {
			return false
		}
		w.h, w.lastAlive = h, call
	}
	return true
}

func (w *worker) iterate(stopped <-chan struct{}) {
	if !w.session(stopped) {
		time.Sleep(50 * time.Millisecond)
		return
	}
	sid := w.cl.Session().ID
	if z := w.zombie; z != nil {
		w.zombie = nil
		hold := w.hold
		w.hold = z.hold
		w.cellWrite(z.seq, sid, z.data, false)
		w.hold = hold
	}
	w.hold++
	acq := core.Event{Ev: "acq", Hold: w.hold, Session: sid, Call: MonoNow()}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	err := w.h.Acquire(ctx, client.Exclusive)
	cancel()
	acq.Ret = MonoNow()
	if err != nil {
		core.ErrEvent(&acq, err)
		w.emit(acq)
		// Not a spin: an Acquire whose cancel did not reach the master
		// leaves its request queued, and the next one is refused at once
		// ("already waiting") until the queued one is granted.
		time.Sleep(20 * time.Millisecond)
		return
	}
	seq, err := w.h.Sequencer()
	if err != nil {
		panic(fmt.Sprintf("worker %d: no sequencer right after Acquire: %v", w.cfg.ID, err))
	}
	acq.OK, acq.Gen, w.lastAlive = true, seq.Gen, acq.Call
	w.emit(acq)

	w.critical(seq, sid)

	rel := core.Event{Ev: "rel", Hold: w.hold, Session: sid, Gen: seq.Gen, Call: MonoNow()}
	ctx, cancel = context.WithTimeout(context.Background(), 5*time.Second)
	err = w.h.Release(ctx)
	cancel()
	rel.Ret = MonoNow()
	if err != nil {
		core.ErrEvent(&rel, err)
	} else {
		rel.OK, w.lastAlive = true, rel.Call
	}
	w.emit(rel)
	time.Sleep(time.Duration(w.rng.Int64N(int64(5 * time.Millisecond))))
}

// critical is the hold's work: fenced read, think, (maybe CheckSequencer,)
// fenced cell write, fenced store write of read+1.
func (w *worker) critical(seq client.Sequencer, sid uint64) {
	rd := core.Event{Ev: "read", Hold: w.hold, Session: sid, Gen: seq.Gen, Call: MonoNow()}
	v, refused, err := w.storeRead(seq)
	rd.Ret = MonoNow()
	switch {
	case err != nil:
		core.ErrEvent(&rd, err)
	case refused:
		rd.Refused = true
	default:
		rd.OK, rd.Value = true, v
	}
	w.emit(rd)
	if !rd.OK {
		return
	}
	if w.cfg.Think > 0 {
		time.Sleep(time.Duration(w.rng.Int64N(int64(w.cfg.Think))))
	}
	if w.rng.IntN(4) == 0 {
		ck := core.Event{Ev: "check", Hold: w.hold, Session: sid, Gen: seq.Gen, Call: MonoNow()}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		valid, err := w.cl.CheckSequencer(ctx, seq)
		cancel()
		ck.Ret = MonoNow()
		if err != nil {
			core.ErrEvent(&ck, err)
		} else {
			ck.OK = valid
		}
		w.emit(ck)
	}
	if w.cfg.Fenced != "" {
		// First into the cell, then into the store: a holder stopped after
		// its read meets both fences on waking.
		w.cellWrite(seq, sid, fmt.Sprintf("w%d-h%d-v%d", w.cfg.ID, w.hold, v+1), true)
	}
	wr := core.Event{Ev: "write", Hold: w.hold, Session: sid, Gen: seq.Gen, Value: v + 1, Call: MonoNow()}
	refused, err = w.storeWrite(seq, v+1)
	wr.Ret = MonoNow()
	switch {
	case err != nil:
		core.ErrEvent(&wr, err)
	case refused:
		wr.Refused = true
	default:
		wr.OK = true
	}
	w.emit(wr)
}

// cellWrite writes data to the cell file Fenced with the hold's sequencer:
// the cell commits it only if the sequencer is still valid then. If it
// fails because the session ended and retry is set, it is kept for the
// next session (zombie).
func (w *worker) cellWrite(seq client.Sequencer, sid uint64, data string, retry bool) {
	cw := core.Event{Ev: "cwrite", Hold: w.hold, Session: sid, Gen: seq.Gen, Data: data, Call: MonoNow()}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	_, err := w.cl.WriteFile(ctx, w.cfg.Fenced, []byte(data), client.WithSequencer(seq))
	cancel()
	cw.Ret = MonoNow()
	if err != nil {
		core.ErrEvent(&cw, err)
		if cw.Expired && retry {
			w.zombie = &zombieWrite{hold: w.hold, seq: seq, data: data + "-zombie"}
		}
	} else {
		cw.OK = true
	}
	w.emit(cw)
}

// storeRead reads the store's counter carrying seq. refused: the store's
// guard rejected seq as stale.
func (w *worker) storeRead(seq client.Sequencer) (v int, refused bool, err error) {
	s, err := w.store.Read(core.CounterKey, seq, fencedstore.Tag{Worker: w.cfg.ID, Hold: w.hold})
	if errors.Is(err, fencedstore.ErrStale) {
		return 0, true, nil
	}
	if err != nil {
		return 0, false, err
	}
	v, err = strconv.Atoi(s)
	return v, false, err
}

// storeWrite writes value to the store's counter carrying seq.
func (w *worker) storeWrite(seq client.Sequencer, value int) (refused bool, err error) {
	err = w.store.Write(core.CounterKey, strconv.Itoa(value), seq, fencedstore.Tag{Worker: w.cfg.ID, Hold: w.hold})
	if errors.Is(err, fencedstore.ErrStale) {
		return true, nil
	}
	return false, err
}
