package cell

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/chubby-dev/chubby/client"
	"github.com/chubby-dev/chubby/fs"
	"github.com/chubby-dev/chubby/server"
	"github.com/chubby-dev/chubby/session"
	"github.com/chubby-dev/chubby/testing/wait"
)

// Epoch is the time every clock made by this package starts at; tests print
// times as offsets from it.
var Epoch = time.Unix(1_700_000_000, 0)

// startTimeout bounds how long Start and Restart wait for the server to bind
// its ports and become master.
const startTimeout = 20 * time.Second

// Option configures Start.
type Option func(*options)

type options struct {
	clock    session.Clock
	cellName string
	ttl      time.Duration
	http     bool
	level    hclog.Level
	// raft timing (StartCluster; zero: the server's defaults)
	hb, election, leaderLease time.Duration
	serverConfig              func(int, *server.Config)
	skew                      bool // StartCluster: a SkewClock per server
}

// WithClock makes the server use clock for leases, KeepAlive holds and
// lock-delay (typically a *session.ManualClock or a *StallClock). Without it
// the server uses the real clock.
func WithClock(clock session.Clock) Option { return func(o *options) { o.clock = clock } }

// WithManualClock is WithClock(session.NewManualClock(Epoch)); the clock is
// then (*Cell).Manual.
func WithManualClock() Option {
	return func(o *options) { o.clock = session.NewManualClock(Epoch) }
}

// WithCellName sets the cell name (default "local"; namespace /ls/<name>).
func WithCellName(name string) Option { return func(o *options) { o.cellName = name } }

// WithDefaultTTL sets the TTL granted to sessions that ask for none.
func WithDefaultTTL(d time.Duration) Option { return func(o *options) { o.ttl = d } }

// WithHTTP enables the server's HTTP endpoint on a free port.
func WithHTTP() Option { return func(o *options) { o.http = true } }

// WithLogLevel sets the level of the server's log lines (default Info, or
// $CHUBBY_TEST_LOG if set: trace, debug, info, warn, error).
func WithLogLevel(l hclog.Level) Option { return func(o *options) { o.level = l } }

// Cell is one running server and everything needed to reach it.
type Cell struct {
	// Clock is the clock the server was started with (nil: the real clock).
	Clock session.Clock

	name string
	cfg  server.Config
	log  hclog.Logger

	mu  sync.Mutex
	srv *server.Server
}

// Start starts a one-server cell and waits until it serves as master. The
// server is closed when the test ends.
func Start(t testing.TB, opts ...Option) *Cell {
	t.Helper()
	o := options{cellName: "local", level: levelFromEnv()}
	for _, f := range opts {
		f(&o)
	}
	out := newTestWriter(t) // its Cleanup runs last: no log line after the test
	logger := hclog.New(&hclog.LoggerOptions{
		Name:            "chubbyd",
		Level:           o.level,
		Output:          out,
		IncludeLocation: false,
		TimeFormat:      "15:04:05.000",
	})
	c := &Cell{Clock: o.clock, name: o.cellName, log: logger}

	var lastErr error
	for attempt := 0; attempt < 5; attempt++ {
		cfg := server.Config{
			NodeID:          "node0",
			Cell:            o.cellName,
			DataDir:         t.TempDir(), // a fresh dir per attempt: a failed start may have bootstrapped raft on other ports
			BootstrapExpect: 1,
			DefaultTTL:      o.ttl,
			Clock:           o.clock,
			Logger:          logger,
		}
		addrs, err := freeAddrs(4)
		if err != nil {
			t.Fatalf("cell: pick ports: %v", err)
		}
		cfg.RPCAddr, cfg.RaftAddr, cfg.GossipAddr = addrs[0], addrs[1], addrs[2]
		if o.http {
			cfg.HTTPAddr = addrs[3]
		}
		if o.serverConfig != nil { // the limits and timing a test wants; addresses stay the harness's
			o.serverConfig(0, &cfg)
			cfg.RPCAddr, cfg.RaftAddr, cfg.GossipAddr = addrs[0], addrs[1], addrs[2]
		}
		c.cfg = cfg
		srv, err := c.startServer()
		if err != nil {
			lastErr = err
			if isBindError(err) {
				t.Logf("cell: start attempt %d: %v; trying other ports", attempt+1, err)
				continue
			}
			t.Fatalf("cell: start: %v", err)
		}
		c.srv = srv
		t.Cleanup(func() { c.closeServer() })
		if err := c.waitMaster(); err != nil {
			t.Fatalf("cell: %v", err)
		}
		return c
	}
	t.Fatalf("cell: could not bind free ports: %v", lastErr)
	return nil
}

func levelFromEnv() hclog.Level {
	if v := os.Getenv("CHUBBY_TEST_LOG"); v != "" {
		if l := hclog.LevelFromString(v); l != hclog.NoLevel {
			return l
		}
	}
	return hclog.Info
}

func (c *Cell) startServer() (*server.Server, error) {
	srv, err := server.New(c.cfg)
	if err != nil {
		return nil, err
	}
	if err := srv.Start(); err != nil {
		return nil, err
	}
	return srv, nil
}

func (c *Cell) waitMaster() error {
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	if err := c.Server().WaitMaster(ctx); err != nil {
		return fmt.Errorf("server did not become master within %v: %w", startTimeout, err)
	}
	return nil
}

func (c *Cell) closeServer() {
	c.mu.Lock()
	srv := c.srv
	c.srv = nil
	c.mu.Unlock()
	if srv != nil {
		srv.Close()
	}
}

// Server returns the running server (nil between Stop and Resume).
func (c *Cell) Server() *server.Server {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.srv
}

// Manual returns the cell's clock as a *session.ManualClock, failing the
// test if the cell runs on another clock.
func (c *Cell) Manual(t testing.TB) *session.ManualClock {
	t.Helper()
	switch clk := c.Clock.(type) {
	case *session.ManualClock:
		return clk
	case *StallClock:
		return clk.ManualClock
	}
	t.Fatalf("cell: the cell's clock is %T, not a manual clock", c.Clock)
	return nil
}

// Name is the cell name.
func (c *Cell) Name() string { return c.name }

// Root is the cell's namespace root, /ls/<name>.
func (c *Cell) Root() string { return fs.Root(c.name) }

// Path joins elems under the cell's root: Path("a", "b") is /ls/<name>/a/b.
func (c *Cell) Path(elems ...string) string {
	return c.Root() + "/" + strings.Join(elems, "/")
}

// Addr is the server's RPC address; it stays the same across Restart.
func (c *Cell) Addr() string { return c.cfg.RPCAddr }

// HTTPAddr is the server's HTTP address ("" unless WithHTTP).
func (c *Cell) HTTPAddr() string { return c.cfg.HTTPAddr }

// DataDir is the server's data directory; it stays the same across Restart.
func (c *Cell) DataDir() string { return c.cfg.DataDir }

// Logger is the cell's logger (lines go to t.Log of the test that started it).
func (c *Cell) Logger() hclog.Logger { return c.log }

// Status is the running server's status.
func (c *Cell) Status() server.Status { return c.Server().Status() }

// Dial returns a client of the cell. cfg.Servers defaults to the cell's
// address and cfg.Logger to the cell's logger; the client is closed when the
// test ends.
func (c *Cell) Dial(t testing.TB, cfg client.Config) *client.Client {
	t.Helper()
	return dial(t, cfg, []string{c.Addr()}, c.log)
}

// dial dials a client with defaults for its servers and logger; the
// client is closed when the test ends.
func dial(t testing.TB, cfg client.Config, servers []string, log hclog.Logger) *client.Client {
	t.Helper()
	if len(cfg.Servers) == 0 {
		cfg.Servers = servers
	}
	if cfg.Logger == nil {
		cfg.Logger = log
	}
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	cl, err := client.Dial(ctx, cfg)
	if err != nil {
		t.Fatalf("cell: dial %v: %v", cfg.Servers, err)
	}
	t.Cleanup(func() { cl.Close() })
	return cl
}

// Stop closes the server, keeping its data dir and ports for Resume. Clients
// see the connection drop and retry.
func (c *Cell) Stop(t testing.TB) {
	t.Helper()
	c.closeServer()
}

// Resume starts the server again after Stop, on the same data dir and ports,
// and waits until it serves as master.
func (c *Cell) Resume(t testing.TB) {
	t.Helper()
	if c.Server() != nil {
		t.Fatalf("cell: Resume while the server is running")
	}
	// The ports were ours a moment ago; another process may grab one in
	// between (then the test cannot go on), or the kernel may still hold it
	// briefly: retry for a while.
	srv, err := retryBind(c.startServer)
	if err != nil {
		t.Fatalf("cell: restart on %s: %v", c.cfg.RPCAddr, err)
	}
	c.mu.Lock()
	c.srv = srv
	c.mu.Unlock()
	if err := c.waitMaster(); err != nil {
		t.Fatalf("cell: after restart: %v", err)
	}
}

// Reconfigure changes the server's configuration for the next Resume (for
// example its raft log store); call it between Stop and Resume. Its
// addresses and data dir stay the harness's.
func (c *Cell) Reconfigure(t testing.TB, fn func(cfg *server.Config)) {
	t.Helper()
	if c.Server() != nil {
		t.Fatalf("cell: Reconfigure while the server is running")
	}
	cfg := c.cfg
	fn(&cfg)
	cfg.DataDir, cfg.RPCAddr, cfg.RaftAddr, cfg.GossipAddr, cfg.HTTPAddr = c.cfg.DataDir, c.cfg.RPCAddr, c.cfg.RaftAddr, c.cfg.GossipAddr, c.cfg.HTTPAddr
	c.cfg = cfg
}

// Restart closes the server and starts it again on the same data dir and
// ports (Stop then Resume). The replicated state (files, locks, sessions)
// comes back from the raft log; the new master gives every session a fresh
// lease of its TTL and starts a new epoch.
func (c *Cell) Restart(t testing.TB) {
	t.Helper()
	c.Stop(t)
	c.Resume(t)
}

// freeAddrs picks n distinct free loopback ports by listening on :0 and
// closing. Another process may take one before the server binds it; Start
// retries with other ports when that happens.
func freeAddrs(n int) ([]string, error) {
	lns := make([]net.Listener, 0, n)
	defer func() {
		for _, ln := range lns {
			ln.Close()
		}
	}()
	out := make([]string, 0, n)
	for i := 0; i < n; i++ {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		lns = append(lns, ln)
		out = append(out, ln.Addr().String())
	}
	return out, nil
}

func isBindError(err error) bool {
	return errors.Is(err, syscall.EADDRINUSE) || strings.Contains(err.Error(), "address already in use")
}

// retryBind runs start until it succeeds or fails other than on a port
// still taken (a restart's ports were ours a moment ago; the kernel may
// hold one briefly), for up to startTimeout, and returns its last result.
func retryBind(start func() (*server.Server, error)) (*server.Server, error) {
	var srv *server.Server
	var err error
	wait.Until(startTimeout, func() bool {
		srv, err = start()
		return err == nil || !isBindError(err)
	})
	return srv, err
}

// testWriter sends log output to t.Log until the test ends; lines written
// after that (a raft goroutine finishing late) are dropped instead of
// panicking the test binary.
type testWriter struct {
	mu   sync.Mutex
	t    testing.TB
	done bool
}

func newTestWriter(t testing.TB) *testWriter {
	w := &testWriter{t: t}
	t.Cleanup(func() {
		w.mu.Lock()
		w.done = true
		w.mu.Unlock()
	})
	return w
}

func (w *testWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.done {
		w.t.Log(strings.TrimRight(string(p), "\n"))
	}
	return len(p), nil
}

var _ io.Writer = (*testWriter)(nil)
