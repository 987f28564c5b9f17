package procs

import (
	"runtime"
	"testing"
	"time"
)

func feed(p Policy, s *State, cores float64, n int) int {
	return feedSample(p, s, Sample{Cores: cores}, n)
}

// fallIdle feeds idle samples until s is at one processor.
func fallIdle(t *testing.T, p Policy, s *State) {
	t.Helper()
	if got := feed(p, s, 0, p.DownSamples); got != 1 {
		t.Fatalf("not at one processor after %d idle samples: %d", p.DownSamples, got)
	}
}

func TestPolicyFallsAfterHoldAndQuietSecond(t *testing.T) {
	p := DefaultPolicy(4)
	s := p.NewState()
	// Idle from the start: a quiet second, then one processor.
	if got := feed(p, &s, 0.1, p.DownSamples-1); got != 4 {
		t.Fatalf("after %d quiet samples: %d processors, want 4", p.DownSamples-1, got)
	}
	if got := p.Next(&s, Sample{Cores: 0.1}); got != 1 {
		t.Fatalf("after %d quiet samples: %d processors, want 1", p.DownSamples, got)
	}
}

func TestPolicyBusySampleResetsTheCount(t *testing.T) {
	p := DefaultPolicy(2)
	s := p.NewState()
	feed(p, &s, 0.1, p.DownSamples-1)
	if got := p.Next(&s, Sample{Cores: 1.5}); got != 2 { // one busy sample
		t.Fatalf("busy sample: %d processors, want 2", got)
	}
	if got := feed(p, &s, 0.1, p.DownSamples-1); got != 2 {
		t.Fatalf("count not reset by a busy sample: %d processors", got)
	}
	if got := p.Next(&s, Sample{Cores: 0.1}); got != 1 {
		t.Fatalf("%d processors, want 1", got)
	}
	// Between Down and Up nothing moves either way.
	if got := feed(p, &s, (p.Down+p.Up)/2, 100); got != 1 {
		t.Fatalf("in the band at one processor: %d, want 1", got)
	}
}

func TestPolicyRisesAtOnceAndHoldsLongerWhenFlapping(t *testing.T) {
	p := DefaultPolicy(8)
	s := p.NewState()
	fallIdle(t, p, &s)
	if got := p.Next(&s, Sample{Cores: p.Up + 0.01}); got != 8 {
		t.Fatalf("busy at one processor: %d, want 8", got)
	}
	// It fell and rose within a hold: the next hold is twice as long.
	if got := feed(p, &s, 0, 2*p.Hold); got != 8 {
		t.Fatalf("fell during a doubled hold: %d", got)
	}
	if got := feed(p, &s, 0, p.DownSamples); got != 1 {
		t.Fatalf("after the doubled hold and a quiet second: %d, want 1", got)
	}
	// Flapping again and again: the hold doubles up to MaxHold, no further.
	for i := 0; i < 10; i++ {
		p.Next(&s, Sample{Cores: 2})
		if s.holdLen > p.MaxHold {
			t.Fatalf("hold %d past MaxHold %d", s.holdLen, p.MaxHold)
		}
		feed(p, &s, 0, s.holdLen+p.DownSamples)
		if s.Procs != 1 {
			t.Fatalf("round %d: did not fall after its hold", i)
		}
	}
	if s.holdLen != p.MaxHold {
		t.Fatalf("hold after flapping %d, want %d", s.holdLen, p.MaxHold)
	}
	// A rise long after the last fall starts again from Hold.
	feed(p, &s, 0.7, 2*p.MaxHold)
	p.Next(&s, Sample{Cores: 2})
	if s.holdLen != p.Hold || s.Procs != 8 {
		t.Fatalf("after a long quiet stay: hold %d procs %d, want %d and 8", s.holdLen, s.Procs, p.Hold)
	}
}

func TestPolicyOneProcessorNeverMoves(t *testing.T) {
	p := DefaultPolicy(1)
	s := p.NewState()
	for _, c := range []float64{0, 5, 0, 5} {
		if got := feed(p, &s, c, 200); got != 1 {
			t.Fatalf("max 1: %d processors", got)
		}
	}
}

func TestControllerStopRestoresProcessors(t *testing.T) {
	if runtime.GOMAXPROCS(0) < 2 {
		t.Skip("needs GOMAXPROCS of at least 2")
	}
	before := runtime.GOMAXPROCS(0)
	changes := make(chan int, 8)
	c := Start(time.Millisecond, func(n int, _ Sample) {
		select {
		case changes <- n:
		default:
		}
	})
	if got := runtime.GOMAXPROCS(0); got != before+1 && len(changes) == 0 {
		t.Fatalf("a started controller runs on %d processors, want %d (one more than Go's %d while busy)", got, before+1, before)
	}
	// An idle test process falls to one processor after the hold and a
	// quiet run of samples (about 60 samples of 1 ms).
	select {
	case n := <-changes:
		if n != 1 {
			t.Fatalf("first change to %d processors, want 1", n)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("an idle process did not fall to one processor")
	}
	c.Stop()
	c.Stop() // twice is harmless
	if got := runtime.GOMAXPROCS(0); got != before {
		t.Fatalf("after Stop GOMAXPROCS %d, want %d", got, before)
	}
}

// calls is a sample of n calls of which the fraction frac overlapped
// another, at cores of CPU.
func calls(cores float64, n uint64, frac float64) Sample {
	return Sample{Cores: cores, Calls: n, Overlapped: uint64(float64(n) * frac)}
}

func feedSample(p Policy, s *State, x Sample, n int) int {
	procs := s.Procs
	for i := 0; i < n; i++ {
		procs = p.Next(s, x)
	}
	return procs
}

func TestPolicySerialCallsFallToOneProcessor(t *testing.T) {
	p := DefaultPolicy(2)
	s := p.NewState()
	busyish := (p.Down + p.Up) / 2 // above Down: CPU alone keeps two
	if got := feedSample(p, &s, Sample{Cores: busyish}, 200); got != 2 {
		t.Fatalf("no call counts, %.2f cores: %d processors, want 2", busyish, got)
	}
	// One client waiting for each answer: its calls never overlap.
	serial := calls(busyish, 250, 0)
	if got := feedSample(p, &s, serial, p.DownSamples-1); got != 2 {
		t.Fatalf("after %d serial samples: %d processors, want 2", p.DownSamples-1, got)
	}
	if got := p.Next(&s, serial); got != 1 {
		t.Fatalf("after %d serial samples: %d processors, want 1", p.DownSamples, got)
	}
	// Serial calls at one processor stay there.
	if got := feedSample(p, &s, serial, 200); got != 1 {
		t.Fatalf("serial calls at one processor: %d, want 1", got)
	}
}

func TestPolicySerialButBusyOrFewCallsStay(t *testing.T) {
	p := DefaultPolicy(2)
	s := p.NewState()
	for _, x := range []Sample{
		calls(p.Up+0.1, 250, 0),               // serial but needs more than Up cores
		calls(0.7, 250, p.Serial+0.05),        // overlapping a little more than Serial
		calls(0.7, p.MinCalls-1, 0),           // too few calls to tell
		{Cores: 0.7, Calls: 0, Overlapped: 0}, // nobody counts calls
	} {
		if got := feedSample(p, &s, x, 200); got != 2 {
			t.Fatalf("sample %+v: %d processors, want 2", x, got)
		}
	}
}

func TestPolicyOverlappingCallsRiseAtOnce(t *testing.T) {
	p := DefaultPolicy(4)
	s := p.NewState()
	fallIdle(t, p, &s)
	// Overlapping calls with little CPU, or few calls: no change.
	for _, x := range []Sample{
		calls(p.Busy-0.1, 500, 0.9),
		calls(0.7, p.MinCalls-1, 1),
		calls(0.7, 500, p.Parallel-0.05),
	} {
		if got := feedSample(p, &s, x, 50); got != 1 {
			t.Fatalf("sample %+v: %d processors, want 1", x, got)
		}
	}
	// Two clients at once, at less CPU than Up: every processor.
	if got := p.Next(&s, calls(0.65, 200, 0.8)); got != 4 {
		t.Fatalf("overlapping calls at 0.65 cores: %d processors, want 4", got)
	}
	// They keep it there: overlapping calls are not serial.
	if got := feedSample(p, &s, calls(0.65, 200, 0.8), 3*p.MaxHold); got != 4 {
		t.Fatalf("overlapping calls at max: %d processors, want 4", got)
	}
}

func TestPolicyOverlappingCallsUnderDownStayAtMax(t *testing.T) {
	p := DefaultPolicy(2)
	s := p.NewState()
	// Concurrent calls at less CPU than Down but more than Busy: the load
	// that would rise again at one processor does not fall.
	if got := feedSample(p, &s, calls((p.Busy+p.Down)/2, 300, 0.9), 3*p.MaxHold); got != 2 {
		t.Fatalf("overlapping calls at %.2f cores: %d processors, want 2", (p.Busy+p.Down)/2, got)
	}
	// Under Busy they count as quiet.
	if got := feedSample(p, &s, calls(p.Busy-0.1, 300, 0.9), p.DownSamples); got != 1 {
		t.Fatalf("overlapping calls at %.2f cores: %d processors, want 1", p.Busy-0.1, got)
	}
}
