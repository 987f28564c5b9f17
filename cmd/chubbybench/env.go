package main

// The run's environment: its clients, its directory in the cell, the rate
// limiter, the phases (warmup, measured window, done) and the closed-loop
// driver every workload but sessions uses.

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/chubby-dev/chubby/client"
)

// The phases of a run. Operations complete in each; only those of the
// measured window count.
const (
	phaseWarmup int32 = iota
	phaseMeasure
	phaseDone
)

// errorPause is how long a client waits after a failed operation before
// its next one, so a broken cell is not hammered by a tight error loop.
const errorPause = 50 * time.Millisecond

// dialParallel bounds how many sessions are being created at once.
const dialParallel = 16

// env is one run.
type env struct {
	o       *options
	limiter *Limiter
	stderr  io.Writer
	prog    *progress

	phase             atomic.Int32
	liveOps, liveErrs atomic.Int64 // for the progress bar
	// atMeasure and atEnd, if set, run as the measured window opens and
	// closes (a workload's counters snapshot).
	atMeasure, atEnd func()
	// usage samples the server at the window's ends (-server-metrics).
	usage *serverUsage

	// pools are the connections the clients share (-conns), nil when each
	// has its own; dialled counts the clients, to spread them over pools.
	pools   []*client.Pool
	dialled atomic.Int64

	mu      sync.Mutex
	clients []*client.Client // every session the run dialled, closed by close
	admin   *client.Client   // the session that made dir and files
	dir     string           // this run's directory, "" until made
	files   []string         // files made in dir
}

func newEnv(o *options, stderr io.Writer) *env {
	e := &env{o: o, limiter: NewLimiter(o.rate), stderr: stderr, prog: newProgress(stderr, o.quiet)}
	if o.metrics != "" {
		e.usage = &serverUsage{url: o.metrics}
	}
	if o.conns > 0 && o.conns < o.clients && !o.group {
		for range o.conns {
			e.pools = append(e.pools, client.NewPool())
		}
	}
	return e
}

// dialParallelism is how many sessions are created at once: dialParallel,
// or more when they share connections (a creation is then two calls on a
// connection already open, not a connection of its own).
func (e *env) dialParallelism() int {
	if e.pools != nil || e.o.group {
		return 16 * dialParallel
	}
	return dialParallel
}

// measuring reports whether the measured window is open.
func (e *env) measuring() bool { return e.phase.Load() == phaseMeasure }

// config is the client configuration of the run's next session: the
// shared connections spread evenly, if there are any.
func (e *env) config() client.Config {
	cfg := client.Config{Servers: e.o.servers, SessionTTL: e.o.ttl, DisableCache: e.o.noCache}
	if e.o.workload.name == "sessions" {
		// Its sessions watch nothing: the session events (jeopardy,
		// safe, expired) need no 256-slot buffer per session.
		cfg.EventBuffer = 16
	}
	if e.pools != nil {
		cfg.Pool = e.pools[int(e.dialled.Add(1)-1)%len(e.pools)]
	} else {
		cfg.OwnConnection = true // -conns 0: a connection per client, as -help says
	}
	return cfg
}

// dialOne creates one session, giving up after -timeout.
func (e *env) dialOne(ctx context.Context) (*client.Client, error) {
	ctx, cancel := context.WithTimeout(ctx, e.o.timeout)
	defer cancel()
	c, err := client.Dial(ctx, e.config())
	if err != nil {
		return nil, err
	}
	e.mu.Lock()
	e.clients = append(e.clients, c)
	e.mu.Unlock()
	return c, nil
}

// dialAll creates n sessions, several at a time; any failure fails the
// run (the cell cannot be reached).
func (e *env) dialAll(ctx context.Context, n int) ([]*client.Client, error) {
	out := make([]*client.Client, n)
	errs := make([]error, n)
	sem := make(chan struct{}, e.dialParallelism())
	var wg sync.WaitGroup
	for i := range out {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			out[i], errs[i] = e.dialOne(ctx)
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, fmt.Errorf("dial the cell at %v: %w", e.o.servers, err)
		}
	}
	return out, nil
}

// dialWithDir dials n clients and makes the run's directory through the
// last of them.
func (e *env) dialWithDir(ctx context.Context, n int) ([]*client.Client, error) {
	cs, err := e.dialAll(ctx, n)
	if err != nil {
		return nil, err
	}
	if err := e.makeDir(ctx, cs[n-1]); err != nil {
		return nil, err
	}
	return cs, nil
}

// makeDir makes this run's directory, /ls/CELL/chubbybench/RUNID, with
// admin's session; close deletes it and every file made by file.
func (e *env) makeDir(ctx context.Context, admin *client.Client) error {
	var id [4]byte
	rand.Read(id[:])
	base := "/ls/" + admin.Cell() + "/chubbybench"
	dir := base + "/" + e.o.workload.name + "-" + hex.EncodeToString(id[:])
	for _, p := range []string{base, dir} {
		h, err := admin.Open(ctx, p, client.CreateDir())
		if err != nil {
			return fmt.Errorf("make the run's directory: %w", err)
		}
		h.Close()
	}
	e.mu.Lock()
	e.admin, e.dir = admin, dir
	e.mu.Unlock()
	return nil
}

// file names a file of this run's directory, to be deleted at the end.
func (e *env) file(name string) string {
	p := e.dir + "/" + name
	e.mu.Lock()
	e.files = append(e.files, p)
	e.mu.Unlock()
	return p
}

// close deletes the run's files and directory (best effort: a failure is
// a warning) and ends every session.
func (e *env) close() {
	e.mu.Lock()
	admin, dir, files, clients := e.admin, e.dir, e.files, e.clients
	e.mu.Unlock()
	if admin != nil && dir != "" {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		for _, p := range append(files, dir) {
			h, err := admin.Open(ctx, p, client.NoCache())
			if err == nil {
				err = h.Delete(ctx)
				h.Close()
			}
			if err != nil && !isNoSuchNode(err) {
				fmt.Fprintf(e.stderr, "chubbybench: warning: clean up %s: %v\n", p, err)
			}
		}
		cancel()
	}
	var wg sync.WaitGroup
	for _, c := range clients {
		wg.Add(1)
		go func() { defer wg.Done(); c.Close() }()
	}
	wg.Wait()
	for _, p := range e.pools {
		p.Close()
	}
}

// loop runs op for each of n workers, one operation after another (each
// waiting for the rate limiter first), through the warmup and the measured
// window; op records what it measured with worker.observe and returns the
// error of a failed operation. Operations run on ctx, so an operation in
// flight when the window closes completes (uncounted) unless the run is
// interrupted. loop returns the workers' records, the measured window and
// whether ctx ended early.
func (e *env) loop(ctx context.Context, n int, op func(ctx context.Context, w *worker) error) ([]*worker, time.Duration, bool) {
	runCtx, stop := context.WithCancel(ctx)
	ws := make([]*worker, n)
	var wg sync.WaitGroup
	for i := range ws {
		w := &worker{id: i, run: e}
		ws[i] = w
		wg.Add(1)
		go func() {
			defer wg.Done()
			for e.limiter.Wait(runCtx) == nil {
				err := op(ctx, w)
				if err == nil {
					continue
				}
				if ctx.Err() != nil {
					return // interrupted: not a failure of the cell
				}
				w.fail(err)
				select {
				case <-runCtx.Done():
					return
				case <-time.After(errorPause):
				}
			}
		}()
	}
	window, interrupted := e.timeline(ctx, e.o.warmup, e.o.duration)
	stop()
	wg.Wait()
	return ws, window, interrupted
}

// timeline runs the phases: warmup, then the measured window, showing
// progress meanwhile. It returns the window's length and whether ctx ended
// before the window's end.
func (e *env) timeline(ctx context.Context, warmup, duration time.Duration) (time.Duration, bool) {
	start := time.Now()
	stopProg := e.prog.runFor(warmup+duration, start, func() string {
		phase := "warmup"
		if e.measuring() {
			phase = "measuring"
		}
		return fmt.Sprintf("%s %s: %d ops, %d errors", e.o.workload.name, phase, e.liveOps.Load(), e.liveErrs.Load())
	})
	defer stopProg()
	if warmup > 0 && !sleepCtx(ctx, warmup) {
		e.phase.Store(phaseDone)
		return 0, true
	}
	if e.atMeasure != nil {
		e.atMeasure()
	}
	e.usage.begin()
	e.phase.Store(phaseMeasure)
	t0 := time.Now()
	ok := sleepCtx(ctx, duration)
	e.phase.Store(phaseDone)
	window := time.Since(t0)
	e.usage.finish()
	if e.atEnd != nil {
		e.atEnd()
	}
	return window, !ok
}

// result starts the Result of a run of the closed-loop driver.
func (e *env) result(ws []*worker, window time.Duration, interrupted bool) *Result {
	r := &Result{
		Workload:    e.o.workload.name,
		Clients:     e.o.clients,
		Duration:    window,
		Warmup:      e.o.warmup,
		Rate:        e.o.rate,
		Interrupted: interrupted,
	}
	collect(r, ws)
	return r
}

func isNoSuchNode(err error) bool { return errors.Is(err, client.ErrNoSuchNode) }

// sleepCtx waits d or until ctx ends, reporting whether all of d passed.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
