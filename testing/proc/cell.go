package proc

import (
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/chubby-dev/chubby/testing/wait"
	"github.com/chubby-dev/chubby/wire"
)

// CellOptions configure StartCell.
type CellOptions struct {
	// Cell is the -cell name of every server (default: chubbyd's, "local").
	Cell string
	// LogLevel is chubbyd's -log-level (default "debug").
	LogLevel string
	// ExtraArgs are appended to every server's flags.
	ExtraArgs []string
	// ServerArgs, if set, returns flags appended to one server's flags
	// (after ExtraArgs), given every server of the cell with its ports
	// picked (s among them). It is called before every start of a server —
	// the first, one on new ports after a bind failure, a restart — so the
	// flags may name the other servers' ports (-raft-route through proxies).
	ServerArgs func(s *Server, cell []*Server) []string
	// ClientTLS and ShEnv: see Options.
	ClientTLS *tls.Config
	ShEnv     []string
}

// Cell is a multi-server cell of chubbyd processes on loopback: n1 is
// started without -join, the others with -join pointing at n1's gossip
// address, all with -bootstrap-expect n. Servers added later (AddServer) join
// the running cell through n1's gossip address with the default
// -bootstrap-expect.
type Cell struct {
	opts CellOptions
	bins Bins

	mu      sync.Mutex
	servers []*Server
	removed map[*Server]bool
}

// StartCell starts n chubbyd servers (n1..nN) that form one cell, and waits
// until every one of them knows the cell's master and a chubbysh session can
// be made. If a port turns out to be taken, the whole cell is started again
// on new ports with fresh data directories. Every process is killed in
// t.Cleanup.
func StartCell(t testing.TB, n int, opts CellOptions) *Cell {
	t.Helper()
	if n < 1 {
		t.Fatalf("proc: a cell of %d servers", n)
	}
	c := &Cell{opts: opts, bins: Build(t), removed: map[*Server]bool{}}
	for i := range n {
		c.servers = append(c.servers, c.newMember(t, fmt.Sprintf("n%d", i+1), n))
	}
	var lastErr error
	for attempt := 0; attempt < 5; attempt++ {
		for _, s := range c.servers {
			if err := s.pickPorts(); err != nil {
				t.Fatalf("proc: pick ports: %v", err)
			}
			os.RemoveAll(s.DataDir)
		}
		for _, s := range c.servers[1:] {
			s.opts.Join = []string{c.servers[0].GossipAddr}
		}
		lastErr = c.startAll(t, c.servers)
		if lastErr == nil {
			return c
		}
		for _, s := range c.servers {
			s.killQuietly()
		}
		if !errors.Is(lastErr, errBind) {
			break
		}
		t.Logf("proc: a server of the cell could not bind (%v); starting the cell again on new ports", lastErr)
	}
	t.Fatalf("proc: start a cell of %d: %v", n, lastErr)
	return nil
}

func (c *Cell) newMember(t testing.TB, name string, expect int) *Server {
	t.Helper()
	opts := Options{NodeID: name, Cell: c.opts.Cell, LogLevel: c.opts.LogLevel, ExtraArgs: c.opts.ExtraArgs, ClientTLS: c.opts.ClientTLS, ShEnv: c.opts.ShEnv}
	if expect > 1 {
		opts.BootstrapExpect = expect
	}
	dir := filepath.Join(t.TempDir(), name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	s := newServer(t, opts, dir)
	s.member = true
	if c.opts.ServerArgs != nil {
		s.moreArgs = func() []string {
			all := c.Servers()
			found := false
			for _, o := range all {
				found = found || o == s
			}
			if !found { // AddServer: not in the list until it started
				all = append(all, s)
			}
			return c.opts.ServerArgs(s, all)
		}
	}
	return s
}

// startAll launches every server in ss, then waits until each is ready.
func (c *Cell) startAll(t testing.TB, ss []*Server) error {
	t.Helper()
	procs := make([]*serverProc, len(ss))
	for i, s := range ss {
		p, err := s.launch()
		if err != nil {
			return fmt.Errorf("%s: %w", s.NodeID, err)
		}
		procs[i] = p
	}
	deadline := time.Now().Add(ReadyTimeout)
	for i, s := range ss {
		if err := s.awaitReady(t, procs[i], deadline); err != nil {
			return fmt.Errorf("%s: %w\nlog:\n%s", s.NodeID, err, tail(s.lastStart(), 30))
		}
	}
	return nil
}

// killQuietly kills the current process, if any, without a test.
func (s *Server) killQuietly() {
	s.mu.Lock()
	p := s.proc
	s.mu.Unlock()
	if p != nil {
		p.kill()
	}
	s.paused.Store(false)
}

// Servers are the cell's servers in the order they were started (removed
// ones included).
func (c *Cell) Servers() []*Server {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]*Server(nil), c.servers...)
}

// Server returns the server named name; an unknown name fails the test.
func (c *Cell) Server(t testing.TB, name string) *Server {
	t.Helper()
	for _, s := range c.Servers() {
		if s.NodeID == name {
			return s
		}
	}
	t.Fatalf("proc: no server %q in the cell", name)
	return nil
}

// Others are the servers of the cell other than those named.
func (c *Cell) Others(not ...*Server) []*Server {
	var out []*Server
	for _, s := range c.Servers() {
		skip := false
		for _, n := range not {
			skip = skip || s == n
		}
		if !skip {
			out = append(out, s)
		}
	}
	return out
}

// Addrs is the comma-separated RPC addresses of every server not removed
// (for chubbysh -cell and $CHUBBY_CELL).
func (c *Cell) Addrs() string { return strings.Join(c.AddrList(), ",") }

// AddrList is the RPC addresses of every server not removed.
func (c *Cell) AddrList() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for _, s := range c.servers {
		if !c.removed[s] {
			out = append(out, s.RPCAddr)
		}
	}
	return out
}

// MarkRemoved records that s was removed from the cell (remove-server): it
// is left out of Addrs and of the master checks.
func (c *Cell) MarkRemoved(s *Server) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.removed[s] = true
}

// live are the servers whose process runs and is not paused, removed ones
// left out.
func (c *Cell) live(t testing.TB) []*Server {
	t.Helper()
	c.mu.Lock()
	ss := append([]*Server(nil), c.servers...)
	removed := make(map[*Server]bool, len(c.removed))
	for s := range c.removed {
		removed[s] = true
	}
	c.mu.Unlock()
	var out []*Server
	for _, s := range ss {
		if !removed[s] && s.Running(t) && !s.Paused() {
			out = append(out, s)
		}
	}
	return out
}

// Sh runs `chubbysh -cell ADDRS args...` (every server of the cell) to
// completion.
func (c *Cell) Sh(t testing.TB, args ...string) *Result {
	t.Helper()
	return RunSh(t, c.Addrs(), ShOptions{}, args...)
}

// ShStdin runs chubbysh against the whole cell with script on stdin.
func (c *Cell) ShStdin(t testing.TB, script string, args ...string) *Result {
	t.Helper()
	return RunSh(t, c.Addrs(), ShOptions{Stdin: strings.NewReader(script)}, args...)
}

// StartSh starts `chubbysh -cell ADDRS args...` in the background.
func (c *Cell) StartSh(t testing.TB, args ...string) *Shell {
	t.Helper()
	return StartSh(t, c.Addrs(), args...)
}

// TrySh runs `chubbysh -cell ADDRS args...` to completion without a test:
// for a goroutine of the test (a background load). A shell still running
// after timeout is killed and reported as an error.
func (c *Cell) TrySh(timeout time.Duration, args ...string) (*Result, error) {
	return runE(c.bins.Chubbysh, &ShOptions{}, timeout, append([]string{"-cell", c.Addrs()}, args...)...)
}

// MasterView is what one server says of the master.
type MasterView struct {
	Server *Server
	// Status is /status's master flag: this server serves as master.
	Status bool
	// Members is the server's Members reply (its raft configuration, the
	// master flag its view of the raft leader).
	Members []wire.Member
	Err     error
}

// MembersMaster is the name of the member flagged master ("" if none; a
// list with several fails as "several").
func (v MasterView) MembersMaster() string {
	name := ""
	for _, m := range v.Members {
		if m.Master {
			if name != "" {
				return "several"
			}
			name = m.Name
		}
	}
	return name
}

// Views asks every live server (running, not paused, not removed) for
// /status and Members.
func (c *Cell) Views(t testing.TB) []MasterView {
	t.Helper()
	hc := httpClient(c.opts.ClientTLS, 2*time.Second)
	var out []MasterView
	for _, s := range c.live(t) {
		v := MasterView{Server: s}
		v.Status, v.Err = s.statusMasterErr(hc)
		if v.Err == nil {
			v.Members, v.Err = s.Members(2 * time.Second)
		}
		out = append(out, v)
	}
	return out
}

// agreedMaster returns the one master every view agrees on: exactly one
// live server says in /status that it serves as master, and every live
// server's Members names it. Otherwise nil and why not.
func agreedMaster(views []MasterView) (*Server, string) {
	var master *Server
	for _, v := range views {
		if v.Err != nil {
			return nil, fmt.Sprintf("%s: %v", v.Server.NodeID, v.Err)
		}
		if v.Status {
			if master != nil {
				return nil, fmt.Sprintf("both %s and %s serve as master", master.NodeID, v.Server.NodeID)
			}
			master = v.Server
		}
	}
	if master == nil {
		return nil, "no live server serves as master"
	}
	for _, v := range views {
		if got := v.MembersMaster(); got != master.NodeID {
			return nil, fmt.Sprintf("%s serves as master but %s's members name %q", master.NodeID, v.Server.NodeID, got)
		}
	}
	return master, ""
}

// Master waits (up to ReadyTimeout) until the live servers agree on one
// master — exactly one serves as master by /status and every one's Members
// names it — and returns it.
func (c *Cell) Master(t testing.TB) *Server {
	t.Helper()
	return c.WaitMaster(t, ReadyTimeout, nil)
}

// WaitMaster waits up to timeout until the live servers agree on one master
// other than not (nil: any) and returns it.
func (c *Cell) WaitMaster(t testing.TB, timeout time.Duration, not *Server) *Server {
	t.Helper()
	var m *Server
	why := ""
	if !wait.Until(timeout, wait.Every(20*time.Millisecond, func() bool {
		m, why = agreedMaster(c.Views(t))
		if m != nil && m == not {
			why = fmt.Sprintf("%s is still the master", m.NodeID)
		}
		return m != nil && m != not
	})) {
		t.Fatalf("proc: no agreed master within %v: %s", timeout, why)
	}
	return m
}

// AddServer starts a new server (n<k+1>) that joins the running cell
// through the gossip address of the first live server, with the default
// -bootstrap-expect, and waits until it knows the master (the master has
// added it to the raft configuration).
func (c *Cell) AddServer(t testing.TB) *Server {
	t.Helper()
	c.mu.Lock()
	name := fmt.Sprintf("n%d", len(c.servers)+1)
	c.mu.Unlock()
	s := c.newMember(t, name, 0)
	var lastErr error
	for attempt := 0; attempt < 5; attempt++ {
		live := c.live(t)
		if len(live) == 0 {
			t.Fatalf("proc: no live server to join")
		}
		if err := s.pickPorts(); err != nil {
			t.Fatalf("proc: pick ports: %v", err)
		}
		os.RemoveAll(s.DataDir)
		s.opts.Join = []string{live[0].GossipAddr}
		lastErr = s.start(t)
		if lastErr == nil {
			c.mu.Lock()
			c.servers = append(c.servers, s)
			c.mu.Unlock()
			return s
		}
		if !errors.Is(lastErr, errBind) {
			break
		}
	}
	t.Fatalf("proc: add server %s: %v\nlog:\n%s", name, lastErr, tail(s.Log(), 40))
	return nil
}

// LaunchJoiner starts a server named name that asks to join the running
// cell through the gossip address of its first live server, with only the
// flags args besides its name, ports, data directory, log level and -join
// (neither the cell's ExtraArgs nor its ServerArgs: a test gives it the TLS
// and gossip material it means to try), and returns at once without
// waiting for anything: for a server the cell must not admit, or one that
// must refuse to start. It is not one of the cell's Servers; it is killed
// in t.Cleanup.
func (c *Cell) LaunchJoiner(t testing.TB, name string, args ...string) *Server {
	t.Helper()
	live := c.live(t)
	if len(live) == 0 {
		t.Fatalf("proc: no live server to join")
	}
	dir := filepath.Join(t.TempDir(), name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	s := newServer(t, Options{NodeID: name, Cell: c.opts.Cell, LogLevel: c.opts.LogLevel, ExtraArgs: args,
		Join: []string{live[0].GossipAddr}, ClientTLS: c.opts.ClientTLS, ShEnv: c.opts.ShEnv}, dir)
	s.member = true
	if err := s.pickPorts(); err != nil {
		t.Fatalf("proc: pick ports: %v", err)
	}
	if _, err := s.launch(); err != nil {
		t.Fatalf("proc: launch %s: %v", name, err)
	}
	return s
}

// StopAll sends SIGTERM to every running server at once and waits for each
// to exit; it returns their exit codes by name.
func (c *Cell) StopAll(t testing.TB) map[string]int {
	t.Helper()
	var ps []*serverProc
	var ss []*Server
	for _, s := range c.Servers() {
		p := s.current(t)
		if p.exited() {
			continue
		}
		syscall.Kill(p.cmd.Process.Pid, syscall.SIGTERM)
		if s.paused.Swap(false) {
			syscall.Kill(p.cmd.Process.Pid, syscall.SIGCONT)
		}
		ps, ss = append(ps, p), append(ss, s)
	}
	codes := map[string]int{}
	for i, s := range ss {
		codes[s.NodeID] = s.waitExit(t, ps[i])
	}
	return codes
}

// StartAll starts every stopped server again (same flags, data directories
// and ports) at once, and waits until each knows the master.
func (c *Cell) StartAll(t testing.TB) {
	t.Helper()
	var stopped []*Server
	for _, s := range c.Servers() {
		if !s.Running(t) {
			stopped = append(stopped, s)
		}
	}
	if err := c.startAll(t, stopped); err != nil {
		t.Fatalf("proc: restart the cell: %v", err)
	}
}

// statusMasterErr is /status's master flag, or why /status did not answer.
func (s *Server) statusMasterErr(hc *http.Client) (bool, error) {
	resp, err := hc.Get(s.URL("/status"))
	if err != nil {
		return false, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return false, fmt.Errorf("/status: %s", resp.Status)
	}
	var st struct {
		Master bool `json:"master"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		return false, err
	}
	return st.Master, nil
}
