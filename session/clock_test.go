package session

import (
	"sync"
	"testing"
	"time"
)

var t0 = time.Date(2024, 1, 2, 3, 4, 5, 0, time.UTC)

func TestManualClockNowAdvanceSet(t *testing.T) {
	c := NewManualClock(t0)
	if !c.Now().Equal(t0) {
		t.Fatalf("Now = %v, want %v", c.Now(), t0)
	}
	c.Advance(1500 * time.Millisecond)
	if got := c.Now().Sub(t0); got != 1500*time.Millisecond {
		t.Fatalf("after Advance(1.5s): %v", got)
	}
	c.Advance(0)
	if got := c.Now().Sub(t0); got != 1500*time.Millisecond {
		t.Fatalf("after Advance(0): %v", got)
	}
	c.Set(t0.Add(time.Hour))
	if got := c.Now().Sub(t0); got != time.Hour {
		t.Fatalf("after Set: %v", got)
	}
}

// Timers fire in deadline order, each with the clock set to its deadline,
// and timers with equal deadlines in the order they were armed.
func TestManualClockAfterFuncOrder(t *testing.T) {
	c := NewManualClock(t0)
	type fired struct {
		name string
		at   time.Duration
	}
	var got []fired
	at := func(name string, d time.Duration) {
		c.AfterFunc(d, func() { got = append(got, fired{name, c.Now().Sub(t0)}) })
	}
	at("3s", 3*time.Second)
	at("1s", time.Second)
	at("2s-a", 2*time.Second)
	at("2s-b", 2*time.Second)
	at("10s", 10*time.Second)
	if c.Pending() != 5 {
		t.Fatalf("Pending = %d", c.Pending())
	}
	c.Advance(999 * time.Millisecond)
	if len(got) != 0 {
		t.Fatalf("fired early: %v", got)
	}
	c.Advance(time.Millisecond) // exactly at the first deadline
	c.Advance(5 * time.Second)
	want := []fired{{"1s", time.Second}, {"2s-a", 2 * time.Second}, {"2s-b", 2 * time.Second}, {"3s", 3 * time.Second}}
	if len(got) != len(want) {
		t.Fatalf("fired %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("fired %v, want %v", got, want)
		}
	}
	if d := c.Now().Sub(t0); d != 6*time.Second {
		t.Fatalf("after the timers the clock is at %v, want 6s", d)
	}
	if c.Pending() != 1 {
		t.Fatalf("Pending = %d, want 1 (the 10s timer)", c.Pending())
	}
}

// A callback may use the clock: read it, arm a timer that falls due within
// the same Advance (it fires in that Advance), stop another timer.
func TestManualClockCallbacksUseClock(t *testing.T) {
	c := NewManualClock(t0)
	var order []string
	var victim Timer
	c.AfterFunc(time.Second, func() {
		order = append(order, "first@"+c.Now().Sub(t0).String())
		c.AfterFunc(500*time.Millisecond, func() { order = append(order, "chained@"+c.Now().Sub(t0).String()) })
		if !victim.Stop() {
			t.Error("Stop of a pending timer from a callback returned false")
		}
	})
	victim = c.AfterFunc(1200*time.Millisecond, func() { order = append(order, "victim") })
	c.Advance(2 * time.Second)
	if len(order) != 2 || order[0] != "first@1s" || order[1] != "chained@1.5s" {
		t.Fatalf("order %v", order)
	}
}

func TestManualClockStopReset(t *testing.T) {
	c := NewManualClock(t0)
	n := 0
	tm := c.AfterFunc(time.Second, func() { n++ })
	if tm.C() != nil {
		t.Error("an AfterFunc timer has a channel")
	}
	if !tm.Stop() {
		t.Error("Stop of a pending timer returned false")
	}
	if tm.Stop() {
		t.Error("second Stop returned true")
	}
	c.Advance(2 * time.Second)
	if n != 0 || c.Pending() != 0 {
		t.Fatalf("stopped timer fired (%d) or is pending (%d)", n, c.Pending())
	}

	// Reset of a stopped timer re-arms it relative to now.
	if tm.Reset(time.Second) {
		t.Error("Reset of a stopped timer returned true")
	}
	c.Advance(999 * time.Millisecond)
	if n != 0 {
		t.Fatal("fired early after Reset")
	}
	// Reset of a pending timer pushes it out.
	if !tm.Reset(time.Second) {
		t.Error("Reset of a pending timer returned false")
	}
	c.Advance(999 * time.Millisecond)
	if n != 0 {
		t.Fatal("fired at the old deadline after Reset")
	}
	c.Advance(time.Millisecond)
	if n != 1 {
		t.Fatalf("fired %d times, want 1", n)
	}
	// After firing: Stop reports false, Reset re-arms.
	if tm.Stop() {
		t.Error("Stop after firing returned true")
	}
	if tm.Reset(time.Second) {
		t.Error("Reset after firing returned true")
	}
	c.Advance(time.Second)
	if n != 2 {
		t.Fatalf("fired %d times, want 2", n)
	}
	if c.Pending() != 0 {
		t.Fatalf("Pending = %d", c.Pending())
	}
}

func TestManualClockNewTimer(t *testing.T) {
	c := NewManualClock(t0)
	tm := c.NewTimer(3 * time.Second)
	if tm.C() == nil {
		t.Fatal("NewTimer has no channel")
	}
	c.Advance(2 * time.Second)
	select {
	case v := <-tm.C():
		t.Fatalf("received %v early", v)
	default:
	}
	c.Advance(2 * time.Second)
	select {
	case v := <-tm.C():
		if !v.Equal(t0.Add(3 * time.Second)) {
			t.Fatalf("received %v, want the deadline %v", v, t0.Add(3*time.Second))
		}
	default:
		t.Fatal("nothing received after the deadline")
	}
	// Re-armed after being received: fires again.
	tm.Reset(time.Second)
	c.Advance(time.Second)
	select {
	case <-tm.C():
	default:
		t.Fatal("nothing received after Reset")
	}
}

// Since Go 1.23 (this module's go directive is later) a *time.Timer made by
// NewTimer never delivers a value prepared before a Stop or Reset: both
// drain it, and report true if they did. RealClock timers behave so; the
// ManualClock must too, or a loop that does t.Reset(d); <-t.C() wakes at
// once on a stale tick under test but not in production.
func TestManualClockNoStaleValueAfterStopOrReset(t *testing.T) {
	c := NewManualClock(t0)

	tm := c.NewTimer(time.Second)
	c.Advance(time.Second) // fires; nobody receives
	if !tm.Reset(time.Hour) {
		t.Error("Reset of a fired, unreceived timer returned false (time.Timer returns true)")
	}
	select {
	case v := <-tm.C():
		t.Errorf("received a stale value %v after Reset", v)
	default:
	}
	c.Advance(time.Hour)
	select {
	case v := <-tm.C():
		if !v.Equal(t0.Add(time.Second + time.Hour)) {
			t.Errorf("received %v, want the new deadline", v)
		}
	default:
		t.Error("nothing received at the new deadline")
	}

	tm2 := c.NewTimer(time.Second)
	c.Advance(time.Second)
	if !tm2.Stop() {
		t.Error("Stop of a fired, unreceived timer returned false (time.Timer returns true)")
	}
	select {
	case v := <-tm2.C():
		t.Errorf("received a stale value %v after Stop", v)
	default:
	}
	if tm2.Stop() {
		t.Error("second Stop returned true")
	}
}

// A backwards clock step (Set into the past) fires nothing; deadlines stay
// absolute, so timers fire when the clock reaches them again; timers armed
// after the step count from the new now.
func TestManualClockBackwardsSet(t *testing.T) {
	c := NewManualClock(t0)
	var fired []string
	c.AfterFunc(10*time.Second, func() { fired = append(fired, "a@"+c.Now().Sub(t0).String()) })
	c.Advance(5 * time.Second)
	c.Set(t0.Add(-5 * time.Second))
	if len(fired) != 0 {
		t.Fatalf("fired on a backwards step: %v", fired)
	}
	if got := c.Now().Sub(t0); got != -5*time.Second {
		t.Fatalf("Now after backwards Set: %v", got)
	}
	c.AfterFunc(time.Second, func() { fired = append(fired, "b@"+c.Now().Sub(t0).String()) })
	c.Advance(10 * time.Second) // to +5s
	if len(fired) != 1 || fired[0] != "b@-4s" {
		t.Fatalf("fired %v, want [b@-4s]", fired)
	}
	c.Advance(5 * time.Second) // to +10s
	if len(fired) != 2 || fired[1] != "a@10s" {
		t.Fatalf("fired %v, want a at 10s", fired)
	}
}

func TestManualClockConcurrentUse(t *testing.T) {
	c := NewManualClock(t0)
	var wg sync.WaitGroup
	var mu sync.Mutex
	count := 0
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 200; i++ {
				tm := c.AfterFunc(time.Duration(i%7)*time.Millisecond, func() {
					mu.Lock()
					count++
					mu.Unlock()
				})
				if i%3 == 0 {
					tm.Stop()
				}
				if i%5 == 0 {
					tm.Reset(time.Millisecond)
				}
				_ = c.Now()
				nt := c.NewTimer(time.Millisecond)
				nt.Stop()
			}
		}()
	}
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			default:
				c.Advance(time.Millisecond)
			}
		}
	}()
	wg.Wait()
	close(stop)
	<-done
	c.Advance(time.Second)
	if c.Pending() != 0 {
		t.Fatalf("%d timers still pending after the clock passed every deadline", c.Pending())
	}
}

// RealClock is a thin wrapper over package time; check the wiring only,
// without waiting on anything long.
func TestRealClock(t *testing.T) {
	var c Clock = RealClock{}
	a := c.Now()
	if b := c.Now(); b.Before(a) {
		t.Fatal("RealClock went backwards")
	}
	done := make(chan struct{})
	af := c.AfterFunc(0, func() { close(done) })
	if af.C() != nil {
		t.Error("AfterFunc timer has a channel")
	}
	nt := c.NewTimer(0)
	timeout := time.NewTimer(10 * time.Second)
	defer timeout.Stop()
	for _, ch := range []<-chan struct{}{done} {
		select {
		case <-ch:
		case <-timeout.C:
			t.Fatal("AfterFunc(0) did not run")
		}
	}
	select {
	case <-nt.C():
	case <-timeout.C:
		t.Fatal("NewTimer(0) did not fire")
	}
	long := c.NewTimer(time.Hour)
	if !long.Stop() || long.Reset(time.Hour) || !long.Stop() {
		t.Error("Stop/Reset of a pending real timer")
	}
}
