// Package procs sets how many processors (GOMAXPROCS) a server's Go code
// runs on by how busy the process is.
//
// A write passes through many goroutines (a connection's reader, a worker,
// raft's loops, the log store, the state machine, the reply); when they
// run on several threads, every hand-off wakes a thread asleep on another
// core, and at low load those wake-ups take longer than the work. With one
// processor a readied goroutine runs next on the thread that readied it.
// Under load the process needs every core. The Controller samples the
// process's CPU time (user and system, every thread) and moves between one
// processor and all of them, with hysteresis, a minimum stay at all of
// them after each rise, and at most one change per sample.
package procs

import (
	"runtime"
	"sync"
	"syscall"
	"time"
)

// Policy is the decision rule, kept apart from the clock and the runtime so
// that tests can drive it sample by sample.
type Policy struct {
	Max int // processors when busy (at least 2 for the controller to act)
	// Up: at one processor, a sample above Up cores of CPU moves to Max.
	Up float64
	// Down: at Max, DownSamples samples in a row below Down cores move
	// to one processor.
	Down        float64
	DownSamples int
	// Hold: samples to stay at Max after a rise before Down may count
	// again; doubled on each rise that follows a fall within Hold samples,
	// up to MaxHold, so a load at the border does not flap.
	Hold, MaxHold int
}

// DefaultPolicy moves to one processor when the process uses less than
// 0.6 of a core for a second (sampled every 100 ms), and back to max as
// soon as it uses more than 0.85 of one; after a rise it stays at max for
// at least 5 s (longer if it flapped), so a server that starts idle runs
// on one processor a second after its start.
func DefaultPolicy(max int) Policy {
	return Policy{Max: max, Up: 0.85, Down: 0.6, DownSamples: 10, Hold: 50, MaxHold: 600}
}

// State is what the policy remembers between samples.
type State struct {
	Procs    int // current processors
	below    int // samples in a row under Down
	hold     int // samples left before Down counts
	holdLen  int // length of the next hold
	sinceLow int // samples since the last fall to one processor
}

// NewState starts at max processors; a process that starts quiet falls
// after DownSamples samples.
func (p Policy) NewState() State {
	return State{Procs: p.Max, holdLen: p.Hold, sinceLow: 1 << 30}
}

// Next takes one sample (cores of CPU used since the last one) and returns
// the processors to run on from now.
func (p Policy) Next(s *State, cores float64) int {
	if p.Max < 2 {
		s.Procs = p.Max
		return s.Procs
	}
	s.sinceLow++
	if s.Procs == 1 {
		if cores > p.Up {
			if s.sinceLow <= s.holdLen { // fell and rose again soon: hold longer
				s.holdLen *= 2
				if s.holdLen > p.MaxHold {
					s.holdLen = p.MaxHold
				}
			} else {
				s.holdLen = p.Hold
			}
			s.Procs, s.hold, s.below = p.Max, s.holdLen, 0
		}
		return s.Procs
	}
	if s.hold > 0 {
		s.hold--
		return s.Procs
	}
	if cores < p.Down {
		s.below++
		if s.below >= p.DownSamples {
			s.Procs, s.below, s.sinceLow = 1, 0, 0
		}
	} else {
		s.below = 0
	}
	return s.Procs
}

// Controller applies a Policy to this process.
type Controller struct {
	policy   Policy
	interval time.Duration
	changed  func(procs int, cores float64)
	stop     chan struct{}
	done     chan struct{}
	once     sync.Once
}

// Start runs a Controller with DefaultPolicy over the current GOMAXPROCS,
// sampling every interval; changed (may be nil) is called on each change.
// It returns nil (and changes nothing) when GOMAXPROCS is below 2.
func Start(interval time.Duration, changed func(procs int, cores float64)) *Controller {
	max := runtime.GOMAXPROCS(0)
	if max < 2 {
		return nil
	}
	c := &Controller{policy: DefaultPolicy(max), interval: interval, changed: changed,
		stop: make(chan struct{}), done: make(chan struct{})}
	go c.loop()
	return c
}

// Stop ends the controller and restores the processors it started with.
func (c *Controller) Stop() {
	if c == nil {
		return
	}
	c.once.Do(func() { close(c.stop) })
	<-c.done
}

func (c *Controller) loop() {
	defer close(c.done)
	defer runtime.GOMAXPROCS(c.policy.Max)
	st := c.policy.NewState()
	t := time.NewTicker(c.interval)
	defer t.Stop()
	lastCPU, lastWall := cpuTime(), time.Now()
	for {
		select {
		case <-c.stop:
			return
		case now := <-t.C:
			cpu := cpuTime()
			wall := now.Sub(lastWall)
			if wall <= 0 {
				continue
			}
			cores := float64(cpu-lastCPU) / float64(wall)
			lastCPU, lastWall = cpu, now
			before := st.Procs
			if n := c.policy.Next(&st, cores); n != before {
				runtime.GOMAXPROCS(n)
				if c.changed != nil {
					c.changed(n, cores)
				}
			}
		}
	}
}

// cpuTime is the process's user and system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
