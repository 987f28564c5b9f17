package main

import (
	"context"
	"testing"
	"time"
)

// TestLimiterReserve: slots are one interval apart, whoever asks; a limiter
// left idle grants at once and does not save slots up for a burst.
func TestLimiterReserve(t *testing.T) {
	l := NewLimiter(20) // 50ms apart
	t0 := time.Unix(1000, 0)
	for i := 0; i < 5; i++ { // five callers at once
		if got, want := l.reserve(t0), t0.Add(time.Duration(i)*50*time.Millisecond); !got.Equal(want) {
			t.Fatalf("slot %d at %v, want %v", i, got.Sub(t0), want.Sub(t0))
		}
	}
	// Idle for a second: the next caller goes at once, the one after waits
	// an interval again.
	t1 := t0.Add(2 * time.Second)
	if got := l.reserve(t1); !got.Equal(t1) {
		t.Errorf("after idle: slot at %v, want now", got.Sub(t1))
	}
	if got := l.reserve(t1); !got.Equal(t1.Add(50 * time.Millisecond)) {
		t.Errorf("after idle, second caller: slot at %v, want +50ms", got.Sub(t1))
	}
	// In any window of length D, at most D·rate + 1 slots start.
	l = NewLimiter(20)
	n := 0
	for now := t0; ; now = now.Add(time.Millisecond) {
		if l.reserve(now).After(t0.Add(time.Second)) {
			break
		}
		n++
	}
	if n > 21 {
		t.Errorf("%d slots in 1s at 20/s", n)
	}
}

func TestLimiterOff(t *testing.T) {
	if NewLimiter(0) != nil || NewLimiter(-1) != nil {
		t.Fatal("a rate ≤ 0 must mean no limiter")
	}
	var l *Limiter
	if err := l.Wait(context.Background()); err != nil {
		t.Errorf("nil limiter: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if l.Wait(ctx) == nil {
		t.Error("nil limiter with an ended ctx: no error")
	}
	slow := NewLimiter(0.001) // the second slot is 1000s away
	slow.Wait(context.Background())
	if slow.Wait(ctx) == nil {
		t.Error("waiting for a far slot with an ended ctx: no error")
	}
}
