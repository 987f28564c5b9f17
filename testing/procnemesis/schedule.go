package procnemesis

import (
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"time"

	"github.com/chubby-dev/chubby/testing/netproxy"
)

// Kind is a fault the process-level nemesis injects.
type Kind int

// The faults. Each is injected at its step's start, held for its Hold and
// undone; steps overlap, and what they do composes (see Net, and Run for
// two faults on one process).
const (
	// KillServer SIGKILLs a server (Pick: an index, or the master of the
	// moment) and starts it again on its data directory when the hold ends.
	KillServer Kind = iota
	// PauseServer SIGSTOPs a server (Pick as KillServer) and SIGCONTs it.
	PauseServer
	// PauseClient SIGSTOPs a lock-client process — when Pick2 is even, the
	// moment it has read the counter, so that it sleeps holding a value —
	// and SIGCONTs it.
	PauseClient
	// IsolateFollower cuts every raft link from and to one server that is
	// not the master (a minority partition).
	IsolateFollower
	// IsolateMaster cuts every raft link from and to the master of the
	// moment (the majority partitioned away from it).
	IsolateMaster
	// Bridge cuts the raft links both ways between two servers; each still
	// reaches the third, so each sees a majority, but not the same one (a
	// majority split: the third server bridges them).
	Bridge
	// OneWay cuts one raft link i→j only (the connections i dials to j),
	// leaving j→i up: the master→follower link when Pick says so.
	OneWay
	// DelayRaft delays the raft links of one server, or all of them.
	DelayRaft
	// CutClient cuts one client's links: to every server, or (Pick2 odd) to
	// the master of the moment only.
	CutClient
	// DelayClient delays every link of one client.
	DelayClient
	numKinds
)

// Kinds are every fault kind.
func Kinds() []Kind {
	ks := make([]Kind, numKinds)
	for i := range ks {
		ks[i] = Kind(i)
	}
	return ks
}

func (k Kind) String() string {
	switch k {
	case KillServer:
		return "kill-server"
	case PauseServer:
		return "pause-server"
	case PauseClient:
		return "pause-client"
	case IsolateFollower:
		return "isolate-follower"
	case IsolateMaster:
		return "isolate-master"
	case Bridge:
		return "bridge"
	case OneWay:
		return "one-way"
	case DelayRaft:
		return "delay-raft"
	case CutClient:
		return "cut-client"
	case DelayClient:
		return "delay-client"
	}
	return fmt.Sprintf("Kind(%d)", int(k))
}

func (k Kind) network() bool { return k >= IsolateFollower }

func (k Kind) cuts() bool {
	return k == IsolateFollower || k == IsolateMaster || k == Bridge || k == OneWay || k == CutClient
}

// Step is one fault of a Schedule: Kind injected At (from the schedule's
// start) and undone Hold later. Pick and Pick2 choose the target when the
// step runs (what they mean depends on Kind and on the cell then); Mode is
// how a cut cuts; Delay is a delay's length.
type Step struct {
	At    time.Duration
	Hold  time.Duration
	Kind  Kind
	Pick  int
	Pick2 int
	Mode  netproxy.Mode
	Delay time.Duration
}

func (s Step) String() string {
	var extra string
	switch {
	case s.Kind.cuts():
		extra = " " + s.Mode.String()
	case s.Kind == DelayRaft || s.Kind == DelayClient:
		extra = " " + s.Delay.String()
	}
	return fmt.Sprintf("at %6.2fs for %5.2fs: %s%s (pick %d/%d)", s.At.Seconds(), s.Hold.Seconds(), s.Kind, extra, s.Pick, s.Pick2)
}

// Bounds limit a generated Schedule.
type Bounds struct {
	Duration         time.Duration // every step is undone by then
	MinGap, MaxGap   time.Duration // between two steps' starts
	MinHold, MaxHold time.Duration
	// MinPause and MaxPause bound PauseClient's hold (past the lock
	// clients' TTL + grace + lock-delay, so the lock moves on while one
	// sleeps).
	MinPause, MaxPause time.Duration
	MinDelay, MaxDelay time.Duration
	// MaxOverlap is how many steps may be active at once.
	MaxOverlap int
}

// Schedule is the faults drawn from a seed: the same seed and Bounds give
// the same Schedule.
type Schedule struct {
	Seed  uint64
	Steps []Step // by At
}

// NewSchedule draws steps from seed until the next one would not end
// within b.Duration. Kinds are dealt from a shuffled deck of every kind,
// reshuffled when it runs out, so a schedule of k ≥ numKinds steps has
// every kind.
func NewSchedule(seed uint64, b Bounds) Schedule {
	rng := rand.New(rand.NewPCG(seed, 0x70726f636e656d))
	between := func(lo, hi time.Duration) time.Duration {
		if hi <= lo {
			return lo
		}
		return lo + time.Duration(rng.Int64N(int64(hi-lo)))
	}
	var deck []Kind
	draw := func() Kind {
		if len(deck) == 0 {
			deck = Kinds()
			rng.Shuffle(len(deck), func(i, j int) { deck[i], deck[j] = deck[j], deck[i] })
		}
		k := deck[0]
		deck = deck[1:]
		return k
	}
	modes := []netproxy.Mode{netproxy.Refuse, netproxy.Blackhole, netproxy.Stall}
	s := Schedule{Seed: seed}
	var at time.Duration
	for {
		at += between(b.MinGap, b.MaxGap)
		// At most MaxOverlap steps at once: start when enough have ended.
		for {
			var ends []time.Duration
			for _, st := range s.Steps {
				if end := st.At + st.Hold; end > at {
					ends = append(ends, end)
				}
			}
			if b.MaxOverlap <= 0 || len(ends) < b.MaxOverlap {
				break
			}
			sort.Slice(ends, func(i, j int) bool { return ends[i] < ends[j] })
			at = ends[0]
		}
		if at+b.MinHold > b.Duration {
			break
		}
		st := Step{At: at, Kind: draw(), Pick: rng.IntN(1 << 16), Pick2: rng.IntN(1 << 16)}
		if st.Kind == PauseClient && at+b.MinPause > b.Duration {
			st.Kind = draw() // no room for a pause past the lease: another kind
			if st.Kind == PauseClient {
				st.Kind = draw()
			}
		}
		lo, hi := b.MinHold, b.MaxHold
		if st.Kind == PauseClient {
			lo, hi = b.MinPause, b.MaxPause
		}
		st.Hold = min(between(lo, hi), b.Duration-at)
		st.Mode = modes[rng.IntN(len(modes))]
		st.Delay = between(b.MinDelay, b.MaxDelay)
		s.Steps = append(s.Steps, st)
	}
	return s
}

func (s Schedule) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "process nemesis schedule, seed %d (replay: CHUBBY_NEMESIS_SEED=%d), %d steps:", s.Seed, s.Seed, len(s.Steps))
	for i, st := range s.Steps {
		fmt.Fprintf(&b, "\n  %2d. %s", i+1, st)
	}
	return b.String()
}

// Kinds returns how many steps of each kind the schedule has.
func (s Schedule) Kinds() map[Kind]int {
	out := map[Kind]int{}
	for _, st := range s.Steps {
		out[st.Kind]++
	}
	return out
}
