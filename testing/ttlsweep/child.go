package main

// The child side: the program re-executed as a lock holder (measurement a)
// or as a worker holding many sessions (measurement b). The parent starts
// it with childEnv set to a JSON childConfig; the child talks back in
// stdout lines and stops when its stdin ends.

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"
	"sync/atomic"
	"time"

	"github.com/chubby-dev/chubby/client"
)

// childEnv carries a child's configuration; the program is a child iff it
// is set.
const childEnv = "CHUBBY_TTLSWEEP_CHILD"

// The roles of a child.
const (
	roleHolder = "holder"
	roleWorker = "worker"
)

// childConfig is what a child is told.
type childConfig struct {
	Role string `json:"role"`
	// Server is the RPC address to dial: chubbyd's for the holder, the
	// jitter proxy's for a worker (which then never follows the master's
	// advertised address around the proxy).
	Server string        `json:"server"`
	TTL    time.Duration `json:"ttl"`
	// Path is the lock the holder takes.
	Path string `json:"path,omitempty"`
	// Sessions is how many sessions a worker keeps alive.
	Sessions int `json:"sessions,omitempty"`
	// DialConcurrency bounds a worker's session creations in flight.
	DialConcurrency int `json:"dial_concurrency,omitempty"`
}

// The stdout lines of a child.
const (
	lineHeld     = "held"     // holder: "held ttl_ms=N", the lock is held
	lineReady    = "ready"    // worker: "ready n=N ttl_ms=N", every session is up
	lineExpired  = "expired"  // worker: one session expired (client side)
	lineJeopardy = "jeopardy" // worker: one session entered jeopardy
	lineDone     = "done"     // worker: "done expired=N jeopardy=N", closed every session
)

// isChild reports whether this process was started as a child.
func isChild() bool { return os.Getenv(childEnv) != "" }

// childCommand is the command that runs this program as a child with cfg.
func childCommand(cfg childConfig) (*exec.Cmd, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	b, err := json.Marshal(cfg)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), childEnv+"="+string(b))
	return cmd, nil
}

// childMain runs the child described by childEnv and returns its exit code.
func childMain() int {
	var cfg childConfig
	if err := json.Unmarshal([]byte(os.Getenv(childEnv)), &cfg); err != nil {
		fmt.Fprintf(os.Stderr, "ttlsweep child: bad %s: %v\n", childEnv, err)
		return 2
	}
	// Stop when stdin ends: the parent closed it, or died.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		io.Copy(io.Discard, os.Stdin)
		cancel()
	}()
	out := &lineWriter{w: bufio.NewWriter(os.Stdout)}
	var err error
	switch cfg.Role {
	case roleHolder:
		err = runHolder(ctx, cfg, out)
	case roleWorker:
		err = runWorker(ctx, cfg, out)
	default:
		err = fmt.Errorf("unknown role %q", cfg.Role)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "ttlsweep %s: %v\n", cfg.Role, err)
		return 1
	}
	return 0
}

// lineWriter writes whole lines to stdout from many goroutines.
type lineWriter struct {
	mu sync.Mutex
	w  *bufio.Writer
}

func (l *lineWriter) printf(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	fmt.Fprintf(l.w, format+"\n", args...)
	l.w.Flush()
}

// dialTimeout bounds one attempt of a child to create a session.
const dialTimeout = 30 * time.Second

// runHolder takes the lock at cfg.Path without lock-delay in a session of
// cfg.TTL, says so, and holds it until its stdin ends (or it is killed,
// which is the point).
func runHolder(ctx context.Context, cfg childConfig, out *lineWriter) error {
	dctx, cancel := context.WithTimeout(ctx, dialTimeout)
	defer cancel()
	c, err := client.Dial(dctx, client.Config{Servers: []string{cfg.Server}, SessionTTL: cfg.TTL})
	if err != nil {
		return err
	}
	defer c.Close()
	h, err := c.Open(dctx, cfg.Path, client.Create())
	if err != nil {
		return err
	}
	if err := h.Acquire(dctx, client.Exclusive, client.LockDelay(client.NoLockDelay)); err != nil {
		return err
	}
	out.printf("%s ttl_ms=%d", lineHeld, c.Session().TTL.Milliseconds())
	<-ctx.Done()
	return nil
}

// runWorker keeps cfg.Sessions sessions alive through cfg.Server until its
// stdin ends: a session that expires is reported and replaced by a new one,
// so the population stays the same. Nothing else is done with the
// sessions: the only traffic is KeepAlive.
func runWorker(ctx context.Context, cfg childConfig, out *lineWriter) error {
	w := &worker{cfg: cfg, out: out, sem: make(chan struct{}, max(cfg.DialConcurrency, 1))}
	var ready, all sync.WaitGroup
	ready.Add(cfg.Sessions)
	all.Add(cfg.Sessions)
	for range cfg.Sessions {
		go func() {
			defer all.Done()
			w.keep(ctx, ready.Done)
		}()
	}
	up := make(chan struct{})
	go func() {
		ready.Wait()
		close(up)
	}()
	select {
	case <-up:
		if ctx.Err() == nil {
			out.printf("%s n=%d ttl_ms=%d", lineReady, cfg.Sessions, w.grantedTTL().Milliseconds())
		}
	case <-ctx.Done():
	}
	all.Wait()
	out.printf("%s expired=%d jeopardy=%d", lineDone, w.expired.Load(), w.jeopardy.Load())
	return nil
}

// worker is the state of runWorker.
type worker struct {
	cfg childConfig
	out *lineWriter
	sem chan struct{} // session creations in flight

	expired, jeopardy atomic.Int64

	mu  sync.Mutex
	ttl time.Duration // as granted to the latest session
}

func (w *worker) grantedTTL() time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.ttl
}

// keep keeps one session slot filled until ctx ends. up is called once the
// slot's first session is up (or ctx ended before it was).
func (w *worker) keep(ctx context.Context, up func()) {
	upOnce := sync.OnceFunc(up)
	defer upOnce()
	for {
		w.sem <- struct{}{}
		c, err := dialRetry(ctx, w.cfg)
		<-w.sem
		if err != nil { // ctx ended
			return
		}
		w.mu.Lock()
		w.ttl = c.Session().TTL
		w.mu.Unlock()
		upOnce()
		expired := w.watch(ctx, c)
		c.Close()
		if !expired {
			return
		}
		w.expired.Add(1)
		w.out.printf("%s", lineExpired)
	}
}

// watch follows c's events until the session expires (true) or ctx ends
// (false), reporting each jeopardy as it happens.
func (w *worker) watch(ctx context.Context, c *client.Client) bool {
	for {
		select {
		case <-ctx.Done():
			return false
		case ev := <-c.Events():
			switch ev.Type {
			case client.EventJeopardy:
				w.jeopardy.Add(1)
				w.out.printf("%s", lineJeopardy)
			case client.EventExpired:
				return true
			}
		case <-c.Done():
			// The KeepAlive loop ended without Close: the session expired
			// (its event may still be queued; it is counted once here).
			return c.State() == client.SessionExpired
		}
	}
}

// dialRetry creates a session, retrying until one is made or ctx ends.
func dialRetry(ctx context.Context, cfg childConfig) (*client.Client, error) {
	for {
		dctx, cancel := context.WithTimeout(ctx, dialTimeout)
		c, err := client.Dial(dctx, client.Config{Servers: []string{cfg.Server}, FixedServers: true, SessionTTL: cfg.TTL})
		cancel()
		if err == nil {
			return c, nil
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		fmt.Fprintf(os.Stderr, "dial: %v\n", err)
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}
