package main

import (
	"context"
	"sync"
	"time"
)

// Limiter caps the rate at which operations start, across every client of
// a run: each Wait takes the next free start slot, slots one interval
// (1/rate) apart. Slots left unused while operations were slower than the
// rate are not saved up: an idle limiter grants one operation at once,
// then paces again (no bursts). A nil *Limiter does not limit.
type Limiter struct {
	interval time.Duration

	mu   sync.Mutex
	next time.Time // the earliest free slot
}

// NewLimiter returns a limiter of perSec operations a second, or nil (no
// limit) for perSec ≤ 0.
func NewLimiter(perSec float64) *Limiter {
	if perSec <= 0 {
		return nil
	}
	return &Limiter{interval: time.Duration(float64(time.Second) / perSec)}
}

// reserve takes the next slot for an operation that wants to start at
// now, and returns the slot's time (now, or later).
func (l *Limiter) reserve(now time.Time) time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.next.Before(now) {
		l.next = now
	}
	at := l.next
	l.next = at.Add(l.interval)
	return at
}

// Wait blocks until the caller's slot comes, or ctx ends (its error).
func (l *Limiter) Wait(ctx context.Context) error {
	if l == nil {
		return ctx.Err()
	}
	d := time.Until(l.reserve(time.Now()))
	if d <= 0 {
		return ctx.Err()
	}
	if !sleepCtx(ctx, d) {
		return ctx.Err()
	}
	return nil
}
