package main

// The server under measurement: one chubbyd process on free loopback
// ports with a data directory of its own, its metrics and its CPU time.

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/chubby-dev/chubby/testing/proc"
	"github.com/chubby-dev/chubby/testing/wait"
)

// serverReadyTimeout bounds how long a chubbyd may take to serve as master.
const serverReadyTimeout = 30 * time.Second

// serverStopTimeout bounds how long a SIGTERMed chubbyd may take to exit
// before it is killed.
const serverStopTimeout = 10 * time.Second

// userHZ is the unit of utime and stime in /proc/PID/stat: clock ticks of
// USER_HZ, which Linux fixes at 100 for user space on every architecture.
const userHZ = 100

// chubbyd is one running server.
type chubbyd struct {
	child              *proc.Child
	rpcAddr, httpAddr  string
	dataDir, stderrDir string
	http               *http.Client
}

// startChubbyd starts bin as a one-server cell with its data in a fresh
// directory under dir and waits until it serves as master. A port taken
// between being picked and being bound is retried with new ports.
func startChubbyd(ctx context.Context, bin, dir string) (*chubbyd, error) {
	var lastErr error
	for attempt := range 5 {
		s, err := launchChubbyd(bin, filepath.Join(dir, fmt.Sprintf("chubbyd-%d", attempt)))
		if err != nil {
			return nil, err
		}
		if lastErr = s.waitMaster(ctx); lastErr == nil {
			return s, nil
		}
		s.kill()
		if ctx.Err() != nil || !strings.Contains(s.stderr(), "address already in use") {
			return nil, fmt.Errorf("%w\nchubbyd stderr, last lines:\n%s", lastErr, tail(s.stderr(), 20))
		}
	}
	return nil, lastErr
}

func launchChubbyd(bin, dir string) (*chubbyd, error) {
	addrs := make([]string, 4)
	for i := range addrs {
		a, err := proc.FreeAddr()
		if err != nil {
			return nil, err
		}
		addrs[i] = a
	}
	s := &chubbyd{rpcAddr: addrs[0], httpAddr: addrs[3], dataDir: filepath.Join(dir, "data"), stderrDir: dir,
		http: &http.Client{Timeout: 5 * time.Second}}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, "-node-id", "n1", "-data-dir", s.dataDir, "-rpc-addr", addrs[0], "-raft-addr", addrs[1],
		"-gossip-addr", addrs[2], "-http-addr", addrs[3], "-log-level", "warn")
	c, err := proc.StartProcess("chubbyd", cmd, dir, nil)
	if err != nil {
		return nil, fmt.Errorf("start %s: %w", bin, err)
	}
	s.child = c
	return s, nil
}

// waitMaster polls /status until the server says it is master.
func (s *chubbyd) waitMaster(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, serverReadyTimeout)
	defer cancel()
	var st struct {
		Master bool `json:"master"`
	}
	ok := wait.UntilCtx(ctx, wait.Every(20*time.Millisecond, func() bool {
		if s.child.Exited() {
			return true
		}
		resp, err := s.http.Get("http://" + s.httpAddr + "/status")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		return resp.StatusCode == http.StatusOK && json.NewDecoder(resp.Body).Decode(&st) == nil && st.Master
	}))
	switch {
	case s.child.Exited():
		return errors.New("chubbyd exited before it served")
	case !ok:
		return fmt.Errorf("chubbyd not master within %v", serverReadyTimeout)
	}
	return nil
}

// metrics reads /metrics: every series (name and labels, as written) with
// its value.
func (s *chubbyd) metrics() (map[string]float64, error) {
	resp, err := s.http.Get("http://" + s.httpAddr + "/metrics")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET /metrics: %s", resp.Status)
	}
	m := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			return nil, fmt.Errorf("/metrics: %q: %w", line, err)
		}
		m[line[:i]] = v
	}
	return m, sc.Err()
}

// cpuSeconds is the CPU time (user + system) the server has used so far,
// from /proc/PID/stat.
func (s *chubbyd) cpuSeconds() (float64, error) {
	return processCPU(s.child.PID())
}

// processCPU reads utime + stime of process pid in seconds.
func processCPU(pid int) (float64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// pid (comm) state ppid ... : comm may hold spaces and parentheses, so
	// count fields after its closing parenthesis; utime and stime are
	// fields 14 and 15 of the line, 12 and 13 after the comm.
	st := string(b)
	i := strings.LastIndexByte(st, ')')
	if i < 0 {
		return 0, fmt.Errorf("/proc/%d/stat: %q", pid, st)
	}
	f := strings.Fields(st[i+1:])
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: %d fields after comm", pid, len(f))
	}
	utime, err1 := strconv.ParseUint(f[11], 10, 64)
	stime, err2 := strconv.ParseUint(f[12], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, fmt.Errorf("/proc/%d/stat: %w", pid, err)
	}
	return float64(utime+stime) / userHZ, nil
}

// hostCPU reads the machine's CPU time from /proc/stat: busy (everything
// but idle and iowait) and total, in ticks, summed over every core.
func hostCPU() (busy, total uint64, err error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, 0, err
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 9 || f[0] != "cpu" {
		return 0, 0, fmt.Errorf("/proc/stat: %q", line)
	}
	// user nice system idle iowait irq softirq steal (guest time is
	// already in user and nice).
	for i, v := range f[1:9] {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return 0, 0, fmt.Errorf("/proc/stat: %q: %w", line, err)
		}
		total += n
		if i != 3 && i != 4 {
			busy += n
		}
	}
	return busy, total, nil
}

func (s *chubbyd) stderr() string {
	b, _ := os.ReadFile(s.child.StderrPath)
	return string(b)
}

// stop ends the server: SIGTERM, then SIGKILL if it has not exited within
// serverStopTimeout. Its data stays in dataDir for the caller to remove.
func (s *chubbyd) stop() {
	if s.child.Exited() {
		return
	}
	syscall.Kill(s.child.PID(), syscall.SIGTERM)
	if _, err := s.child.Wait(serverStopTimeout); err != nil {
		s.kill()
	}
	s.child.CloseStdin()
}

func (s *chubbyd) kill() {
	s.child.Kill()
	s.child.CloseStdin()
}

// tail is the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
