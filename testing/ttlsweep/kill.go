package main

// Measurement (a): a holder is SIGKILLed; how long until the next waiter
// holds its lock?

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"

	"github.com/chubby-dev/chubby/client"
	"github.com/chubby-dev/chubby/testing/proc"
	"github.com/chubby-dev/chubby/testing/wait"
)

// holderTimeout bounds how long a holder may take to hold its lock.
const holderTimeout = 60 * time.Second

// killResult is one kill → grant measurement.
type killResult struct {
	// GrantedTTL is the TTL the cell granted the holder's session.
	GrantedTTL time.Duration
	// Phase is how long after the waiter was queued the holder was killed.
	Phase time.Duration
	// KillToGrant is from SIGKILL to the waiter's Acquire returning.
	KillToGrant time.Duration
}

// measureKill runs measurement (a) once: a holder child takes the lock
// path without lock-delay in a session asking for ttl; the waiter (a
// session of this process, asking for the cell's default TTL) blocks in
// Acquire on it; at a phase drawn uniformly from [0, granted TTL) the
// holder is SIGKILLed, and the time until the waiter's Acquire returns is
// measured.
func measureKill(ctx context.Context, srv *chubbyd, waiter *client.Client, dir, path string, ttl time.Duration, r *rand.Rand) (killResult, error) {
	var res killResult
	cmd, err := childCommand(childConfig{Role: roleHolder, Server: srv.rpcAddr, TTL: ttl, Path: path})
	if err != nil {
		return res, err
	}
	held := make(chan string, 1)
	holder, err := proc.StartProcess("holder", cmd, dir, func(line string, _ time.Time) {
		if strings.HasPrefix(line, lineHeld+" ") {
			select {
			case held <- line:
			default:
			}
		}
	})
	if err != nil {
		return res, fmt.Errorf("start holder: %w", err)
	}
	defer holder.CloseStdin()
	defer holder.Kill()
	select {
	case line := <-held:
		ms, err := strconv.Atoi(strings.TrimPrefix(line, lineHeld+" ttl_ms="))
		if err != nil {
			return res, fmt.Errorf("holder said %q", line)
		}
		res.GrantedTTL = time.Duration(ms) * time.Millisecond
	case <-holder.Done():
		return res, fmt.Errorf("the holder exited before it held %s; stderr:\n%s", path, tail(holder.Stderr(), 20))
	case <-time.After(holderTimeout):
		return res, fmt.Errorf("the holder did not hold %s within %v; stderr:\n%s", path, holderTimeout, tail(holder.Stderr(), 20))
	case <-ctx.Done():
		return res, ctx.Err()
	}

	h, err := waiter.Open(ctx, path)
	if err != nil {
		return res, fmt.Errorf("waiter: %w", err)
	}
	defer h.Close()
	before, err := acquireCalls(srv)
	if err != nil {
		return res, err
	}
	type grant struct {
		at  time.Time
		err error
	}
	granted := make(chan grant, 1)
	actx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		err := h.Acquire(actx, client.Exclusive, client.LockDelay(client.NoLockDelay))
		granted <- grant{time.Now(), err}
	}()
	// The waiter is queued once the master has counted its Acquire.
	var qerr error
	if !wait.Until(10*time.Second, wait.Every(5*time.Millisecond, func() bool {
		var n float64
		n, qerr = acquireCalls(srv)
		return qerr == nil && n > before
	})) {
		return res, fmt.Errorf("the waiter's Acquire never reached the master (%v)", qerr)
	}
	res.Phase = time.Duration(r.Int64N(int64(res.GrantedTTL)))
	if !wait.Sleep(ctx, res.Phase) {
		return res, ctx.Err()
	}
	killed := time.Now()
	holder.Kill()
	limit := 3*res.GrantedTTL + 30*time.Second
	select {
	case g := <-granted:
		if g.err != nil {
			return res, fmt.Errorf("waiter: %w", g.err)
		}
		res.KillToGrant = g.at.Sub(killed)
	case <-time.After(limit):
		return res, fmt.Errorf("the waiter was not granted %s within %v of the kill", path, limit)
	case <-ctx.Done():
		return res, ctx.Err()
	}
	rctx, rcancel := context.WithTimeout(ctx, 10*time.Second)
	defer rcancel()
	if err := h.Release(rctx); err != nil {
		return res, fmt.Errorf("waiter: %w", err)
	}
	return res, nil
}

// acquireCalls is how many Acquire calls the master has received.
func acquireCalls(srv *chubbyd) (float64, error) {
	m, err := srv.metrics()
	if err != nil {
		return 0, err
	}
	return m[`chubby_rpc_calls_total{method="Acquire"}`], nil
}
