package nemesis

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"time"
)

// Kind is a fault the nemesis can inject.
type Kind int

// The faults. Each is held for its step's Hold and then undone (the server
// restarted, the partition healed, the client resumed) before the next step.
const (
	// KillRestart crashes a server (links cut first, as SIGKILL) and
	// restarts it on its data dir when the hold ends. Target picks the
	// server: 0..n-1 by index, n the master of the moment.
	KillRestart Kind = iota
	// IsolateFollower cuts one server that is not the master off from the
	// others (a minority partition); Target picks which follower.
	IsolateFollower
	// IsolateMaster cuts the master of the moment off from the others (the
	// majority is partitioned away from it).
	IsolateMaster
	// PauseHolder pauses one lock client (Target picks it): its links to
	// every server go silent and its worker stops where it is until the
	// hold ends — a stop-the-world pause seen from the cell. The hold is
	// long enough for its session to expire.
	PauseHolder
	numKinds
)

func (k Kind) String() string {
	switch k {
	case KillRestart:
		return "kill+restart"
	case IsolateFollower:
		return "isolate-follower"
	case IsolateMaster:
		return "isolate-master"
	case PauseHolder:
		return "pause-holder"
	}
	return fmt.Sprintf("Kind(%d)", int(k))
}

// Step is one fault of a Schedule: after Gap of healthy cell, Kind is
// injected on Target and held for Hold, then undone.
type Step struct {
	Gap    time.Duration
	Kind   Kind
	Target int // meaning depends on Kind; resolved when the step runs
	Hold   time.Duration
}

func (s Step) String() string {
	target := fmt.Sprintf("pick %d", s.Target)
	return fmt.Sprintf("after %v: %s (%s) for %v", s.Gap.Round(time.Millisecond), s.Kind, target, s.Hold.Round(time.Millisecond))
}

// Bounds limits a generated Schedule.
type Bounds struct {
	Duration     time.Duration // the schedule's steps end (healed) by then
	MinGap       time.Duration // healthy time before each fault
	MaxGap       time.Duration
	MinHold      time.Duration // how long a server fault is held
	MaxHold      time.Duration
	PauseHold    time.Duration // how long PauseHolder is held (past TTL+grace)
	Servers      int           // servers of the cell
	LockClients  int           // clients PauseHolder may pick (0: never)
	PauseWeight  int           // relative weight of PauseHolder (server faults weigh 2 each)
	AllowedKinds []Kind        // nil: all
}

// Schedule is the sequence of faults drawn from a seed. The same seed and
// Bounds give the same Schedule.
type Schedule struct {
	Seed  uint64
	Steps []Step
}

// NewSchedule draws faults from seed until the next one would not end
// within b.Duration.
func NewSchedule(seed uint64, b Bounds) Schedule {
	rng := rand.New(rand.NewPCG(seed, 0x6e656d65736973))
	between := func(lo, hi time.Duration) time.Duration {
		if hi <= lo {
			return lo
		}
		return lo + time.Duration(rng.Int64N(int64(hi-lo)))
	}
	kinds := b.AllowedKinds
	if kinds == nil {
		for k := Kind(0); k < numKinds; k++ {
			kinds = append(kinds, k)
		}
	}
	// A weighted bag of kinds.
	var bag []Kind
	for _, k := range kinds {
		w := 2
		if k == PauseHolder {
			if b.LockClients == 0 {
				continue
			}
			w = b.PauseWeight
		}
		for range w {
			bag = append(bag, k)
		}
	}
	s := Schedule{Seed: seed}
	var at time.Duration
	for len(bag) > 0 {
		st := Step{Gap: between(b.MinGap, b.MaxGap), Kind: bag[rng.IntN(len(bag))]}
		switch st.Kind {
		case KillRestart:
			st.Target = rng.IntN(b.Servers + 1) // n: the master
			st.Hold = between(b.MinHold, b.MaxHold)
		case IsolateFollower:
			st.Target = rng.IntN(b.Servers - 1)
			st.Hold = between(b.MinHold, b.MaxHold)
		case IsolateMaster:
			st.Hold = between(b.MinHold, b.MaxHold)
		case PauseHolder:
			st.Target = rng.IntN(b.LockClients)
			st.Hold = b.PauseHold
		}
		if at+st.Gap+st.Hold > b.Duration {
			// What is left fits at most a short server fault.
			if at+st.Gap+b.MinHold > b.Duration {
				break
			}
			if st.Kind == PauseHolder {
				st.Kind, st.Target = IsolateFollower, 0
			}
			st.Hold = b.MinHold
		}
		at += st.Gap + st.Hold
		s.Steps = append(s.Steps, st)
	}
	return s
}

func (s Schedule) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "nemesis schedule, seed %d (replay: CHUBBY_NEMESIS_SEED=%d), %d steps:", s.Seed, s.Seed, len(s.Steps))
	for i, st := range s.Steps {
		fmt.Fprintf(&b, "\n  %2d. %s", i+1, st)
	}
	return b.String()
}
