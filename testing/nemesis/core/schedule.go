package core

import (
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"time"

	"github.com/chubby-dev/chubby/testing/netproxy"
)

// Kind is a fault a nemesis can inject. The kinds are one vocabulary for
// both targets; each target injects the ones it can (InProcessKinds,
// ProcessKinds), and the order of its list is the order schedules draw
// from.
type Kind int

// The faults. Each is injected at its step's At, held for its Hold and then
// undone (ClientClockJump has nothing to undo: a monotonic clock does not
// go back). Targets that name "the master" resolve when the step runs.
const (
	// KillServer crashes a server (SIGKILL; in process its links are cut
	// first) and restarts it on its data dir when the hold ends. Target: a
	// server or the master of the moment.
	KillServer Kind = iota
	// PauseServer stops a server as SIGSTOP does (in process:
	// cell.Cluster.Pause — every raft link cut both ways, its client links
	// held, its lease clock frozen; on resume the clock jumps by the
	// pause) and continues it.
	PauseServer
	// PauseClient stops one lock client between reading the counter and
	// writing it back, past its TTL + grace + lock-delay, so its session
	// expires and the lock moves on while it sleeps holding a value (in
	// process: links silent, lease clock frozen, worker stopped; with
	// processes: SIGSTOP, aimed right after a read when Pick2 is even).
	PauseClient
	// IsolateFollower cuts one server that is not the master off from the
	// others, both ways (a minority partition).
	IsolateFollower
	// IsolateMaster cuts the master of the moment off from the others, both
	// ways (the majority is partitioned away from it).
	IsolateMaster
	// SplitRandom partitions the servers into random groups (Groups), both
	// ways: a majority and a minority, or no majority at all.
	SplitRandom
	// Bridge cuts the raft links both ways between two servers; each still
	// reaches the third, so each sees a majority, but not the same one.
	Bridge
	// MasterOneWay cuts every link from the master to the others, one way:
	// it still receives everything, but nothing it sends arrives.
	MasterOneWay
	// OneWay cuts a single raft link i→j, one way (in process Target →
	// Peer; with processes a link drawn from Target, or master→follower).
	OneWay
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
	// DelayRaft delays the raft links of one server, or all of them, by
	// Delay.
	DelayRaft
	// ClientClockJump moves a client's lease clock forward by Jump at once
	// (the client believes more time passed: its local lease ends early).
	// Target picks the client: lock clients first, then register clients.
	ClientClockJump
	// ClientDrift runs a client's lease clock at Rate.
	ClientDrift
	// CutClient cuts one client's links: to every server, or (Pick2 odd) to
	// the master of the moment only.
	CutClient
	// DelayClient delays every link of one client by Delay.
	DelayClient
	numKinds
)

var kindNames = [numKinds]string{
	KillServer: "kill-server", PauseServer: "pause-server", PauseClient: "pause-client",
	IsolateFollower: "isolate-follower", IsolateMaster: "isolate-master", SplitRandom: "split-random",
	Bridge: "bridge", MasterOneWay: "master-one-way", OneWay: "one-way",
	ServerClockJump: "server-clock-jump", ServerDrift: "server-drift", SlowDisk: "slow-disk",
	DelayRaft: "delay-raft", ClientClockJump: "client-clock-jump", ClientDrift: "client-drift",
	CutClient: "cut-client", DelayClient: "delay-client",
}

func (k Kind) String() string {
	if k >= 0 && k < numKinds {
		return kindNames[k]
	}
	return fmt.Sprintf("Kind(%d)", int(k))
}

// InProcessKinds are the faults of the in-process cell (testing/nemesis),
// in the order its schedules draw from.
var InProcessKinds = []Kind{KillServer, IsolateFollower, IsolateMaster, PauseClient, SplitRandom, MasterOneWay,
	OneWay, PauseServer, ServerClockJump, ServerDrift, SlowDisk, ClientClockJump, ClientDrift}

// ProcessKinds are the faults of the cell of processes
// (testing/procnemesis), in the order its schedules deal them.
var ProcessKinds = []Kind{KillServer, PauseServer, PauseClient, IsolateFollower, IsolateMaster, Bridge,
	OneWay, DelayRaft, CutClient, DelayClient}

// ClientKind reports whether k acts on clients only: such faults run on
// their own track, across the server faults' episodes, and Run does not
// wait for the cell to settle before them.
func (k Kind) ClientKind() bool {
	switch k {
	case PauseClient, ClientClockJump, ClientDrift, CutClient, DelayClient:
		return true
	}
	return false
}

// Down reports whether k takes a server out (at most one such fault is
// active at a time in an episode schedule, so the cell keeps a majority of
// running servers).
func (k Kind) Down() bool { return k == KillServer || k == PauseServer }

// Cuts reports whether k cuts links (how: Step.Mode, with processes).
func (k Kind) Cuts() bool {
	switch k {
	case IsolateFollower, IsolateMaster, SplitRandom, Bridge, MasterOneWay, OneWay, CutClient:
		return true
	}
	return false
}

// Step is one fault of a Schedule: Kind is injected At (from the start of
// the schedule) and undone Hold later. What the target fields mean depends
// on the kind and on the target, which resolves them when the step runs.
type Step struct {
	At   time.Duration
	Hold time.Duration
	Kind Kind
	// Target picks what the fault acts on. In an episode schedule: for
	// KillServer, PauseServer, ServerClockJump, ServerDrift and SlowDisk,
	// 0..n-1 is that server and n..2n-1 the master of the moment (server
	// Target-n if there is no single master); for IsolateMaster and
	// MasterOneWay the server taken if there is no single master; for
	// IsolateFollower which follower; for OneWay the sender; for client
	// kinds the client. In a dealt schedule a number in [0, 65536) the
	// target reduces (see testing/procnemesis).
	Target int
	Pick2  int           // a second choice (dealt schedules)
	Peer   int           // OneWay in an episode schedule: the receiver
	Groups []int         // SplitRandom: each server's group
	Rate   float64       // ServerDrift, ClientDrift
	Jump   time.Duration // ClientClockJump
	Delay  time.Duration // SlowDisk, DelayRaft, DelayClient
	Mode   netproxy.Mode // how a cut cuts (dealt schedules)
}

func (s Step) String() string {
	var what string
	switch {
	case s.Kind == SplitRandom:
		what = fmt.Sprintf("groups %v", s.Groups)
	case s.Kind == OneWay && s.Peer != s.Target:
		what = fmt.Sprintf("node%d→node%d", s.Target, s.Peer)
	case s.Kind == ServerDrift || s.Kind == ClientDrift:
		what = fmt.Sprintf("pick %d, rate %.4f", s.Target, s.Rate)
	case s.Kind == ClientClockJump:
		what = fmt.Sprintf("pick %d, +%v", s.Target, s.Jump.Round(time.Millisecond))
	case s.Kind == SlowDisk:
		what = fmt.Sprintf("pick %d, +%v per write", s.Target, s.Delay.Round(time.Millisecond))
	case s.Kind == DelayRaft || s.Kind == DelayClient:
		what = fmt.Sprintf("pick %d/%d, %v", s.Target, s.Pick2, s.Delay)
	case s.Kind.Cuts() && s.Mode != netproxy.Pass:
		what = fmt.Sprintf("pick %d/%d, %s", s.Target, s.Pick2, s.Mode)
	default:
		what = fmt.Sprintf("pick %d/%d", s.Target, s.Pick2)
	}
	return fmt.Sprintf("at %6.3fs: %s (%s) for %v", s.At.Seconds(), s.Kind, what, s.Hold.Round(time.Millisecond))
}

// End is when the step's fault is undone.
func (s Step) End() time.Duration { return s.At + s.Hold }

// Bounds limits a generated Schedule.
type Bounds struct {
	Duration time.Duration // every step ends (undone) by then
	// Kinds are the target's faults, in drawing order (InProcessKinds,
	// ProcessKinds).
	Kinds []Kind
	// Deal draws a dealt schedule (see NewSchedule) instead of episodes.
	Deal bool
	// Episodes: MinGap..MaxGap of healthy cell, then 1..MaxOverlap faults,
	// each starting while the episode's earlier ones are still active,
	// held MinHold..MaxHold. Dealt: MinGap..MaxGap between two steps'
	// starts, at most MaxOverlap active at once.
	MinGap, MaxGap   time.Duration
	MinHold, MaxHold time.Duration
	MaxOverlap       int
	Servers          int
	// MaxStall bounds a ServerClockJump's hold (MinHold..MaxStall; 0:
	// MaxHold): long enough to outlast the clients' TTLs, so that the
	// master's stall handling (a fresh lease, not expiry) is what keeps
	// their sessions.
	MaxStall time.Duration
	// Client faults of an episode schedule run on their own track,
	// MinGap..2·MaxGap apart.
	LockClients int // PauseClient targets (0: no PauseClient)
	RegClients  int // further client clock targets, after the lock clients
	// PauseClient holds for PauseMin..min(PauseMax, what is left): past
	// the lock clients' TTL + grace + lock-delay.
	PauseMin, PauseMax time.Duration
	// MaxDrift bounds |Rate-1| of drift faults.
	MaxDrift float64
	// Client clock jumps: up to LockJumpMax for a lock client, RegJumpMax
	// for a register client.
	LockJumpMax, RegJumpMax time.Duration
	MaxDiskDelay            time.Duration
	// MinDelay..MaxDelay is a dealt step's Delay.
	MinDelay, MaxDelay time.Duration
}

// Schedule is the sequence of faults drawn from a seed, by At. The same
// seed and Bounds give the same Schedule.
type Schedule struct {
	Seed  uint64
	Steps []Step
}

// NewSchedule draws a schedule from seed, one of two ways:
//
//   - episodes (the in-process nemesis): server faults come in episodes
//     separated by healthy gaps (Run lets the target settle — one master —
//     before each); within an episode each fault starts while an earlier
//     one is still active, so they overlap. Client faults (PauseClient,
//     ClientClockJump, ClientDrift) run on their own track, overlapping the
//     episodes. At any moment at most one fault of each kind is active, and
//     at most one of KillServer and PauseServer (a majority of servers
//     keeps running).
//   - dealt (b.Deal, the process nemesis): steps drawn one after the other
//     until the next one would not end within b.Duration, at most
//     MaxOverlap active at once; kinds are dealt from a shuffled deck of
//     b.Kinds, reshuffled when it runs out, so a schedule of k ≥
//     len(b.Kinds) steps has every kind. Every step gets a Mode and a
//     Delay; the target resolves Target and Pick2 when it runs.
//
// Every step ends by b.Duration.
func NewSchedule(seed uint64, b Bounds) Schedule {
	if b.Deal {
		return deal(seed, b)
	}
	return episodes(seed, b)
}

// cutModes are the netproxy cuts a dealt step draws from.
var cutModes = []netproxy.Mode{netproxy.Refuse, netproxy.Blackhole, netproxy.Stall}

func betweenFunc(rng *rand.Rand) func(lo, hi time.Duration) time.Duration {
	return func(lo, hi time.Duration) time.Duration {
		if hi <= lo {
			return lo
		}
		return lo + time.Duration(rng.Int64N(int64(hi-lo)))
	}
}

func episodes(seed uint64, b Bounds) Schedule {
	rng := rand.New(rand.NewPCG(seed, 0x6e656d65736973))
	between := betweenFunc(rng)
	var serverKinds, clientKinds []Kind
	for _, k := range b.Kinds {
		switch {
		case k == PauseClient && b.LockClients == 0:
		case k.ClientKind() && b.LockClients+b.RegClients == 0:
		case k.ClientKind():
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
				if a.Kind == k || k.Down() && a.Kind.Down() {
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
		case KillServer, PauseServer, ServerClockJump, ServerDrift, SlowDisk:
			st.Target = rng.IntN(2 * n)
		case IsolateFollower:
			st.Target = rng.IntN(n - 1)
		case IsolateMaster, MasterOneWay:
			st.Target = rng.IntN(n)
		case OneWay:
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
		case PauseClient:
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
				if k != PauseClient || left >= b.PauseMin {
					fit = append(fit, k)
				}
			}
			if len(fit) == 0 {
				continue
			}
			st := Step{At: t, Kind: fit[rng.IntN(len(fit))]}
			if st.Kind == PauseClient {
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

func deal(seed uint64, b Bounds) Schedule {
	rng := rand.New(rand.NewPCG(seed, 0x70726f636e656d))
	between := betweenFunc(rng)
	var deck []Kind
	draw := func() Kind {
		if len(deck) == 0 {
			deck = append([]Kind(nil), b.Kinds...)
			rng.Shuffle(len(deck), func(i, j int) { deck[i], deck[j] = deck[j], deck[i] })
		}
		k := deck[0]
		deck = deck[1:]
		return k
	}
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
		st := Step{At: at, Kind: draw(), Target: rng.IntN(1 << 16), Pick2: rng.IntN(1 << 16)}
		if st.Kind == PauseClient && at+b.PauseMin > b.Duration {
			st.Kind = draw() // no room for a pause past the lease: another kind
			if st.Kind == PauseClient {
				st.Kind = draw()
			}
		}
		lo, hi := b.MinHold, b.MaxHold
		if st.Kind == PauseClient {
			lo, hi = b.PauseMin, b.PauseMax
		}
		st.Hold = min(between(lo, hi), b.Duration-at)
		st.Mode = cutModes[rng.IntN(len(cutModes))]
		st.Delay = between(b.MinDelay, b.MaxDelay)
		s.Steps = append(s.Steps, st)
	}
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

// CountString prints counts by kind ("none" if there are none).
func CountString(m map[Kind]int) string {
	var parts []string
	for k := Kind(0); k < numKinds; k++ {
		if m[k] > 0 {
			parts = append(parts, fmt.Sprintf("%s=%d", k, m[k]))
		}
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, " ")
}
