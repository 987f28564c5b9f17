package proc

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/chubby-dev/chubby/testing/wait"
)

// ReadyTimeout bounds how long a start or restart waits for the server to
// serve as master.
const ReadyTimeout = 30 * time.Second

// StopTimeout bounds how long Stop waits for a SIGTERMed server to exit.
const StopTimeout = 15 * time.Second

// Options configure StartServer.
type Options struct {
	// NodeID is the -node-id (default "n1").
	NodeID string
	// Cell is the -cell name (default: chubbyd's, "local").
	Cell string
	// LogLevel is chubbyd's -log-level (default "debug").
	LogLevel string
	// ExtraArgs are appended to chubbyd's flags.
	ExtraArgs []string
	// Join are gossip addresses for -join (none: no -join flag).
	Join []string
	// BootstrapExpect is -bootstrap-expect (0: no flag, chubbyd's default 1).
	BootstrapExpect int
	// ClientTLS is how the harness's own raw calls (readiness, the views
	// of the cell) reach a server started with TLS (nil: plain TCP).
	ClientTLS *tls.Config
	// ShEnv is the environment chubbysh needs for the readiness check
	// (CHUBBY_CACERT, CHUBBY_CERT, CHUBBY_KEY on a TLS cell).
	ShEnv []string
}

// Server is one chubbyd process (and its successors after Restart) with a
// fixed data directory and fixed ports.
type Server struct {
	NodeID  string
	DataDir string
	// LogPath is the file chubbyd's stderr goes to (appended across restarts).
	LogPath    string
	RPCAddr    string
	RaftAddr   string
	GossipAddr string
	HTTPAddr   string

	opts Options
	bins Bins
	// member: one server of a multi-server cell (StartCell, AddServer). It
	// is ready when it knows the cell's master, not when it is the master.
	member bool
	paused atomic.Bool
	// moreArgs, if set, returns flags appended to Args at each start
	// (CellOptions.ServerArgs).
	moreArgs func() []string

	mu   sync.Mutex
	proc *serverProc // the current process, nil before the first start
}

type serverProc struct {
	cmd      *exec.Cmd
	done     chan struct{}
	state    *os.ProcessState
	exitedAt time.Time
}

func (p *serverProc) exited() bool { return wait.Closed(p.done) }

// kill SIGKILLs the process's group, if it still runs, and waits until it
// is gone.
func (p *serverProc) kill() {
	if !p.exited() {
		syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.done
	}
}

// StartServer starts a chubbyd on fresh loopback ports with a fresh data
// directory and waits until it serves as master. If a port turns out to be
// taken, it retries with new ports. The server is killed in t.Cleanup; if t
// failed, the tail of its log is printed.
func StartServer(t testing.TB, opts Options) *Server {
	t.Helper()
	s := newServer(t, opts, t.TempDir())
	var lastErr error
	for attempt := 0; attempt < 5; attempt++ {
		if err := s.pickPorts(); err != nil {
			t.Fatalf("proc: pick ports: %v", err)
		}
		lastErr = s.start(t)
		if lastErr == nil {
			return s
		}
		if !errors.Is(lastErr, errBind) {
			break
		}
		t.Logf("proc: chubbyd %s could not bind (%v); retrying with new ports", s.NodeID, lastErr)
	}
	t.Fatalf("proc: start chubbyd %s: %v\nlog:\n%s", s.NodeID, lastErr, tail(s.Log(), 40))
	return nil
}

// newServer makes a Server (not started) with its data directory and log in
// dir, and registers the cleanup that kills it and, if t failed, prints the
// tail of its log.
func newServer(t testing.TB, opts Options, dir string) *Server {
	t.Helper()
	if opts.NodeID == "" {
		opts.NodeID = "n1"
	}
	if opts.LogLevel == "" {
		opts.LogLevel = "debug"
	}
	s := &Server{NodeID: opts.NodeID, DataDir: filepath.Join(dir, "data"), LogPath: filepath.Join(dir, "chubbyd.log"),
		opts: opts, bins: Build(t)}
	t.Cleanup(func() {
		s.mu.Lock()
		p := s.proc
		s.mu.Unlock()
		if p != nil && !p.exited() {
			syscall.Kill(-p.cmd.Process.Pid, syscall.SIGCONT)
			p.kill()
		}
		if t.Failed() {
			t.Logf("chubbyd %s log (%s), last lines:\n%s", s.NodeID, s.LogPath, tail(s.Log(), 40))
		}
		s.checkRace(t)
	})
	return s
}

func (s *Server) pickPorts() error {
	addrs := make([]string, 4)
	for i := range addrs {
		a, err := FreeAddr()
		if err != nil {
			return err
		}
		addrs[i] = a
	}
	s.RPCAddr, s.RaftAddr, s.GossipAddr, s.HTTPAddr = addrs[0], addrs[1], addrs[2], addrs[3]
	return nil
}

// Args are chubbyd's command-line flags for this server.
func (s *Server) Args() []string {
	args := []string{"-node-id", s.NodeID, "-data-dir", s.DataDir, "-rpc-addr", s.RPCAddr, "-raft-addr", s.RaftAddr,
		"-gossip-addr", s.GossipAddr, "-http-addr", s.HTTPAddr, "-log-level", s.opts.LogLevel}
	if s.opts.Cell != "" {
		args = append(args, "-cell", s.opts.Cell)
	}
	if len(s.opts.Join) > 0 {
		args = append(args, "-join", strings.Join(s.opts.Join, ","))
	}
	if s.opts.BootstrapExpect > 0 {
		args = append(args, "-bootstrap-expect", strconv.Itoa(s.opts.BootstrapExpect))
	}
	args = append(args, s.opts.ExtraArgs...)
	if s.moreArgs != nil {
		args = append(args, s.moreArgs()...)
	}
	return args
}

// errBind: the process exited because a port was taken.
var errBind = errors.New("address already in use")

// start runs one chubbyd process and waits until it is ready.
func (s *Server) start(t testing.TB) error {
	t.Helper()
	p, err := s.launch()
	if err != nil {
		return err
	}
	return s.awaitReady(t, p, time.Now().Add(ReadyTimeout))
}

// launch starts one chubbyd process without waiting for it.
func (s *Server) launch() (*serverProc, error) {
	logf, err := os.OpenFile(s.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	args := s.Args()
	fmt.Fprintf(logf, "=== proc: starting chubbyd %s at %s\n", strings.Join(args, " "), time.Now().Format(time.RFC3339Nano))
	cmd := exec.Command(s.bins.Chubbyd, args...)
	cmd.SysProcAttr = sysProcAttr()
	cmd.Stdout, cmd.Stderr = logf, logf
	err = cmd.Start()
	logf.Close()
	if err != nil {
		return nil, fmt.Errorf("start chubbyd: %w", err)
	}
	p := &serverProc{cmd: cmd, done: make(chan struct{})}
	go func() {
		cmd.Wait()
		p.state, p.exitedAt = cmd.ProcessState, time.Now()
		close(p.done)
	}()
	s.mu.Lock()
	s.proc = p
	s.mu.Unlock()
	s.paused.Store(false)
	return p, nil
}

// awaitReady waits until the process p is ready; a process that is not is
// killed.
func (s *Server) awaitReady(t testing.TB, p *serverProc, deadline time.Time) error {
	t.Helper()
	err := s.waitReady(t, p, deadline)
	if err != nil {
		p.kill()
	}
	return err
}

// exitErr is why p exited before it got to what: a port taken (errBind)
// or something else.
func (s *Server) exitErr(p *serverProc, what string) error {
	if strings.Contains(s.lastStart(), "address already in use") {
		return fmt.Errorf("%w (%s)", errBind, p.state)
	}
	return fmt.Errorf("chubbyd exited before it %s: %s", what, p.state)
}

// pollProc checks cond every interval until it holds, p exits or deadline
// passes, and reports whether cond held.
func pollProc(p *serverProc, deadline time.Time, interval time.Duration, cond func() bool) bool {
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	held := false
	wait.UntilCtx(ctx, wait.Every(interval, func() bool {
		held = !p.exited() && cond()
		return held || p.exited()
	}))
	return held
}

// waitReady polls /status until the server serves as master (a member of a
// multi-server cell: until its Hello names the cell's master), then checks
// that a chubbysh session can be made through it.
func (s *Server) waitReady(t testing.TB, p *serverProc, deadline time.Time) error {
	t.Helper()
	hc := httpClient(s.opts.ClientTLS, time.Second)
	ready := pollProc(p, deadline, 20*time.Millisecond, func() bool {
		return s.member && s.knowsMaster(hc) || !s.member && s.statusMaster(hc)
	})
	switch {
	case p.exited():
		return s.exitErr(p, "was ready")
	case !ready && s.member:
		return fmt.Errorf("chubbyd does not know a master of its cell by %v", deadline.Format(time.StampMilli))
	case !ready:
		return fmt.Errorf("chubbyd not serving as master by %v", deadline.Format(time.StampMilli))
	}
	var r *Result
	if !pollProc(p, deadline, 50*time.Millisecond, func() bool {
		r = RunSh(t, s.RPCAddr, ShOptions{Timeout: 10 * time.Second, Env: s.opts.ShEnv}, "-timeout", "1s", "-json", "session")
		return r.Code == 0
	}) {
		if r == nil { // exited before the check could run
			return s.exitErr(p, "was ready")
		}
		return fmt.Errorf("readiness check failed: %s", r)
	}
	if _, err := OneJSONObject(r.Stdout); err != nil {
		return fmt.Errorf("readiness check: %v", err)
	}
	return nil
}

// URL is the address of path on the server's HTTP endpoint: https on a
// server started with ClientTLS.
func (s *Server) URL(path string) string {
	if s.opts.ClientTLS != nil {
		return "https://" + s.HTTPAddr + path
	}
	return "http://" + s.HTTPAddr + path
}

// httpClient reaches HTTP endpoints, over TLS with cfg's certificate when
// cfg is set.
func httpClient(cfg *tls.Config, timeout time.Duration) *http.Client {
	if cfg == nil {
		return &http.Client{Timeout: timeout}
	}
	return &http.Client{Timeout: timeout, Transport: &http.Transport{TLSClientConfig: cfg}}
}

// knowsMaster: /status answers and the server's Hello names a master (itself
// or another server), which a server knows only once it is part of the raft
// configuration and has heard from the leader.
func (s *Server) knowsMaster(hc *http.Client) bool {
	resp, err := hc.Get(s.URL("/status"))
	if err != nil {
		return false
	}
	resp.Body.Close()
	r, err := s.DialRaw(time.Second)
	if err != nil {
		return false
	}
	defer r.Close()
	h, err := r.Hello(time.Second)
	return err == nil && (h.IsMaster || h.Master != "")
}

func (s *Server) statusMaster(hc *http.Client) bool {
	resp, err := hc.Get(s.URL("/status"))
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	var st struct {
		Master bool `json:"master"`
	}
	return resp.StatusCode == http.StatusOK && json.NewDecoder(resp.Body).Decode(&st) == nil && st.Master
}

// get fetches path from the server's HTTP address, failing t on an error.
func (s *Server) get(t testing.TB, path string) []byte {
	t.Helper()
	hc := httpClient(s.opts.ClientTLS, 5*time.Second)
	resp, err := hc.Get(s.URL(path))
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("read %s: %v", path, err)
	}
	return b
}

// Status fetches /status as a map.
func (s *Server) Status(t testing.TB) map[string]any {
	t.Helper()
	var st map[string]any
	if err := json.Unmarshal(s.get(t, "/status"), &st); err != nil {
		t.Fatalf("decode /status: %v", err)
	}
	return st
}

// Metric reads one unlabelled series from /metrics (0 if it is absent).
func (s *Server) Metric(t testing.TB, name string) float64 {
	t.Helper()
	for _, line := range strings.Split(string(s.get(t, "/metrics")), "\n") {
		if rest, ok := strings.CutPrefix(line, name+" "); ok {
			v, err := strconv.ParseFloat(strings.TrimSpace(rest), 64)
			if err != nil {
				t.Fatalf("/metrics %s: %q", name, line)
			}
			return v
		}
	}
	return 0
}

// MetricWith reads one series of a labelled metric from /metrics, the
// one whose labels are exactly labels, e.g.
// MetricWith(t, "chubby_rejected_total", `limit="waits"`) (0 if it is
// absent).
func (s *Server) MetricWith(t testing.TB, name, labels string) float64 {
	t.Helper()
	return s.Metric(t, name+"{"+labels+"}")
}

// ExitCode is the exit code of the current process once it exited (-1 if
// a signal ended it), and whether it did.
func (s *Server) ExitCode(t testing.TB) (int, bool) {
	t.Helper()
	p := s.current(t)
	if !p.exited() {
		return 0, false
	}
	return p.state.ExitCode(), true
}

// Log is everything the server (all its processes) wrote to stderr.
func (s *Server) Log() string {
	b, _ := os.ReadFile(s.LogPath)
	return string(b)
}

// lastStart is the log of the current process only.
func (s *Server) lastStart() string {
	l := s.Log()
	if i := strings.LastIndex(l, "=== proc: starting chubbyd"); i >= 0 {
		return l[i:]
	}
	return l
}

// checkRace fails t if a race-detector build reported a data race.
func (s *Server) checkRace(t testing.TB) {
	if RaceBinaries() && strings.Contains(s.Log(), "WARNING: DATA RACE") {
		t.Errorf("chubbyd %s reported a data race; see %s:\n%s", s.NodeID, s.LogPath, raceReport(s.Log()))
	}
}

// raceReport is the first data race report in log (from its WARNING line
// to the separator that ends it, at most 120 lines), not the log's tail,
// where the report may have scrolled away.
func raceReport(log string) string {
	i := strings.Index(log, "WARNING: DATA RACE")
	if i < 0 {
		return ""
	}
	lines := strings.Split(log[i:], "\n")
	for j, l := range lines {
		if j > 0 && strings.HasPrefix(l, "==================") {
			return strings.Join(lines[:j], "\n")
		}
		if j == 120 {
			return strings.Join(lines[:j], "\n") + "\n..."
		}
	}
	return strings.Join(lines, "\n")
}

func (s *Server) current(t testing.TB) *serverProc {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc == nil {
		t.Fatalf("chubbyd %s was never started", s.NodeID)
	}
	return s.proc
}

// PID is the process id of the current chubbyd process.
func (s *Server) PID(t testing.TB) int {
	t.Helper()
	return s.current(t).cmd.Process.Pid
}

// Running reports whether the current process has not exited.
func (s *Server) Running(t testing.TB) bool {
	t.Helper()
	return !s.current(t).exited()
}

// Stop sends SIGTERM and waits for the process to exit; it returns the exit
// code (-1 if a signal ended it). A server still running after StopTimeout
// is killed and fails the test.
func (s *Server) Stop(t testing.TB) int {
	t.Helper()
	p := s.current(t)
	if p.exited() {
		return p.state.ExitCode()
	}
	syscall.Kill(p.cmd.Process.Pid, syscall.SIGTERM)
	if s.paused.Swap(false) {
		syscall.Kill(p.cmd.Process.Pid, syscall.SIGCONT)
	}
	return s.waitExit(t, p)
}

// waitExit waits for a SIGTERMed process to exit (see Stop).
func (s *Server) waitExit(t testing.TB, p *serverProc) int {
	t.Helper()
	select {
	case <-p.done:
		return p.state.ExitCode()
	case <-time.After(StopTimeout):
		syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.done
		t.Fatalf("chubbyd %s did not exit within %v of SIGTERM\nlog:\n%s", s.NodeID, StopTimeout, tail(s.lastStart(), 40))
		return -1
	}
}

// Kill sends SIGKILL and waits until the process is gone.
func (s *Server) Kill(t testing.TB) {
	t.Helper()
	s.current(t).kill()
	s.paused.Store(false)
}

// Pause stops the process (SIGSTOP): it holds its sockets but answers
// nothing until Resume. It returns once every thread of the process is
// stopped: kill(2) returns before a thread running on another CPU has
// taken the signal, and in that moment the process may still serve a call.
func (s *Server) Pause(t testing.TB) {
	t.Helper()
	pid := s.PID(t)
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatalf("SIGSTOP chubbyd: %v", err)
	}
	s.paused.Store(true)
	if err := waitStopped(pid, 5*time.Second); err != nil {
		t.Fatalf("SIGSTOP chubbyd %s: %v", s.NodeID, err)
	}
}

// Paused reports whether the server was paused and not resumed since.
func (s *Server) Paused() bool { return s.paused.Load() }

// Resume continues a paused process (SIGCONT).
func (s *Server) Resume(t testing.TB) {
	t.Helper()
	if err := syscall.Kill(s.PID(t), syscall.SIGCONT); err != nil {
		t.Fatalf("SIGCONT chubbyd: %v", err)
	}
	s.paused.Store(false)
}

// Restart stops the server if it runs (SIGTERM) and starts it again with
// the same data directory and ports, waiting until it is ready.
func (s *Server) Restart(t testing.TB) {
	t.Helper()
	if s.Running(t) {
		if code := s.Stop(t); code != 0 {
			t.Fatalf("chubbyd %s exited %d on SIGTERM", s.NodeID, code)
		}
	}
	s.Start(t)
}

// Start starts a stopped server again with the same data directory and
// ports, waiting until it is ready. A port still taken (by a client's
// connection that happened to get it) is retried for a few seconds.
func (s *Server) Start(t testing.TB) {
	t.Helper()
	s.restart(t, "restart", func() error { return s.start(t) })
}

// bindRetry is how long a restart retries a port that is still taken.
const bindRetry = 10 * time.Second

// restart runs attempt, which starts the stopped server, until it succeeds;
// one that fails because a port is still taken is retried for bindRetry,
// any other failure fails t at once.
func (s *Server) restart(t testing.TB, op string, attempt func() error) {
	t.Helper()
	if s.Running(t) {
		t.Fatalf("chubbyd %s is already running", s.NodeID)
	}
	var err error
	wait.Until(bindRetry, wait.Every(200*time.Millisecond, func() bool {
		err = attempt()
		return !errors.Is(err, errBind)
	}))
	if err != nil {
		t.Fatalf("proc: %s chubbyd %s: %v\nlog:\n%s", op, s.NodeID, err, tail(s.lastStart(), 40))
	}
}

// Launch starts a stopped server again (same data directory, ports and
// flags) and returns once it listens — its /status answers — without
// waiting for it to know a master: for a restart while the cell is
// partitioned or short of a quorum, when it may not learn of one for a
// while. A port still taken is retried for a few seconds, as Start does.
func (s *Server) Launch(t testing.TB) {
	t.Helper()
	s.restart(t, "launch", func() error {
		p, err := s.launch()
		if err != nil {
			return err
		}
		if err = s.waitListening(p, time.Now().Add(ReadyTimeout)); err != nil {
			p.kill()
		}
		return err
	})
}

// waitListening polls /status until it answers (every listener of the
// server is bound by then) or the process exits.
func (s *Server) waitListening(p *serverProc, deadline time.Time) error {
	hc := httpClient(s.opts.ClientTLS, time.Second)
	listening := pollProc(p, deadline, 20*time.Millisecond, func() bool {
		resp, err := hc.Get(s.URL("/status"))
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	switch {
	case p.exited():
		return s.exitErr(p, "listened")
	case !listening:
		return fmt.Errorf("chubbyd /status not answering by %v", deadline.Format(time.StampMilli))
	}
	return nil
}

// Sh runs `chubbysh -cell RPCADDR args...` to completion (DefaultShTimeout).
func (s *Server) Sh(t testing.TB, args ...string) *Result {
	t.Helper()
	return RunSh(t, s.RPCAddr, ShOptions{}, args...)
}

// ShStdin runs chubbysh with script on stdin (script mode when args name no
// command).
func (s *Server) ShStdin(t testing.TB, script string, args ...string) *Result {
	t.Helper()
	return RunSh(t, s.RPCAddr, ShOptions{Stdin: strings.NewReader(script)}, args...)
}

// StartSh starts `chubbysh -cell RPCADDR args...` in the background.
func (s *Server) StartSh(t testing.TB, args ...string) *Shell {
	t.Helper()
	return StartSh(t, s.RPCAddr, args...)
}

// RunChubbyd runs chubbyd with args to completion, like RunSh: a process
// still running after timeout is killed and fails the test.
func RunChubbyd(t testing.TB, timeout time.Duration, args ...string) *Result {
	t.Helper()
	bins := Build(t)
	return run(t, bins.Chubbyd, nil, timeout, args...)
}
