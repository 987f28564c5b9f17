package hostile

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chubby-dev/chubby/testing/proc"
	"github.com/chubby-dev/chubby/testing/wait"
	"github.com/chubby-dev/chubby/wire"
)

// TestMassExpiryProcess replays issue 17's finding 3 against a real chubbyd:
// a flood of sessions is created and abandoned, and every one of them is
// gone within its TTL plus 30 s of the last one's creation. Before the fix
// a million 60 s sessions took rounds of half-second stalls that the master
// mistook for pauses of its own and answered with fresh leases: 3.3 minutes
// later 796,342 were still alive. The log summarises the expiries instead
// of a line per session.
//
// By default 100,000 sessions of a 10 s TTL; CHUBBY_HOSTILE_FULL=1 runs the
// issue's figures, 1,000,000 sessions of a 60 s TTL.
func TestMassExpiryProcess(t *testing.T) {
	n, ttl := scale(1_000_000, 100_000), 10*time.Second
	if n == 1_000_000 {
		ttl = time.Minute
	}
	const bound = 30 * time.Second
	s := proc.StartServer(t, proc.Options{LogLevel: "info", ExtraArgs: []string{
		"-max-sessions", fmt.Sprint(n + 1000), "-create-session-rate", "10000000",
	}})

	// Create the sessions over a few pipelined connections; none of them
	// ever sends a KeepAlive.
	const conns, window = 8, 500
	start := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, conns)
	for i := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- createSessions(s, n/conns+boolInt(i < n%conns), ttl, window)
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	created := time.Now()
	t.Logf("%d sessions of TTL %v created in %v", n, ttl, created.Sub(start).Round(time.Millisecond))

	sessions := func() int {
		v, _ := s.Status(t)["sessions"].(float64)
		return int(v)
	}
	// Every lease ends by created+ttl; all must be gone bound later.
	deadline := time.Until(created.Add(ttl + bound))
	wait.For(t, deadline, fmt.Sprintf("all %d abandoned sessions to expire", n), func() bool { return sessions() == 0 })
	t.Logf("all gone %v after the last was created (TTL %v)", time.Since(created).Round(time.Millisecond), ttl)

	// A real stall of the process (this machine overloaded) gives leases
	// back the time it took, which the bound above allows for; the
	// master's own expiry work must not be taken for one, round after
	// round, which the bound rules out.
	log := s.Log()
	t.Logf("stall lines in the log: %d", strings.Count(log, "this server stalled"))
	if lines := strings.Count(log, "\n"); lines > 2000 {
		t.Errorf("the expiry of %d sessions wrote %d log lines; want a summary", n, lines)
	}
}

// createSessions creates n sessions of ttl on one connection, with up to
// window CreateSessions in flight.
func createSessions(s *proc.Server, n int, ttl time.Duration, window int) error {
	r, err := s.DialRaw(10 * time.Second)
	if err != nil {
		return err
	}
	defer r.Close()
	if _, err := r.Hello(10 * time.Second); err != nil {
		return err
	}
	var inflight []uint64
	await := func() error {
		id := inflight[0]
		inflight = inflight[1:]
		resp, err := r.Await(id, time.Minute)
		if err != nil {
			return err
		}
		if resp.Code != "" {
			return fmt.Errorf("CreateSession: %s: %s", resp.Code, resp.Error)
		}
		return nil
	}
	for range n {
		id, err := r.Go(wire.MCreateSession, wire.CreateSessionArgs{TTL: int64(ttl)})
		if err != nil {
			return err
		}
		if inflight = append(inflight, id); len(inflight) >= window {
			if err := await(); err != nil {
				return err
			}
		}
	}
	for len(inflight) > 0 {
		if err := await(); err != nil {
			return err
		}
	}
	return nil
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// tail is the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
