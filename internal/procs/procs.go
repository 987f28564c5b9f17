// Package procs sets how many processors (GOMAXPROCS) a server's Go code
// runs on by how busy the process is.
//
// A write passes through many goroutines (a connection's reader, a worker,
// raft's loops, the log store, the state machine, the reply); when they
// run on several threads, every hand-off wakes a thread asleep on another
// core, and at low load those wake-ups take longer than the work. With one
// processor a readied goroutine runs next on the thread that readied it.
// Under load the process needs every core, and one processor more (Busy).
// The Controller samples the process's CPU time (user and system, every
// thread) and moves between one processor and Busy, with hysteresis, a
// minimum stay at Busy after each rise, and at most one change per sample.
package procs

import (
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Policy is the decision rule, kept apart from the clock and the runtime so
// that tests can drive it sample by sample.
//
// Besides CPU it reads how the server's calls overlap (Sample.Calls,
// Overlapped): a client that sends each call only after the answer to the
// one before (one session locking and unlocking, a lone writer) is served
// sooner by one processor, whatever CPU it costs, since every hand-off of
// its one call stays on one thread (issue 13: one session's lock cycles
// 1,520/s on one processor against 1,290/s on two, at 0.6-0.67 of a core
// either way); two such clients are served faster by two processors
// (2,150 cycles/s against 1,720), though they cost no more CPU.
type Policy struct {
	Max int // processors when busy (at least 2 for the controller to act; the Controller's: Busy)
	// Up: at one processor, a sample above Up cores of CPU moves to Max.
	Up float64
	// Down: at Max, DownSamples samples in a row below Down cores, or
	// serial (see Serial), move to one processor.
	Down        float64
	DownSamples int
	// Hold: samples to stay at Max after a rise before Down may count
	// again; doubled on each rise that follows a fall within Hold samples,
	// up to MaxHold, so a load at the border does not flap.
	Hold, MaxHold int
	// MinCalls: a sample with fewer calls says nothing of their overlap.
	MinCalls uint64
	// Serial: a sample of at least MinCalls calls of which at most this
	// fraction overlapped another, and under Up cores, counts as quiet.
	Serial float64
	// Parallel: a sample of at least MinCalls calls of which more than
	// this fraction overlapped another, above Busy cores, moves to Max at
	// one processor and never counts as quiet at Max. (At one processor
	// such a load can use less CPU than it would at two: 64 sessions
	// locking and unlocking used 0.51 of a core there and ran at a sixth
	// of their speed at two, where they used 1. A write's event to 100
	// readers, 50 writes a second, uses 0.2 of a core and reaches the
	// readers sooner at two: fan-out p50 0.84-0.98 ms against 1.12-1.17.)
	Parallel, Busy float64
}

// Sample is what the controller measured over one interval.
type Sample struct {
	Cores float64 // CPU used, in cores
	// Calls the server started, and how many of them started while another
	// was running (zero when nobody reports calls).
	Calls, Overlapped uint64
}

// overlap is the fraction of s's calls that overlapped another, and
// whether there were enough calls to tell.
func (p Policy) overlap(s Sample) (float64, bool) {
	if s.Calls == 0 || s.Calls < p.MinCalls {
		return 0, false
	}
	return float64(s.Overlapped) / float64(s.Calls), true
}

// DefaultPolicy moves to one processor when the process uses less than
// 0.6 of a core for a second (sampled every 100 ms) and its calls do not
// overlap as below, or less than 0.85 of one while at most a tenth of its
// calls (20 a sample at least) overlap another; and back to max as soon
// as it uses more than 0.85 of one, or more than 0.15 of one while more
// than a third of its calls overlap (a server counts its sends to
// sessions as calls too: a write's event to a hundred readers overlaps).
// After a rise it stays at max for at least 5 s (longer if it flapped), so
// a server that starts idle runs on one processor a second after its
// start.
func DefaultPolicy(max int) Policy {
	return Policy{Max: max, Up: 0.85, Down: 0.6, DownSamples: 10, Hold: 50, MaxHold: 600,
		MinCalls: 20, Serial: 0.1, Parallel: 1.0 / 3, Busy: 0.15}
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

// Next takes one sample and returns the processors to run on from now.
func (p Policy) Next(s *State, x Sample) int {
	if p.Max < 2 {
		s.Procs = p.Max
		return s.Procs
	}
	s.sinceLow++
	frac, known := p.overlap(x)
	parallel := known && frac > p.Parallel && x.Cores > p.Busy
	if s.Procs == 1 {
		if x.Cores > p.Up || parallel {
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
	if (x.Cores < p.Down && !parallel) || (known && frac <= p.Serial && x.Cores < p.Up) {
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
	base     int // GOMAXPROCS before Start, restored by Stop
	interval time.Duration
	changed  func(procs int, x Sample)
	calls    atomic.Pointer[func() (calls, overlapped uint64)]
	stop     chan struct{}
	done     chan struct{}
	once     sync.Once
}

// Start runs a Controller with DefaultPolicy over one processor more than
// the current GOMAXPROCS (Busy), sampling every interval, and starts at
// that many; changed (may be nil) is called on each change with the
// sample that caused it. It returns nil (and changes nothing) when
// GOMAXPROCS is below 2.
func Start(interval time.Duration, changed func(procs int, x Sample)) *Controller {
	base := runtime.GOMAXPROCS(0)
	if base < 2 {
		return nil
	}
	c := &Controller{policy: DefaultPolicy(Busy(base)), base: base, interval: interval, changed: changed,
		stop: make(chan struct{}), done: make(chan struct{})}
	runtime.GOMAXPROCS(c.policy.Max)
	go c.loop()
	return c
}

// Busy is how many processors a busy server runs its Go code on, given Go's
// default (the machine's, or its container's, cores): one more. The raft
// log's writer spends most of a loaded server's time in fdatasync (64
// sessions locking: one write of 0.6 ms after another, the disk busy 80 %
// of the time), a system call that blocks its thread while the thread
// holds a processor; the runtime hands that processor to another thread
// only after a tick of its monitor (20 µs or more), by waking one, and when
// the write returns the writer finds no processor free and waits in the
// run queue, the disk idle, behind the replies it made runnable. With one
// processor more than cores, the other goroutines keep every core busy
// while the writer waits on the disk. 64 sessions' lock cycles on one
// server of this 2-core machine: 3 processors ran 4.7 % and 10 % faster
// than 2 in two sets of 6 rounds (5 and 6 of 6 ahead, order rotated), 4
// no better than 3 (README, "The write path beside etcd").
func Busy(base int) int { return base + 1 }

// CountCalls gives the controller the server's call counters: calls
// started so far and how many of them started while another was running
// (server.Server.CallLoad). Without them it decides by CPU alone. Safe on
// a nil Controller.
func (c *Controller) CountCalls(f func() (calls, overlapped uint64)) {
	if c != nil {
		c.calls.Store(&f)
	}
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
	defer runtime.GOMAXPROCS(c.base)
	st := c.policy.NewState()
	t := time.NewTicker(c.interval)
	defer t.Stop()
	lastCPU, lastWall := cpuTime(), time.Now()
	var lastCalls, lastOverlapped uint64
	var counted *func() (uint64, uint64) // the counters lastCalls came from
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
			x := Sample{Cores: float64(cpu-lastCPU) / float64(wall)}
			lastCPU, lastWall = cpu, now
			if f := c.calls.Load(); f != nil {
				calls, overlapped := (*f)()
				if f == counted && calls >= lastCalls && overlapped >= lastOverlapped {
					x.Calls, x.Overlapped = calls-lastCalls, overlapped-lastOverlapped
				}
				counted, lastCalls, lastOverlapped = f, calls, overlapped
			}
			before := st.Procs
			if n := c.policy.Next(&st, x); n != before {
				runtime.GOMAXPROCS(n)
				if c.changed != nil {
					c.changed(n, x)
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
