package session_test

import (
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/chubby-dev/chubby/session"
	"github.com/chubby-dev/chubby/testing/wait"
)

// The SkewClock tests assert orderings (a reading against real readings
// taken before and after it, a timer's value present when Jump returns) and
// never an upper bound on how long a real goroutine takes: where a timer has
// to fire by itself they wait for it with a generous bound (waitFired),
// chosen so that a clock ignoring the change under test would take hours.

const fireBound = 20 * time.Second

var skewEpoch = time.Unix(1_700_000_000, 0)

// waitFired receives from ch within fireBound.
func waitFired(t *testing.T, ch <-chan time.Time, what string) time.Time {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(fireBound):
		t.Fatalf("%s did not fire within %v", what, fireBound)
		return time.Time{}
	}
}

func ready(ch <-chan time.Time) (time.Time, bool) {
	select {
	case v := <-ch:
		return v, true
	default:
		return time.Time{}, false
	}
}

// TestSkewClockRate: at rate r the reading advances r times as fast as real
// time, bounded by real readings taken around it.
func TestSkewClockRate(t *testing.T) {
	for _, rate := range []float64{0.5, 1, 3} {
		c := session.NewSkewClock(skewEpoch)
		c.SetRate(rate)
		r0 := time.Now()
		c1 := c.Now()
		r1 := time.Now()
		<-time.After(20 * time.Millisecond)
		r2 := time.Now()
		c2 := c.Now()
		r3 := time.Now()
		got := c2.Sub(c1)
		lo := time.Duration(float64(r2.Sub(r1))*rate) - time.Microsecond
		hi := time.Duration(float64(r3.Sub(r0))*rate) + time.Microsecond
		if got < lo || got > hi {
			t.Errorf("rate %v: the clock advanced %v while real time advanced between %v and %v", rate, got, r2.Sub(r1), r3.Sub(r0))
		}
	}
}

// TestSkewClockRateTimers: a timer fires when the clock, not real time,
// reaches its deadline — never earlier — and a rate change re-arms pending
// timers: an hour of clock time at rate 1e6 passes in 3.6 ms.
func TestSkewClockRateTimers(t *testing.T) {
	c := session.NewSkewClock(skewEpoch)
	start := c.Now()
	tm := c.NewTimer(time.Hour)
	fired := make(chan time.Time, 1)
	c.AfterFunc(2*time.Hour, func() { fired <- c.Now() })
	c.SetRate(1e6)
	if v := waitFired(t, tm.C(), "a 1 h timer at rate 1e6"); v.Before(start.Add(time.Hour)) {
		t.Errorf("the timer fired at %v, before its deadline %v", v.Sub(start), time.Hour)
	}
	if v := waitFired(t, fired, "a 2 h AfterFunc at rate 1e6"); v.Before(start.Add(2 * time.Hour)) {
		t.Errorf("the callback ran at %v, before its deadline %v", v.Sub(start), 2*time.Hour)
	}

	// Slowing down re-arms too: a 30 ms timer at rate 1e-4 is 5 real
	// minutes away; back at rate 1 it fires.
	c2 := session.NewSkewClock(skewEpoch)
	start = c2.Now()
	slow := c2.NewTimer(30 * time.Millisecond)
	c2.SetRate(1e-4)
	wait.Never(t, 60*time.Millisecond, "a 30 ms timer firing at rate 1e-4", func() bool { return len(slow.C()) > 0 })
	c2.SetRate(1)
	if v := waitFired(t, slow.C(), "the timer back at rate 1"); v.Before(start.Add(30 * time.Millisecond)) {
		t.Errorf("fired at %v, before its deadline", v.Sub(start))
	}
}

// TestSkewClockJump: a jump fires at once every timer it carries past its
// deadline — a channel timer's value is there when Jump returns — and no
// other.
func TestSkewClockJump(t *testing.T) {
	c := session.NewSkewClock(skewEpoch)
	start := c.Now()
	t1 := c.NewTimer(time.Hour)
	t3 := c.NewTimer(3 * time.Hour)
	ran := make(chan time.Time, 1)
	c.AfterFunc(2*time.Hour, func() { ran <- c.Now() })
	c.Jump(150 * time.Minute)
	if c.Now().Sub(start) < 150*time.Minute {
		t.Fatalf("after a jump of 150m the clock reads +%v", c.Now().Sub(start))
	}
	v, ok := ready(t1.C())
	if !ok {
		t.Fatal("a 1 h timer had not fired when a jump of 150 m returned")
	}
	if v.Sub(start) < time.Hour {
		t.Errorf("the 1 h timer carries %v", v.Sub(start))
	}
	if v := waitFired(t, ran, "a 2 h AfterFunc after a jump of 150 m"); v.Sub(start) < 2*time.Hour {
		t.Errorf("the callback saw +%v", v.Sub(start))
	}
	if _, ok := ready(t3.C()); ok {
		t.Fatal("a 3 h timer fired after a jump of 150 m")
	}
	if c.Pending() != 1 {
		t.Fatalf("%d timers pending, want the 3 h one", c.Pending())
	}
	c.Jump(time.Hour)
	if _, ok := ready(t3.C()); !ok {
		t.Fatal("the 3 h timer had not fired when the clock passed it")
	}
	func() {
		defer func() {
			if recover() == nil {
				t.Error("Jump(-1s) did not panic: a monotonic clock never goes back")
			}
		}()
		c.Jump(-time.Second)
	}()
}

// TestSkewClockFreeze: a frozen clock reads the same and fires nothing; on
// Unfreeze it reads what it would have read had it run (it jumps by the
// freeze) and fires what fell due. Freezes nest.
func TestSkewClockFreeze(t *testing.T) {
	c := session.NewSkewClock(skewEpoch)
	tm := c.NewTimer(10 * time.Millisecond)
	c.Freeze()
	rFrozen := time.Now()
	at := c.Now()
	c.Freeze() // nested
	wait.Never(t, 50*time.Millisecond, "a timer firing on a frozen clock", func() bool { return len(tm.C()) > 0 })
	if !c.Now().Equal(at) {
		t.Fatalf("a frozen clock moved by %v", c.Now().Sub(at))
	}
	c.Unfreeze()
	if !c.Frozen() || !c.Now().Equal(at) {
		t.Fatal("one Unfreeze of two thawed the clock")
	}
	c.Unfreeze()
	// The freeze began before rFrozen and after is read after rThawed, so
	// the thawed clock has moved at least rThawed-rFrozen since at.
	rThawed := time.Now()
	after := c.Now()
	if after.Sub(at) < rThawed.Sub(rFrozen) || after.Sub(at) < 50*time.Millisecond {
		t.Errorf("after a freeze of at least 50ms the clock moved by only %v", after.Sub(at))
	}
	if _, ok := ready(tm.C()); !ok {
		t.Fatal("a timer that fell due during the freeze had not fired when Unfreeze returned")
	}
	// Jump and SetRate while frozen take effect, but fire nothing until the
	// thaw.
	t2 := c.NewTimer(time.Hour)
	c.Freeze()
	c.Jump(2 * time.Hour)
	c.SetRate(2)
	if _, ok := ready(t2.C()); ok {
		t.Fatal("a jump on a frozen clock fired a timer")
	}
	c.Unfreeze()
	if _, ok := ready(t2.C()); !ok {
		t.Fatal("the timer the jump passed had not fired when the clock thawed")
	}
}

// TestSkewClockStopReset: Stop and Reset behave as *time.Timer's since Go
// 1.23: no stale value is received after them.
func TestSkewClockStopReset(t *testing.T) {
	c := session.NewSkewClock(skewEpoch)
	tm := c.NewTimer(time.Hour)
	if !tm.Stop() {
		t.Error("Stop of a pending timer returned false")
	}
	c.Jump(2 * time.Hour)
	if _, ok := ready(tm.C()); ok {
		t.Error("a stopped timer fired")
	}
	tm.Reset(time.Minute)
	c.Jump(2 * time.Minute) // fired, value not received
	if !tm.Reset(time.Hour) {
		t.Error("Reset of a fired, unreceived timer returned false")
	}
	if _, ok := ready(tm.C()); ok {
		t.Error("a stale value was received after Reset")
	}
	ran := make(chan time.Time, 1)
	f := c.AfterFunc(time.Minute, func() { ran <- c.Now() })
	f.Stop()
	c.Jump(time.Hour)
	f.Reset(0)
	waitFired(t, ran, "AfterFunc reset to 0")
	if _, ok := ready(tm.C()); !ok {
		t.Error("the timer reset to 1 h had not fired after a jump of 1 h")
	}
	if c.Pending() != 0 {
		t.Errorf("%d timers pending, want none", c.Pending())
	}
}

// TestSkewClockMonotonic: readings never decrease while another goroutine
// changes the rate, jumps and freezes the clock.
func TestSkewClockMonotonic(t *testing.T) {
	c := session.NewSkewClock(skewEpoch)
	stop := make(chan struct{})
	writerDone := make(chan struct{})
	go func() {
		defer close(writerDone)
		rng := rand.New(rand.NewPCG(1, 2))
		frozen := false
		for i := 0; ; i++ {
			select {
			case <-stop:
				if frozen {
					c.Unfreeze()
				}
				return
			default:
			}
			switch i % 3 {
			case 0:
				c.SetRate(0.5 + rng.Float64())
			case 1:
				c.Jump(time.Duration(rng.IntN(1000)) * time.Microsecond)
			case 2:
				if frozen {
					c.Unfreeze()
				} else {
					c.Freeze()
				}
				frozen = !frozen
			}
			c.AfterFunc(time.Duration(rng.IntN(100))*time.Microsecond, func() {})
		}
	}()
	var readers sync.WaitGroup
	for range 2 {
		readers.Add(1)
		go func() {
			defer readers.Done()
			prev := c.Now()
			for range 20000 {
				now := c.Now()
				if now.Before(prev) {
					t.Errorf("the clock went back by %v", prev.Sub(now))
					return
				}
				prev = now
			}
		}()
	}
	readers.Wait()
	close(stop)
	<-writerDone
}
