package nemesis

import (
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"time"
)

// Kind is a fault the nemesis can inject.
type Kind int

// The faults. Each is injected at its step's At, held for its Hold and then
// undone (ClientClockJump has nothing to undo: a monotonic clock does not
// go back). Faults overlap: see NewSchedule for which may be active
// together. Targets that name "the master" resolve when the step runs.
const (
	// KillRestart crashes a server (links cut first, as SIGKILL) and
	// restarts it on its data dir when the hold ends.
	KillRestart Kind = iota
	// IsolateFollower cuts one server that is not the master off from the
	// others, both ways (a minority partition); Target picks the follower.
	IsolateFollower
	// IsolateMaster cuts the master of the moment off from the others, both
	// ways (the majority is partitioned away from it).
	IsolateMaster
	// PauseHolder pauses one lock client (Target picks it) between reading
	// the counter and writing it back: its links go silent, its lease clock
	// stands still and its worker stops — a stop-the-world pause of the
	// client — for a hold drawn past its TTL + grace + lock-delay, so its
	// session expires and the lock moves on.
	PauseHolder
	// SplitRandom partitions the servers into random groups (Groups), both
	// ways: a majority and a minority, or no majority at all.
	SplitRandom
	// MasterOneWay cuts every link from the master to the others, one way:
	// it still receives everything, but nothing it sends arrives.
	MasterOneWay
	// OneWayLink cuts the single raft link Target → Peer, one way.
	OneWayLink
	// ServerPause stops a server as SIGSTOP would (cell.Cluster.Pause):
	// every raft link cut both ways, its client links held, its lease
	// clock frozen; on resume the clock jumps by the pause.
	ServerPause
	// ServerClockJump stalls a server's lease clock for the hold while its
	// raft runs on (cell.Cluster.StallLeaseClock): its client links are
	// held and no lease timer fires; at the end the clock jumps forward by
	// the hold and every lease timer that fell due fires late at once —
	// what a master's lease code sees after a stall on fsync or CPU (DESIGN
	// hazard etcd #15247). A server's clock only ever jumps this way: a
	// forward jump without the time having passed would be a clock running
	// fast, far beyond session.DriftMargin.
	ServerClockJump
	// ServerDrift runs a server's lease clock at Rate (within MaxDrift of
	// real time, inside what session.DriftMargin allows for).
	ServerDrift
	// SlowDisk delays every write to a server's raft log by Delay (a slow
	// fsync).
	SlowDisk
	// ClientClockJump moves a client's lease clock forward by Jump at once
	// (the client believes more time passed: its local lease ends early).
	// Target picks the client: lock clients first, then register clients.
	ClientClockJump
	// ClientDrift runs a client's lease clock at Rate.
	ClientDrift
	numKinds
)

// AllKinds lists every kind, in order.
func AllKinds() []Kind {
	var out []Kind
	for k := Kind(0); k < numKinds; k++ {
		out = append(out, k)
	}
	return out
}

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
	case SplitRandom:
		return "split-random"
	case MasterOneWay:
		return "master-one-way"
	case OneWayLink:
		return "one-way-link"
	case ServerPause:
		return "server-pause"
	case ServerClockJump:
		return "server-clock-jump"
	case ServerDrift:
		return "server-drift"
	case SlowDisk:
		return "slow-disk"
	case ClientClockJump:
		return "client-clock-jump"
	case ClientDrift:
		return "client-drift"
	}
	return fmt.Sprintf("Kind(%d)", int(k))
}

// clientKind reports whether k acts on clients only: such faults run on
// their own track, across the server faults' episodes.
func (k Kind) clientKind() bool {
	return k == PauseHolder || k == ClientClockJump || k == ClientDrift
}

// down reports whether k takes a server out (at most one such fault is
// active at a time, so the cell keeps a majority of running servers).
func (k Kind) down() bool { return k == KillRestart || k == ServerPause }

// Step is one fault of a Schedule: Kind is injected At (from the start of
// the schedule) on Target and held for Hold, then undone.
type Step struct {
	At   time.Duration
	Kind Kind
	// Target: for KillRestart, ServerPause, ServerClockJump, ServerDrift
	// and SlowDisk, 0..n-1 is that server and n..2n-1 the master of the
	// moment (server Target-n if there is no single master); for
	// IsolateMaster and MasterOneWay the server taken if there is no single
	// master; for IsolateFollower which follower; for OneWayLink the
	// sender; for client kinds the client.
	Target int
	Peer   int   // OneWayLink: the receiver
	Groups []int // SplitRandom: each server's group
	Hold   time.Duration
	Rate   float64       // ServerDrift, ClientDrift
	Jump   time.Duration // ClientClockJump
	Delay  time.Duration // SlowDisk
}

func (s Step) String() string {
	var what string
	switch s.Kind {
	case SplitRandom:
		what = fmt.Sprintf("groups %v", s.Groups)
	case OneWayLink:
		what = fmt.Sprintf("node%d→node%d", s.Target, s.Peer)
	case ServerDrift, ClientDrift:
		what = fmt.Sprintf("pick %d, rate %.4f", s.Target, s.Rate)
	case ClientClockJump:
		what = fmt.Sprintf("pick %d, +%v", s.Target, s.Jump.Round(time.Millisecond))
	case SlowDisk:
		what = fmt.Sprintf("pick %d, +%v per write", s.Target, s.Delay.Round(time.Millisecond))
	default:
		what = fmt.Sprintf("pick %d", s.Target)
	}
	return fmt.Sprintf("at %6.3fs: %s (%s) for %v", s.At.Seconds(), s.Kind, what, s.Hold.Round(time.Millisecond))
}

// End is when the step's fault is undone.
func (s Step) End() time.Duration { return s.At + s.Hold }

// Bounds limits a generated Schedule.
type Bounds struct {
	Duration time.Duration // every step ends (undone) by then
	// Server faults come in episodes: MinGap..MaxGap of healthy cell, then
	// 1..MaxOverlap faults, each starting while the episode's earlier ones
	// are still active, held MinHold..MaxHold.
	MinGap, MaxGap   time.Duration
	MinHold, MaxHold time.Duration
	MaxOverlap       int
	Servers          int
	// MaxStall bounds a ServerClockJump's hold (MinHold..MaxStall; 0:
	// MaxHold): long enough to outlast the clients' TTLs, so that the
	// master's stall handling (a fresh lease, not expiry) is what keeps
	// their sessions.
	MaxStall time.Duration
	// Client faults run on their own track, MinGap..2·MaxGap apart.
	LockClients int // PauseHolder targets (0: no PauseHolder)
	RegClients  int // further client clock targets, after the lock clients
	// PauseHolder holds for PauseMin..min(PauseMax, what is left).
	PauseMin, PauseMax time.Duration
	// MaxDrift bounds |Rate-1| of drift faults.
	MaxDrift float64
	// Client clock jumps: up to LockJumpMax for a lock client, RegJumpMax
	// for a register client.
	LockJumpMax, RegJumpMax time.Duration
	MaxDiskDelay            time.Duration
	AllowedKinds            []Kind // nil: all
}

// Schedule is the sequence of faults drawn from a seed, by At. The same
// seed and Bounds give the same Schedule.
type Schedule struct {
	Seed  uint64
	Steps []Step
}

// NewSchedule draws a schedule from seed. Server faults come in episodes
// separated by healthy gaps (Run checks that the cell has one master before
// each); within an episode each fault starts while an earlier one is still
// active, so they overlap. Client faults (PauseHolder, ClientClockJump,
// ClientDrift) run on their own track, overlapping the episodes. At any
// moment at most one fault of each kind is active, and at most one of
// KillRestart and ServerPause (a majority of servers keeps running). Every
// step ends by b.Duration.
func NewSchedule(seed uint64, b Bounds) Schedule {
	rng := rand.New(rand.NewPCG(seed, 0x6e656d65736973))
	between := func(lo, hi time.Duration) time.Duration {
		if hi <= lo {
			return lo
		}
		return lo + time.Duration(rng.Int64N(int64(hi-lo)))
	}
	allowed := map[Kind]bool{}
	for _, k := range b.AllowedKinds {
		allowed[k] = true
	}
	var serverKinds, clientKinds []Kind
	for k := Kind(0); k < numKinds; k++ {
		if b.AllowedKinds != nil && !allowed[k] {
			continue
		}
		switch {
		case k == PauseHolder && b.LockClients == 0:
		case k.clientKind() && b.LockClients+b.RegClients == 0:
		case k.clientKind():
			clientKinds = append(clientKinds, k)
		default:
			serverKinds = append(serverKinds, k)
		}
	}
	s := Schedule{Seed: seed}
	active := func(at time.Duration) []Step {
		var out []Step
		for _, st := range s.Steps {
			if st.At <= at && at < st.End() {
				out = append(out, st)
			}
		}
		return out
	}
	// compatible: kinds allowed to start at a moment when act are active.
	compatible := func(kinds []Kind, act []Step) []Kind {
		var out []Kind
		for _, k := range kinds {
			ok := true
			for _, a := range act {
				if a.Kind == k || k.down() && a.Kind.down() {
					ok = false
				}
			}
			if ok {
				out = append(out, k)
			}
		}
		return out
	}
	rate := func() float64 {
		lo := b.MaxDrift / 4
		r := lo + rng.Float64()*(b.MaxDrift-lo)
		if rng.IntN(2) == 0 {
			return 1 - r
		}
		return 1 + r
	}
	fill := func(st *Step) {
		n := b.Servers
		switch st.Kind {
		case KillRestart, ServerPause, ServerClockJump, ServerDrift, SlowDisk:
			st.Target = rng.IntN(2 * n)
		case IsolateFollower:
			st.Target = rng.IntN(n - 1)
		case IsolateMaster, MasterOneWay:
			st.Target = rng.IntN(n)
		case OneWayLink:
			st.Target = rng.IntN(n)
			st.Peer = (st.Target + 1 + rng.IntN(n-1)) % n
		case SplitRandom:
			// 2 or 3 groups; redraw until some link is cut.
			for {
				st.Groups = make([]int, n)
				k := 2 + rng.IntN(2)
				cut := false
				for i := range st.Groups {
					st.Groups[i] = rng.IntN(k)
					cut = cut || st.Groups[i] != st.Groups[0]
				}
				if cut {
					break
				}
			}
		case PauseHolder:
			st.Target = rng.IntN(b.LockClients)
		case ClientClockJump:
			st.Target = rng.IntN(b.LockClients + b.RegClients)
			max := b.RegJumpMax
			if st.Target < b.LockClients {
				max = b.LockJumpMax
			}
			st.Jump = between(50*time.Millisecond, max)
		case ClientDrift:
			st.Target = rng.IntN(b.LockClients + b.RegClients)
		}
		switch st.Kind {
		case ServerDrift, ClientDrift:
			st.Rate = rate()
		case SlowDisk:
			st.Delay = between(5*time.Millisecond, b.MaxDiskDelay)
		}
	}

	// The server faults' episodes.
	maxOverlap := max(b.MaxOverlap, 1)
	for t := time.Duration(0); len(serverKinds) > 0; {
		t += between(b.MinGap, b.MaxGap)
		if t+b.MinHold > b.Duration {
			break
		}
		k := 1 + rng.IntN(maxOverlap)
		end, last := t, t
		for j := 0; j < k; j++ {
			at := t
			if j > 0 {
				at = between(last, end) // while an earlier fault is active
			}
			kinds := compatible(serverKinds, active(at))
			if len(kinds) == 0 {
				break
			}
			st := Step{At: at, Kind: kinds[rng.IntN(len(kinds))]}
			maxHold := b.MaxHold
			if st.Kind == ServerClockJump && b.MaxStall > 0 {
				maxHold = b.MaxStall
			}
			st.Hold = min(between(b.MinHold, maxHold), b.Duration-at)
			if st.Hold < b.MinHold {
				break
			}
			fill(&st)
			s.Steps = append(s.Steps, st)
			last, end = at, max(end, st.End())
		}
		t = end
	}

	// The client faults' track.
	if len(clientKinds) > 0 {
		for t := time.Duration(0); ; {
			t += between(b.MinGap, 2*b.MaxGap)
			if t+b.MinHold > b.Duration {
				break
			}
			kinds := compatible(clientKinds, active(t))
			left := b.Duration - t
			var fit []Kind
			for _, k := range kinds {
				if k != PauseHolder || left >= b.PauseMin {
					fit = append(fit, k)
				}
			}
			if len(fit) == 0 {
				continue
			}
			st := Step{At: t, Kind: fit[rng.IntN(len(fit))]}
			if st.Kind == PauseHolder {
				st.Hold = between(b.PauseMin, min(b.PauseMax, left))
			} else {
				st.Hold = min(between(b.MinHold, b.MaxHold), left)
			}
			fill(&st)
			s.Steps = append(s.Steps, st)
		}
	}
	sort.SliceStable(s.Steps, func(i, j int) bool { return s.Steps[i].At < s.Steps[j].At })
	return s
}

// Kinds counts the steps of each kind.
func (s Schedule) Kinds() map[Kind]int {
	out := map[Kind]int{}
	for _, st := range s.Steps {
		out[st.Kind]++
	}
	return out
}

func (s Schedule) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "nemesis schedule, seed %d (replay: CHUBBY_NEMESIS_SEED=%d), %d steps:", s.Seed, s.Seed, len(s.Steps))
	for i, st := range s.Steps {
		fmt.Fprintf(&b, "\n  %2d. %s", i+1, st)
	}
	return b.String()
}
