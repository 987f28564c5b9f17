package wait

import (
	"context"
	"testing"
	"time"
)

// Timeout is how long For waits when given 0: far longer than any healthy
// goroutine or process of a cell needs, so hitting it means a bug, not a
// slow machine.
const Timeout = 10 * time.Second

// maxInterval bounds the poll interval: short enough that a waiter notices
// within a few milliseconds, long enough not to spin a core.
const maxInterval = 10 * time.Millisecond

// For polls cond until it is true and fails the test after timeout (Timeout
// if 0) with a message naming what it waited for.
func For(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	if !Until(timeout, cond) {
		t.Fatalf("timed out after %v waiting for %s", orDefault(timeout), what)
	}
}

// Until polls cond like For and reports whether it became true in time, for
// callers that fail with their own message or treat a timeout as an answer.
func Until(timeout time.Duration, cond func() bool) bool {
	ctx, cancel := context.WithTimeout(context.Background(), orDefault(timeout))
	defer cancel()
	return UntilCtx(ctx, cond)
}

// UntilCtx polls cond until it is true (true) or ctx is done (false after a
// last check).
func UntilCtx(ctx context.Context, cond func() bool) bool {
	interval := time.Millisecond
	for {
		if cond() {
			return true
		}
		if !Sleep(ctx, interval) {
			return cond()
		}
		interval = min(2*interval, maxInterval)
	}
}

// Never checks that cond stays false for d of real time. It is the negative
// counterpart of For, only as strong as d, so prefer a positive check where
// one exists.
func Never(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	if Until(d, cond) {
		t.Fatalf("%s happened, but must not have", what)
	}
}

// Sleep waits d or until ctx is done, reporting whether the whole d passed.
// It is for pacing, never for waiting on a result: use For or Until there.
func Sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// Every paces cond for For, Until, UntilCtx or Never: each check starts at
// least interval after the previous one. It is for a condition that is
// costly to check (it starts a process, runs a round of RPCs), which their
// millisecond polling would run back to back and so load the machine the
// cell under test runs on. A wait may overrun its timeout by one interval.
func Every(interval time.Duration, cond func() bool) func() bool {
	var last time.Time
	return func() bool {
		time.Sleep(time.Until(last.Add(interval))) // pacing, not synchronisation
		last = time.Now()
		return cond()
	}
}

// Closed reports, without waiting, whether ch is closed: whether what a
// done or stop channel stands for has happened.
func Closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

func orDefault(d time.Duration) time.Duration {
	if d <= 0 {
		return Timeout
	}
	return d
}
