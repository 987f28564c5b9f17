package procnemesis

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/chubby-dev/chubby/client"
	"github.com/chubby-dev/chubby/internal/devca"
	"github.com/chubby-dev/chubby/testing/fencedstore"
	"github.com/chubby-dev/chubby/testing/nemesis/core"
	"github.com/chubby-dev/chubby/testing/wait"
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
	// TLSDir and TLSName, on a cell with TLS: the worker's certificate is
	// TLSDir/TLSName.pem (key TLSName-key.pem), of the CA TLSDir/ca.pem
	// (a PKI's directory); its principal is TLSName.
	TLSDir  string `json:"tls_dir,omitempty"`
	TLSName string `json:"tls_name,omitempty"`
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

// worker is the lock client: it keeps a session and a handle on the lock
// and runs core.LockCycle hold after hold — lock → fenced read → think
// (maybe CheckSequencer) → fenced cell write → fenced store write of
// read+1 → release — writing each step to stdout.
type worker struct {
	cfg   WorkerConfig
	rng   *rand.Rand
	out   io.Writer
	outMu sync.Mutex
	log   hclog.Logger
	cycle *core.LockCycle

	tls       *tls.Config // nil: plain TCP
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
		log: hclog.New(&hclog.LoggerOptions{Name: fmt.Sprintf("lockworker%d", cfg.ID), Level: hclog.Warn, Output: os.Stderr})}
	w.cycle = &core.LockCycle{Worker: cfg.ID, Now: MonoNow, Think: cfg.Think, Emit: w.emit,
		Store: fencedstore.Client{URL: cfg.Store, HTTP: &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 2}}},
		Alive: func(call int64) { w.lastAlive = max(w.lastAlive, call) }}
	if cfg.Fenced != "" {
		// First into the cell, then into the store: a holder stopped after
		// its read meets both fences on waking.
		w.cycle.BeforeWrite = func(seq client.Sequencer, sid uint64, hold, value int) {
			w.cellWrite(seq, sid, hold, fmt.Sprintf("w%d-h%d-v%d", cfg.ID, hold, value), true)
		}
	}
	if cfg.TLSDir != "" {
		tc, err := devca.TLSConfig(cfg.TLSDir, cfg.TLSName)
		if err != nil {
			fmt.Fprintf(os.Stderr, "worker: TLS: %v\n", err)
			return 2
		}
		w.tls = tc
	}
	ctx, stop := context.WithCancel(context.Background())
	go func() {
		io.Copy(io.Discard, stdin) // the test closes stdin to stop the worker
		stop()
	}()
	for ctx.Err() == nil {
		w.iterate(ctx)
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
func (w *worker) session(ctx context.Context) bool {
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
			LockDelay: w.cfg.LockDelay, Logger: w.log, TLS: w.tls}
		dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		call := MonoNow()
		cl, err := client.Dial(dctx, cfg)
		cancel()
		if err != nil {
			return false
		}
		w.cl, w.lastAlive = cl, call
		w.emit(core.Event{Ev: "session", Session: cl.Session().ID, Call: call, Ret: MonoNow(), OK: true})
	}
	if w.h == nil {
		octx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		call := MonoNow()
		h, err := w.cl.Open(octx, w.cfg.Lock, client.Create())
		cancel()
		if err != nil {
			return false
		}
		w.h, w.lastAlive = h, call
	}
	return true
}

func (w *worker) iterate(ctx context.Context) {
	if !w.session(ctx) {
		wait.Sleep(ctx, 50*time.Millisecond)
		return
	}
	if z := w.zombie; z != nil {
		w.zombie = nil
		w.cellWrite(z.seq, w.cl.Session().ID, z.hold, z.data, false)
	}
	w.hold++
	w.cycle.Hold(ctx, w.cl, w.h, w.hold, w.rng)
}

// cellWrite writes data to the cell file Fenced with the hold's sequencer:
// the cell commits it only if the sequencer is still valid then. If it
// fails because the session ended and retry is set, it is kept for the
// next session (zombie).
func (w *worker) cellWrite(seq client.Sequencer, sid uint64, hold int, data string, retry bool) {
	cw := core.Do(MonoNow, core.Event{Ev: "cwrite", Hold: hold, Session: sid, Gen: seq.Gen, Data: data}, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_, err := w.cl.WriteFile(ctx, w.cfg.Fenced, []byte(data), client.WithSequencer(seq))
		return err
	})
	if cw.Expired && retry {
		w.zombie = &zombieWrite{hold: hold, seq: seq, data: data + "-zombie"}
	}
	w.emit(cw)
}
