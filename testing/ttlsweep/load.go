package main

// Measurement (b) and (c): many sessions that nobody kills, behind a
// jittery network, in processes that stop the world now and then. Every
// session the master expires is a false revocation; meanwhile the master's
// CPU time and KeepAlive count say what the TTL costs it.

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/chubby-dev/chubby/testing/netproxy"
	"github.com/chubby-dev/chubby/testing/proc"
	"github.com/chubby-dev/chubby/testing/wait"
)

// Bounds of the load run's phases besides its duration.
const (
	// workersReadyTimeout: every worker has its sessions up.
	workersReadyTimeout = 3 * time.Minute
	// workersStopTimeout: workers close their sessions and exit when told.
	workersStopTimeout = 30 * time.Second
	// populationTimeout: after every worker is ready, how long to wait for
	// the master to count every session (those that expired while the
	// others were being created are being replaced) before the window
	// starts anyway.
	populationTimeout = 30 * time.Second
	// idleBaseline: how long the master's idle CPU use is measured.
	idleBaseline = 3 * time.Second
)

// The series read from chubbyd's /metrics.
const (
	metricExpired    = "chubby_sessions_expired_total"
	metricKeepAlives = "chubby_keepalives_total"
	metricSessions   = "chubby_sessions"
)

// loadResult is what one load run measured over its window: from the
// moment every session was up to the end of the settle time after the last
// pause.
type loadResult struct {
	GrantedTTL time.Duration
	Window     time.Duration
	// ServerExpiries is the rise of chubby_sessions_expired_total;
	// ClientExpiries and Jeopardies are what the workers reported.
	ServerExpiries, ClientExpiries, Jeopardies int
	// CPUSeconds is the master's user+system time; KeepAlives the rise of
	// chubby_keepalives_total. IdleCPU is the master's CPU-seconds per
	// second with no session, measured for idleBaseline before the
	// workers start: the part of CPUSeconds that does not scale with the
	// sessions.
	CPUSeconds float64
	IdleCPU    float64
	KeepAlives float64
	// SessionsStart and SessionsEnd are the master's chubby_sessions gauge.
	SessionsStart, SessionsEnd float64
	// HostBusy is the fraction of the machine's CPU time (all cores, every
	// process: /proc/stat) that was busy in the window: near 1, the load
	// generator (proxy, workers), the master and anything else running
	// starve each other, and what is measured is the machine as much as
	// the TTL.
	HostBusy float64
	// Pauses and Jitter are what was applied: every pause (SIGSTOP to
	// SIGCONT) and every per-chunk jitter sample drawn in the window.
	Pauses, Jitter Summary
}

// loadWorker is one worker child, as the parent sees it.
type loadWorker struct {
	child *proc.Child
	ready chan string // its "ready" line
	// counting is set during the window; lines outside it are not counted.
	counting          *atomic.Bool
	expired, jeopardy atomic.Int64
	sessions          int
}

func (w *loadWorker) onLine(line string, _ time.Time) {
	switch {
	case strings.HasPrefix(line, lineReady+" "):
		select {
		case w.ready <- line:
		default:
		}
	case line == lineExpired:
		if w.counting.Load() {
			w.expired.Add(1)
		}
	case line == lineJeopardy:
		if w.counting.Load() {
			w.jeopardy.Add(1)
		}
	}
}

// measureLoad runs measurement (b) and (c) once against srv with sessions
// asking for ttl.
func measureLoad(ctx context.Context, cfg config, srv *chubbyd, dir string, ttl time.Duration, seed uint64) (loadResult, error) {
	var res loadResult
	idle0, err := srv.cpuSeconds()
	if err != nil {
		return res, err
	}
	if !wait.Sleep(ctx, idleBaseline) {
		return res, ctx.Err()
	}
	idle1, err := srv.cpuSeconds()
	if err != nil {
		return res, err
	}
	res.IdleCPU = (idle1 - idle0) / idleBaseline.Seconds()
	link, err := netproxy.Listen("clients", srv.rpcAddr)
	if err != nil {
		return res, err
	}
	defer link.Close()
	var jitter *sampler
	if cfg.Jitter.Median > 0 {
		jitter = newSampler(cfg.Jitter, newRand(seed, 1))
		link.Jitter(jitter.Sample)
	}

	var counting atomic.Bool
	workers := make([]*loadWorker, cfg.Procs)
	defer func() {
		for _, w := range workers {
			if w != nil {
				w.child.Kill()
				w.child.CloseStdin()
			}
		}
	}()
	for i := range workers {
		n := cfg.Sessions / cfg.Procs
		if i < cfg.Sessions%cfg.Procs {
			n++
		}
		w := &loadWorker{ready: make(chan string, 1), counting: &counting, sessions: n}
		cmd, err := childCommand(childConfig{Role: roleWorker, Server: link.Addr(), TTL: ttl, Sessions: n,
			DialConcurrency: cfg.DialConcurrency})
		if err != nil {
			return res, err
		}
		if w.child, err = proc.StartProcess(fmt.Sprintf("worker%d", i), cmd, dir, w.onLine); err != nil {
			return res, fmt.Errorf("start worker %d: %w", i, err)
		}
		workers[i] = w
	}
	deadline := time.After(workersReadyTimeout)
	for i, w := range workers {
		select {
		case line := <-w.ready:
			ms, err := strconv.Atoi(line[strings.LastIndex(line, "ttl_ms=")+len("ttl_ms="):])
			if err != nil {
				return res, fmt.Errorf("worker %d said %q", i, line)
			}
			res.GrantedTTL = time.Duration(ms) * time.Millisecond
		case <-w.child.Done():
			return res, fmt.Errorf("worker %d exited before its sessions were up; stderr:\n%s", i, tail(w.child.Stderr(), 20))
		case <-deadline:
			return res, fmt.Errorf("worker %d: %d sessions not up within %v; stderr:\n%s", i, w.sessions, workersReadyTimeout, tail(w.child.Stderr(), 20))
		case <-ctx.Done():
			return res, ctx.Err()
		}
	}

	// Every session of the first round is up; let the replacements of any
	// that expired meanwhile come up too, so the window starts with the
	// whole population and no expiry of before it is reported in it.
	// (If that does not happen within populationTimeout the window starts
	// anyway: sessions_gauge_start in the runs file tells.)
	pctx, cancel := context.WithTimeout(ctx, populationTimeout)
	wait.UntilCtx(pctx, wait.Every(50*time.Millisecond, func() bool {
		m, err := srv.metrics()
		return err == nil && m[metricSessions] >= float64(cfg.Sessions)
	}))
	cancel()
	if ctx.Err() != nil {
		return res, ctx.Err()
	}

	// The window.
	m0, err := srv.metrics()
	if err != nil {
		return res, err
	}
	cpu0, err := srv.cpuSeconds()
	if err != nil {
		return res, err
	}
	busy0, total0, err := hostCPU()
	if err != nil {
		return res, err
	}
	if jitter != nil {
		jitter.Reset() // the window's samples only
	}
	start := time.Now()
	counting.Store(true)
	pauses := newHistogram()
	if cfg.PauseEvery > 0 {
		pctx, cancel := context.WithTimeout(ctx, cfg.Duration)
		var wg sync.WaitGroup
		errs := make([]error, len(workers))
		for i, w := range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs[i] = pauseLoop(pctx, w.child, cfg, newRand(seed, 100+uint64(i)), pauses)
			}()
		}
		wg.Wait()
		cancel()
		if err := errors.Join(errs...); err != nil {
			return res, err
		}
	} else if !wait.Sleep(ctx, cfg.Duration) {
		return res, ctx.Err()
	}
	if ctx.Err() != nil {
		return res, ctx.Err()
	}
	for i, w := range workers {
		if w.child.Exited() {
			return res, fmt.Errorf("worker %d exited during the run; stderr:\n%s", i, tail(w.child.Stderr(), 20))
		}
	}
	if !wait.Sleep(ctx, cfg.Settle) {
		return res, ctx.Err()
	}
	m1, err := srv.metrics()
	if err != nil {
		return res, err
	}
	cpu1, err := srv.cpuSeconds()
	if err != nil {
		return res, err
	}
	res.Window = time.Since(start)
	counting.Store(false)
	busy1, total1, err := hostCPU()
	if err != nil {
		return res, err
	}
	if total1 > total0 {
		res.HostBusy = float64(busy1-busy0) / float64(total1-total0)
	}

	res.ServerExpiries = int(m1[metricExpired] - m0[metricExpired])
	res.KeepAlives = m1[metricKeepAlives] - m0[metricKeepAlives]
	res.SessionsStart, res.SessionsEnd = m0[metricSessions], m1[metricSessions]
	res.CPUSeconds = cpu1 - cpu0
	for _, w := range workers {
		res.ClientExpiries += int(w.expired.Load())
		res.Jeopardies += int(w.jeopardy.Load())
	}
	res.Pauses = pauses.Summary()
	if jitter != nil {
		res.Jitter = jitter.Summary()
	}

	// Workers close their sessions and exit; the deferred Kill is for
	// those that do not in time.
	for _, w := range workers {
		w.child.CloseStdin()
	}
	stopBy := time.After(workersStopTimeout)
	for _, w := range workers {
		select {
		case <-w.child.Done():
		case <-stopBy:
		}
	}
	return res, nil
}

// pauseLoop stops and continues worker c until ctx ends: it waits an
// exponentially distributed time (mean cfg.PauseEvery), stops the process
// (SIGSTOP) for a length drawn from cfg.Pause, continues it (SIGCONT), and
// records the pause as applied, SIGSTOP to SIGCONT. A pause under way when
// ctx ends is finished.
func pauseLoop(ctx context.Context, c *proc.Child, cfg config, r *rand.Rand, applied *histogram) error {
	for {
		if !wait.Sleep(ctx, exponential(r, cfg.PauseEvery)) {
			return nil
		}
		length := cfg.Pause.Sample(r)
		stopped := time.Now()
		if err := c.Suspend(); err != nil {
			return fmt.Errorf("pause %s: %w", c.Name, err)
		}
		time.Sleep(time.Until(stopped.Add(length))) // the pause itself, at most cfg.Pause.Max
		if err := c.Continue(); err != nil {
			return fmt.Errorf("continue %s: %w", c.Name, err)
		}
		applied.Add(time.Since(stopped))
		if c.Exited() {
			return fmt.Errorf("%s exited", c.Name)
		}
	}
}
