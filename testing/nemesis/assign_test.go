package nemesis

// Work assignment under the nemesis (issue 14, acceptance 1): members of a
// client/assign group share items through proxies while a seeded schedule
// kills, pauses, partitions and skews the cell and pauses members past
// their session; each member increments each item it owns in a fenced
// store with the item's sequencer. Afterwards, per item: the store never
// admitted a stale sequencer and lost or repeated no increment
// (core.CheckFencing); the healed group owns every item exactly once; and
// a member killed in the calm after the schedule has its items owned again
// within TTL + lock-delay + 1 s.

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/chubby-dev/chubby/client"
	"github.com/chubby-dev/chubby/client/assign"
	"github.com/chubby-dev/chubby/testing/cell"
	"github.com/chubby-dev/chubby/testing/fencedstore"
	"github.com/chubby-dev/chubby/testing/linear"
	"github.com/chubby-dev/chubby/testing/nemesis/core"
	"github.com/chubby-dev/chubby/testing/wait"
)

// The short run of TestNemesisAssign: one seed whose schedule pauses a
// member past its session (so it dies and rejoins) among server faults.
var assignSeeds = []uint64{3}

const (
	assignDuration = 10 * time.Second
	assignMembers  = 3
	assignItems    = 6
)

// TestNemesisAssign plays each schedule of the plan (CHUBBY_NEMESIS_* as
// TestNemesis) on a fresh cell under the assignment workload.
func TestNemesisAssign(t *testing.T) {
	p, err := core.PlanFromEnv(assignSeeds, assignDuration)
	if err != nil {
		t.Fatal(err)
	}
	for _, seed := range p.Seeds {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			defer func() {
				if t.Failed() {
					t.Logf("FAILED under nemesis seed %d: replay with CHUBBY_NEMESIS_SEED=%d CHUBBY_NEMESIS_SECONDS=%d go test -run TestNemesisAssign ./testing/nemesis",
						seed, seed, int(p.Duration/time.Second))
				}
			}()
			runAssignSchedule(t, seed, p.Duration, p.Long)
		})
	}
}

// assignWorker is one member process: it joins the group through its own
// proxies, and for each item it owns increments the item's counter in the
// item's fenced store (read, think, write read+1, all carrying the item's
// sequencer) until the item's Ctx is done or the item is revoked. When its
// session ends it joins again with a new client (a new name). Pause/Resume
// stop it as SIGSTOP would: links silent, lease clock frozen, its item
// loops stopped between their read and their write.
type assignWorker struct {
	id      int
	dir     string
	proxies []*cell.Proxy
	clock   *cell.SkewClock
	log     hclog.Logger
	stores  []*fencedstore.Store
	now     func() int64

	mu       sync.Mutex
	member   *assign.Member
	holds    []itemHold // every hold the worker was given, by item
	nextHold int
	stops    map[int]chan struct{} // item → closed to stop its loop (revoke)
	loops    sync.WaitGroup
	dead     bool // killed for good: do not rejoin
	paused   bool
	resume   chan struct{}
	frozen   bool
}

// itemHold is a core.Hold of one item's lock.
type itemHold struct {
	item int
	core.Hold
}

func (w *assignWorker) Pause() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.paused {
		return
	}
	w.paused = true
	w.resume = make(chan struct{})
	for _, p := range w.proxies {
		p.Blackhole()
	}
	w.clock.Freeze()
	w.frozen = true
}

func (w *assignWorker) Resume() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.paused {
		return
	}
	w.paused = false
	if w.frozen {
		w.clock.Unfreeze()
		w.frozen = false
	}
	if !w.dead {
		for _, p := range w.proxies {
			p.Heal()
		}
	}
	close(w.resume)
}

// gate blocks while the worker is paused.
func (w *assignWorker) gate() {
	w.mu.Lock()
	ch := w.resume
	paused := w.paused
	w.mu.Unlock()
	if paused {
		<-ch
	}
}

// kill cuts the worker off for good: its session expires, its items move.
func (w *assignWorker) kill() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.dead = true
	for _, p := range w.proxies {
		p.Blackhole()
	}
}

func (w *assignWorker) current() *assign.Member {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.member
}

// run joins (again after each session end) until ctx ends or the worker
// is killed.
func (w *assignWorker) run(ctx context.Context) {
	defer w.loops.Wait()
	for inc := 0; ctx.Err() == nil; inc++ {
		w.mu.Lock()
		dead := w.dead
		w.mu.Unlock()
		if dead {
			return
		}
		cfg := LockConfig
		cfg.Servers, cfg.FixedServers, cfg.Logger, cfg.Clock = cell.ProxyAddrs(w.proxies), true, w.log, w.clock
		dctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		cl, err := client.Dial(dctx, cfg)
		cancel()
		if err != nil {
			wait.Sleep(ctx, 50*time.Millisecond)
			continue
		}
		jctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		mb, err := assign.Join(jctx, cl, w.dir, assignItems, assign.Name(fmt.Sprintf("w%d.%d", w.id, inc)),
			assign.RevokeTimeout(time.Second), assign.Logger(w.log),
			assign.OnAssigned(func(items []assign.Item) { w.assigned(ctx, cl.Session().ID, items) }),
			assign.OnRevoked(func(ctx context.Context, items []assign.Item) { w.revoked(ctx, items) }),
			assign.OnLost(func(items []assign.Item) { w.stopItems(items) }))
		cancel()
		if err != nil {
			cl.Close()
			wait.Sleep(ctx, 50*time.Millisecond)
			continue
		}
		w.mu.Lock()
		w.member = mb
		w.mu.Unlock()
		select {
		case <-mb.Done():
		case <-ctx.Done():
			lctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			mb.Leave(lctx)
			cancel()
		}
		cl.Close()
	}
}

// assigned starts a loop per item, each a new hold.
func (w *assignWorker) assigned(ctx context.Context, sid uint64, items []assign.Item) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, it := range items {
		w.nextHold++
		now := w.now()
		h := itemHold{item: it.N, Hold: core.Hold{Worker: w.id, ID: w.nextHold, Session: sid, Gen: it.Seq.Gen,
			AcqCall: now, AcqRet: now, RelCall: math.MaxInt64}}
		w.holds = append(w.holds, h)
		stop := make(chan struct{})
		w.stops[it.N] = stop
		w.loops.Add(1)
		go w.work(ctx, it, h.ID, stop)
	}
}

// revoked stops the items' loops (after their step) and ends their holds.
func (w *assignWorker) revoked(ctx context.Context, items []assign.Item) {
	w.stopItems(items)
	now := w.now()
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, it := range items {
		for i := len(w.holds) - 1; i >= 0; i-- {
			if h := &w.holds[i]; h.item == it.N && h.Gen == it.Seq.Gen && h.RelCall == math.MaxInt64 {
				// The release follows; whether it succeeds is not known
				// here, so the hold is not counted as confirmed released
				// (RelOK false).
				h.RelCall = now
				break
			}
		}
	}
}

func (w *assignWorker) stopItems(items []assign.Item) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, it := range items {
		if ch, ok := w.stops[it.N]; ok {
			close(ch)
			delete(w.stops, it.N)
		}
	}
}

// work increments item it's counter while the hold lasts.
func (w *assignWorker) work(ctx context.Context, it assign.Item, hold int, stop chan struct{}) {
	defer w.loops.Done()
	store, tag := w.stores[it.N], fencedstore.Tag{Worker: w.id, Hold: hold}
	for ctx.Err() == nil && it.Ctx.Err() == nil && !closed(stop) {
		s, err := store.Read(core.CounterKey, it.Seq, tag)
		if err != nil {
			return // refused: a newer owner wrote
		}
		v, _ := strconv.Atoi(s)
		wait.Sleep(ctx, time.Millisecond)
		w.gate() // a pause stops the worker here, between its read and its write
		if err := store.Write(core.CounterKey, strconv.Itoa(v+1), it.Seq, tag); err != nil {
			return
		}
		wait.Sleep(ctx, 3*time.Millisecond)
	}
}

func closed(ch chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

func runAssignSchedule(t *testing.T, seed uint64, dur time.Duration, long bool) {
	c := cell.StartCluster(t, 3, cell.WithSkewClocks())
	b := bounds(dur, c.N(), long)
	b.LockClients, b.RegClients = assignMembers, 0
	sched := core.NewSchedule(seed, b)
	t.Log(sched)

	rec := linear.NewRecorder()
	dir := c.Path("work")
	run := startAssignWorkers(t, c, dir, true, rec.Now)
	defer run.stopAll()
	workers := run.workers
	stopAll := run.stopAll
	pausers := make([]Pauser, len(workers))
	var clocks []*cell.SkewClock
	for i, w := range workers {
		pausers[i] = w
		clocks = append(clocks, w.clock)
	}

	start := time.Now()
	tally := (&Target{T: t, Cluster: c, Holders: pausers, Clocks: clocks}).Run(sched, rec)
	wait.Sleep(context.Background(), time.Until(start.Add(dur))) // pacing: the healed cell runs to the end of the schedule
	t.Logf("seed %d: faults: %s", seed, tally)

	// Healed: every item owned exactly once, as the table says.
	obs := c.Dial(t, client.Config{})
	live := func(ws []*assignWorker) []*assign.Member {
		var out []*assign.Member
		for _, w := range ws {
			if mb := w.current(); mb != nil && !wait.Closed(mb.Done()) {
				out = append(out, mb)
			}
		}
		return out
	}
	settled := func(ws []*assignWorker) (bool, string) {
		tab, err := assign.ReadTable(context.Background(), obs, dir)
		if err != nil {
			return false, err.Error()
		}
		mbs := live(ws)
		var names []string
		owner := map[int]string{}
		for _, mb := range mbs {
			names = append(names, mb.Name())
			cur := mb.Current()
			if cur.Epoch != tab.Epoch || !slices.Equal(cur.Numbers(), tab.Of(mb.Name())) {
				return false, fmt.Sprintf("%s holds %v at epoch %d; the table (epoch %d) gives it %v", mb.Name(), cur.Numbers(), cur.Epoch, tab.Epoch, tab.Of(mb.Name()))
			}
			for _, n := range cur.Numbers() {
				if o, dup := owner[n]; dup {
					return false, fmt.Sprintf("item %d owned by %s and %s", n, o, mb.Name())
				}
				owner[n] = mb.Name()
			}
		}
		slices.Sort(names)
		if len(mbs) != len(ws) || !slices.Equal(names, tab.Members) {
			return false, fmt.Sprintf("live members %v, table members %v", names, tab.Members)
		}
		if len(owner) != assignItems {
			return false, fmt.Sprintf("%d of %d items owned", len(owner), assignItems)
		}
		return true, ""
	}
	var why string
	if !wait.Until(20*time.Second, func() (ok bool) { ok, why = settled(workers); return ok }) {
		t.Fatalf("seed %d: after the schedule healed, the group did not own every item exactly once: %s", seed, why)
	}

	// A member dies in the calm: its items are owned again within TTL +
	// lock-delay + 1 s.
	victim := workers[0]
	vItems := victim.current().Current().Numbers()
	cut := time.Now()
	victim.kill()
	bound := LockConfig.SessionTTL + LockConfig.LockDelay + time.Second
	var took time.Duration
	if !wait.Until(20*time.Second, func() bool {
		have := map[int]bool{}
		for _, mb := range live(workers[1:]) {
			for _, n := range mb.Current().Numbers() {
				have[n] = true
			}
		}
		for _, n := range vItems {
			if !have[n] {
				return false
			}
		}
		took = time.Since(cut)
		return true
	}) {
		t.Fatalf("seed %d: the killed member's items %v were not owned again", seed, vItems)
	}
	t.Logf("seed %d: killed member 0 (items %v); owned again after %v (bound %v)", seed, vItems, took.Round(time.Millisecond), bound)
	if took > bound {
		t.Errorf("seed %d: the killed member's items owned again after %v, bound TTL + lock-delay + 1 s = %v", seed, took, bound)
	}
	if !wait.Until(20*time.Second, func() (ok bool) { ok, why = settled(workers[1:]); return ok }) {
		t.Fatalf("seed %d: after the kill, the others did not own every item exactly once: %s", seed, why)
	}
	stopAll()

	// Fencing, per item.
	bad, summary := run.checkFencing()
	for _, v := range bad {
		t.Errorf("seed %d: %s", seed, v)
	}
	for _, line := range summary {
		t.Logf("seed %d: %s", seed, line)
	}
}

// assignRun is the assignment workload: its workers and the items' stores.
type assignRun struct {
	workers []*assignWorker
	stores  []*fencedstore.Store
	stop    context.CancelFunc
	wg      sync.WaitGroup
}

// startAssignWorkers starts assignMembers workers on c, each through its
// own proxies, sharing assignItems items under dir, with a store per item
// (fenced or not), until stopAll.
func startAssignWorkers(t *testing.T, c *cell.Cluster, dir string, fenced bool, now func() int64) *assignRun {
	r := &assignRun{stores: make([]*fencedstore.Store, assignItems)}
	for i := range r.stores {
		r.stores[i] = core.NewCounterStore(fenced, now)
	}
	var ctx context.Context
	ctx, r.stop = context.WithCancel(context.Background())
	for i := range assignMembers {
		w := &assignWorker{id: i, dir: dir, proxies: c.Proxies(t), clock: cell.NewSkewClock(time.Now()), log: c.Logger().Named(fmt.Sprintf("member%d", i)),
			stores: r.stores, now: now, stops: map[int]chan struct{}{}}
		r.workers = append(r.workers, w)
		r.wg.Add(1)
		go func() {
			defer r.wg.Done()
			w.run(ctx)
		}()
	}
	return r
}

// stopAll stops the workers (they leave the group) and waits for them.
func (r *assignRun) stopAll() {
	r.stop()
	r.wg.Wait()
}

// checkFencing checks each item's history with core.CheckFencing: the
// holds the workers were given (AcqCall = AcqRet = when OnAssigned
// reported them; RelCall when OnRevoked did, RelOK false: the release's
// outcome is the member's), the item store's admitted operations and its
// counter. It returns the violations and a summary.
func (r *assignRun) checkFencing() (bad, summary []string) {
	var holds []itemHold
	for _, w := range r.workers {
		w.mu.Lock()
		holds = append(holds, w.holds...)
		w.mu.Unlock()
	}
	totalWrites, totalRefused := 0, 0
	for i, s := range r.stores {
		var hs []core.Hold
		for _, h := range holds {
			if h.item == i {
				hs = append(hs, h.Hold)
			}
		}
		ops, final, rejected := core.CounterSnapshot(s)
		for _, v := range core.CheckFencing(hs, ops, final) {
			bad = append(bad, fmt.Sprintf("item %d: fencing: %s", i, v))
		}
		if final == 0 {
			bad = append(bad, fmt.Sprintf("item %d was never incremented", i))
		}
		totalWrites += final
		totalRefused += rejected
		summary = append(summary, fmt.Sprintf("item %d: %d holds, counter %d, store refused %d", i, len(hs), final, rejected))
	}
	summary = append(summary, fmt.Sprintf("%d holds, %d increments admitted, %d stale operations refused", len(holds), totalWrites, totalRefused))
	return bad, summary
}

// TestUnfencedAssignPauseLosesIncrement is the negative control of
// TestNemesisAssign's fencing check: the same workload against stores
// that ignore sequencers, with one member paused mid-increment past its
// session's TTL, grace and lock-delay. Its items move on, their new owners
// increment, and the paused member's writes of stale values are admitted
// on waking: core.CheckFencing must report lost increments.
func TestUnfencedAssignPauseLosesIncrement(t *testing.T) {
	c := cell.StartCluster(t, 3)
	rec := linear.NewRecorder()
	run := startAssignWorkers(t, c, c.Path("work"), false, rec.Now)
	defer run.stopAll()
	obs := c.Dial(t, client.Config{})
	wait.For(t, 20*time.Second, "every item owned", func() bool {
		n := 0
		for _, w := range run.workers {
			if mb := w.current(); mb != nil {
				n += len(mb.Current().Items)
			}
		}
		tab, err := assign.ReadTable(context.Background(), obs, c.Path("work"))
		return err == nil && len(tab.Members) == assignMembers && n == assignItems
	})
	pausers := []Pauser{run.workers[0]}
	sched := core.Schedule{Steps: []core.Step{{At: 100 * time.Millisecond, Kind: core.PauseClient, Target: 0, Hold: LockPause}}}
	(&Target{T: t, Cluster: c, Holders: pausers}).Run(sched, rec)
	wait.Sleep(context.Background(), 500*time.Millisecond) // pacing: the woken member writes, the others go on
	run.stopAll()
	bad, summary := run.checkFencing()
	t.Logf("unfenced: %s; %d violations, first: %.200q", summary[len(summary)-1], len(bad), append(bad, "")[0])
	if !strings.Contains(strings.Join(bad, "\n"), "increment was lost") {
		t.Fatalf("the unfenced stores lost no increment under a pause past the lease; violations: %q", bad)
	}
}
