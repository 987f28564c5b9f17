package nemesis

// Proof under fault (issue 5), in process: a seeded nemesis schedule on a
// three-server cell while register and fencing workloads run; the
// histories are checked afterwards.

import (
	"context"
	"crypto/tls"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/chubby-dev/chubby/client"
	"github.com/chubby-dev/chubby/server"
	"github.com/chubby-dev/chubby/testing/cell"
	"github.com/chubby-dev/chubby/testing/fencedstore"
	"github.com/chubby-dev/chubby/testing/leak"
	"github.com/chubby-dev/chubby/testing/linear"
	"github.com/chubby-dev/chubby/testing/nemesis/core"
	"github.com/chubby-dev/chubby/testing/wait"
)

// TestMain fails the package if a test leaves a goroutine behind, except the
// waiter on a raft future stranded on a killed master (see testing/linear
// and Server.awaitRaft).
//
// (A proposal stranded on a killed master was fixed by turning raft's
// BatchApplyCh off; TestKilledMasterLeavesNoProposal reproduces the old bug.)
func TestMain(m *testing.M) {
	leak.VerifyTestMain(m)
}

// The short run's seeds: fixed, so `go test` is deterministic in its
// schedules (not in the interleavings, which the scheduler decides).
var shortSeeds = []uint64{1, 6, 8}

const shortDuration = 9 * time.Second

// planFromEnv is the plan the environment asks for (see core.PlanFromEnv).
func planFromEnv(t *testing.T) core.Plan {
	p, err := core.PlanFromEnv(shortSeeds, shortDuration)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestNemesis plays each schedule of the plan on a fresh cell under both
// workloads and checks their histories.
func TestNemesis(t *testing.T) { testNemesis(t, planFromEnv(t), run{}) }

// TestNemesisTLS is TestNemesis on a secure cell (issue 11): mutual TLS on
// every client link (each client's proxies are TLS ends on both sides,
// cell.Cluster.ProxiesAs; raft is the harness's in-memory transport) and
// ACLs on, the workloads' clients the non-admin principal "worker", whom
// an admin granted read, write and change-ACL on the run's directory (an
// ACL file acl/nemesis naming it, set on the directory), and an "intruder"
// refused there throughout (core.Intruder). The schedules, workloads and
// checks are TestNemesis's, and so is the plan (CHUBBY_NEMESIS_LONG=1 and
// the other variables of core.PlanFromEnv).
func TestNemesisTLS(t *testing.T) {
	testNemesis(t, planFromEnv(t), run{secure: true})
}

// run is what kind of run a schedule plays.
type run struct {
	// elect: the fencing workload's holds are election terms.
	elect bool
	// secure: TLS and ACLs on (TestNemesisTLS).
	secure bool
}

func (r run) name() string {
	switch {
	case r.secure:
		return "TestNemesisTLS"
	case r.elect:
		return "TestNemesisElection"
	}
	return "TestNemesis"
}

// testNemesis plays each schedule of p on a fresh cell.
func testNemesis(t *testing.T, p core.Plan, r run) {
	t.Logf("%s plan: %d schedules of %v, seeds %v", r.name(), len(p.Seeds), p.Duration, p.Seeds)
	ran := map[core.Kind]int{}
	defer func() {
		var parts []string
		for _, k := range core.InProcessKinds {
			parts = append(parts, fmt.Sprintf("%s=%d", k, ran[k]))
		}
		t.Logf("nemesis faults injected over the plan: %s", strings.Join(parts, " "))
	}()
	for _, seed := range p.Seeds {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			defer func() {
				if t.Failed() {
					t.Logf("FAILED under nemesis seed %d: replay with CHUBBY_NEMESIS_SEED=%d CHUBBY_NEMESIS_SECONDS=%d go test -run '%s$'",
						seed, seed, int(p.Duration/time.Second), r.name())
				}
			}()
			for k, n := range runSchedule(t, seed, p.Duration, p.Long, r) {
				ran[k] += n
			}
		})
	}
}

// TestNemesisElection plays schedules with the lock workers campaigning in
// an election (client/election) instead of locking a file: each term is a
// hold of the fencing workload, so the same checks prove that no two
// leaders' writes were admitted out of term order, none was lost, and terms
// follow one another (issue 14). By default it plays the short plan's
// first seed; CHUBBY_NEMESIS_LONG=1 and the other variables of
// core.PlanFromEnv as TestNemesis.
func TestNemesisElection(t *testing.T) {
	p := planFromEnv(t)
	if !p.Long && !p.Explicit {
		p.Seeds = p.Seeds[:1]
	}
	testNemesis(t, p, run{elect: true})
}

const (
	nKeys        = 3
	nReaders     = 2 // register clients that only read
	nWriters     = 2 // register clients that write/CAS and read
	nLockClients = 3
	settle       = 1500 * time.Millisecond // healthy time at the end of a run
)

// bounds are the schedule bounds of a run of dur on a cell of n servers.
func bounds(dur time.Duration, n int, long bool) core.Bounds {
	b := core.Bounds{
		Duration:     dur - settle,
		Kinds:        core.InProcessKinds,
		MinGap:       200 * time.Millisecond,
		MaxGap:       800 * time.Millisecond,
		MinHold:      300 * time.Millisecond,
		MaxHold:      2 * time.Second,
		MaxOverlap:   3,
		Servers:      n,
		MaxStall:     2500 * time.Millisecond, // past the lock clients' TTL, often within their grace
		LockClients:  nLockClients,
		RegClients:   nReaders + nWriters,
		PauseMin:     LockPauseMin,
		PauseMax:     60 * time.Second,
		MaxDrift:     MaxDrift,
		LockJumpMax:  3 * time.Second,  // past the lock clients' TTL + grace
		RegJumpMax:   15 * time.Second, // past the register clients' TTL, within their grace
		MaxDiskDelay: 300 * time.Millisecond,
	}
	if long {
		b.MaxGap, b.MaxHold, b.MaxDiskDelay = 3*time.Second, 6*time.Second, 500*time.Millisecond
		b.MaxStall = 20 * time.Second // past the register clients' TTL (12 s), within their grace
	}
	return b
}

// MaxDrift bounds the drift faults' |rate-1|. Leases stay safe while the
// master's clock runs at most 1/(1-2%) times as fast as a client's
// (session.DriftMargin shortens the client's lease by 2% of the TTL plus
// 10 ms); 1.009/0.991 < 1.0182 leaves room for scheduling noise.
const MaxDrift = 0.009

// The principals of a secure run (run.secure): the cell's admin, who
// grants; the workloads' clients; one granted nothing.
const (
	adminName    = "admin" // server.DefaultAdmins
	workerName   = "worker"
	intruderName = "intruder"
)

// runSchedule plays seed's schedule for dur as r says and returns the
// faults it injected.
func runSchedule(t *testing.T, seed uint64, dur time.Duration, long bool, r run) map[core.Kind]int {
	opts := []cell.Option{cell.WithSkewClocks()}
	var tc map[string]*tls.Config // nil: no TLS (then every tc[name] is nil)
	if r.secure {
		var files *server.TLSFiles
		files, tc = cell.DevTLS(t, adminName, workerName, intruderName)
		opts = append(opts, cell.WithServerConfig(func(_ int, cfg *server.Config) { cfg.TLS = files }))
	}
	c := cell.StartCluster(t, 3, opts...)
	sched := core.NewSchedule(seed, bounds(dur, c.N(), long))
	t.Log(sched)

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	setup := c.Dial(t, client.Config{TLS: tc[adminName]})
	// The workloads' directory: the root on a dev cell; on a secure one a
	// directory the admin grants the worker, under the root that stays the
	// admins'.
	dir := c.Root()
	if r.secure {
		dir = c.Path("nemesis")
		if err := core.Grant(ctx, setup, c.Root(), "nemesis", dir, workerName); err != nil {
			t.Fatal(err)
		}
	}
	path := func(name string) string { return dir + "/" + name }
	keys := make([]string, nKeys)
	for i := range keys {
		keys[i] = path(fmt.Sprintf("k%d", i))
		if _, err := setup.WriteFile(ctx, keys[i], nil); err != nil {
			t.Fatal(err)
		}
	}
	lockPath := path("counter-lock")
	if r.elect {
		lockPath = path("counter-election") // a directory, made by the first campaign
	} else if _, err := setup.WriteFile(ctx, lockPath, nil); err != nil {
		t.Fatal(err)
	}
	// Every client of the run reaches the cell through proxies, so that a
	// paused or stalled server holds all its client links.
	setup.Close()
	var clocks []*cell.SkewClock // lock clients first, then register clients
	newClock := func() *cell.SkewClock {
		clk := cell.NewSkewClock(time.Now())
		clocks = append(clocks, clk)
		return clk
	}
	lockClocks := make([]*cell.SkewClock, nLockClients)
	for i := range lockClocks {
		lockClocks[i] = newClock()
	}
	regClient := func() core.Handles {
		cl := c.Dial(t, client.Config{Servers: cell.ProxyAddrs(c.ProxiesAs(t, tc[workerName])), FixedServers: true, Clock: newClock(), TLS: tc[workerName]})
		if r.secure && cl.Session().Principal != workerName {
			t.Fatalf("a register client's principal is %q, want %s", cl.Session().Principal, workerName)
		}
		hs := make(core.Handles, len(keys))
		for i, k := range keys {
			h, err := cl.Open(ctx, k)
			if err != nil {
				t.Fatal(err)
			}
			hs[i] = h
		}
		return hs
	}

	// One recorder, one clock: the register operations go in rec, the lock
	// workers' events are stamped on its clock, and the nemesis's notes
	// annotate both histories.
	rec := linear.NewRecorder()
	events := &core.EventLog{Now: rec.Now}
	runCtx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	// Stop the workloads however the test ends (a Fatal included), before
	// the cell is torn down.
	stopAll := func() {
		stop()
		wg.Wait()
	}
	defer stopAll()
	var regStats core.RegStats
	regs := &core.Registers{Keys: keys, Rec: rec, Stats: &regStats, ReadThink: 2 * time.Millisecond, WriteThink: 10 * time.Millisecond, StopOnExpiry: true}
	id := 0
	for range nReaders {
		hs := regClient()
		rng := rand.New(rand.NewPCG(seed, uint64(id)))
		wg.Add(1)
		go func(id int) {
			defer wg.Done()
			regs.RunReader(runCtx, id, "", hs, rng)
		}(id)
		id++
	}
	for range nWriters {
		hs := regClient()
		rngW, rngR := rand.New(rand.NewPCG(seed, uint64(id))), rand.New(rand.NewPCG(seed, uint64(id+1)))
		wg.Add(2)
		go func(id int) {
			defer wg.Done()
			regs.RunWriter(runCtx, id, fmt.Sprintf("c%d", id), hs, rngW)
		}(id)
		go func(id int) {
			defer wg.Done()
			regs.RunReader(runCtx, id, "", hs, rngR)
		}(id + 1)
		id += 2
	}

	store := core.NewCounterStore(true, rec.Now)
	workers, pausers := startLockWorkers(t, c, lockPath, r.elect, tc[workerName], store, events, lockClocks, seed, runCtx, &wg)

	// The ACL probe of a secure run, through proxies of its own (paused
	// with their servers; no fault aims at them).
	var intruder *core.Intruder
	if r.secure {
		addrs := cell.ProxyAddrs(c.ProxiesAs(t, tc[intruderName]))
		intruder = &core.Intruder{Read: keys[0], Create: path("intruder"), Every: 200 * time.Millisecond,
			Dial: func(ctx context.Context) (*client.Client, error) {
				return client.Dial(ctx, client.Config{Servers: addrs, FixedServers: true, TLS: tc[intruderName], Logger: c.Logger().Named("intruder")})
			}}
		wg.Add(1)
		go func() {
			defer wg.Done()
			intruder.Run(runCtx)
		}()
	}

	start := time.Now()
	tally := (&Target{T: t, Cluster: c, Holders: pausers, Clocks: clocks}).Run(sched, rec)
	wait.Sleep(context.Background(), time.Until(start.Add(dur))) // pacing: the healed cell runs to the end of the schedule
	stopAll()
	t.Logf("seed %d: faults: %s", seed, tally)
	_ = workers

	// Liveness after the schedule: the healed cell serves a write.
	ctx2, cancel2 := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel2()
	if _, err := c.Dial(t, client.Config{TLS: tc[adminName]}).WriteFile(ctx2, c.Path("after"), []byte("ok")); err != nil {
		t.Errorf("seed %d: the healed cell did not serve a write: %v", seed, err)
	}

	// The ACLs were on throughout.
	if intruder != nil {
		t.Logf("seed %d intruder: %s", seed, intruder)
		for _, v := range intruder.Check() {
			t.Errorf("seed %d: ACLs: %s", seed, v)
		}
	}

	// The fencing workload.
	evs := events.Events()
	same := func(x int64) int64 { return x }
	holds := core.HoldsFrom(evs, same)
	ops, final, rejected := core.CounterSnapshot(store)
	counts := core.CountLocks(evs)
	t.Logf("seed %d locks: %s; counter %d; store refused %d; %d holds paused mid-increment, %d of them refused on waking",
		seed, counts, final, rejected, counts.PausedMid, counts.PausedRefused)
	for _, v := range core.CheckFencing(holds, ops, final) {
		t.Errorf("seed %d: fencing: %s", seed, v)
	}
	if counts.Writes == 0 {
		t.Errorf("seed %d: the fencing workload admitted no increment: it did not run", seed)
	}
	// The same workload's lock operations, against the lock model.
	linear.Check(t, linear.LockModel, core.LockHistory(evs, lockPath, same), rec.Annotations()...)

	// The register workload.
	t.Logf("seed %d registers: %s", seed, &regStats)
	if regStats.Writes.Load()+regStats.CASOK.Load() == 0 {
		t.Errorf("seed %d: no register write succeeded: the workload did not run", seed)
	}
	if n := regStats.Expired.Load(); n > 0 {
		t.Errorf("seed %d: %d register clients lost their session, though no fault lasts their TTL + grace (57 s)", seed, n)
	}
	linear.Check(t, core.CASRegisterModel, rec.History(), rec.Annotations()...)
	return tally.Ran
}

// startLockWorkers starts nLockClients lock workers of the fencing
// workload on c, each through its own proxies and with TLS configuration
// tc (nil: none), until ctx is done.
func startLockWorkers(t *testing.T, c *cell.Cluster, lockPath string, elect bool, tc *tls.Config, store *fencedstore.Store, events *core.EventLog,
	clocks []*cell.SkewClock, seed uint64, ctx context.Context, wg *sync.WaitGroup) ([]*LockWorker, []Pauser) {
	workers := make([]*LockWorker, nLockClients)
	pausers := make([]Pauser, nLockClients)
	for i := range workers {
		workers[i] = &LockWorker{ID: i, Path: lockPath, Proxies: c.ProxiesAs(t, tc), TLS: tc, Log: c.Logger().Named(fmt.Sprintf("lockclient%d", i)),
			Store: store, Events: events, Clock: clocks[i], Election: elect}
		pausers[i] = workers[i]
		rng := rand.New(rand.NewPCG(seed, uint64(100+i)))
		wg.Add(1)
		go func(w *LockWorker) {
			defer wg.Done()
			w.Run(ctx, rng)
		}(workers[i])
	}
	return workers, pausers
}

// TestUnfencedPauseLosesIncrement is the negative control of the fencing
// check: the same lock workload against a store that ignores sequencers,
// with one holder paused mid-increment past its session's TTL, grace and
// lock-delay. The cell moves the lock on, other clients increment, and the
// paused holder's write of its stale value is admitted: core.CheckFencing must
// report the lost increments. (With fencing, every PauseClient of
// TestNemesis passes.)
//
// It also shows that the lock history's Lost operations carry weight: the
// recorded lock operations are linearizable under linear.LockModel, and
// without the paused session's Lost they are not (the lock moved to
// another session while, as far as the rest of the history tells, the
// paused one still held it).
func TestUnfencedPauseLosesIncrement(t *testing.T) {
	c := cell.StartCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	lockPath := c.Path("counter-lock")
	if _, err := c.Dial(t, client.Config{}).WriteFile(ctx, lockPath, nil); err != nil {
		t.Fatal(err)
	}
	rec := linear.NewRecorder()
	events := &core.EventLog{Now: rec.Now}
	store := core.NewCounterStore(false, rec.Now)
	runCtx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	stopAll := func() {
		stop()
		wg.Wait()
	}
	defer stopAll()
	clocks := make([]*cell.SkewClock, nLockClients)
	for i := range clocks {
		clocks[i] = cell.NewSkewClock(time.Now())
	}
	_, pausers := startLockWorkers(t, c, lockPath, false, nil, store, events, clocks, 0, runCtx, &wg)
	sched := core.Schedule{Steps: []core.Step{{At: 300 * time.Millisecond, Kind: core.PauseClient, Target: 0, Hold: LockPause}}}
	(&Target{T: t, Cluster: c, Holders: pausers}).Run(sched, rec)
	wait.Sleep(context.Background(), 500*time.Millisecond) // pacing: the woken holder writes, the others go on
	stopAll()
	evs := events.Events()
	ops, final, _ := core.CounterSnapshot(store)
	bad := core.CheckFencing(core.HoldsFrom(evs, func(x int64) int64 { return x }), ops, final)
	counts := core.CountLocks(evs)
	t.Logf("unfenced: %s; counter %d; %d violations, first: %.200q", counts, final, len(bad), append(bad, "")[0])
	if counts.PausedMid != 1 {
		t.Fatalf("the pause was not taken (%d pauses)", counts.PausedMid)
	}
	if !strings.Contains(strings.Join(bad, "\n"), "increment was lost") {
		t.Fatalf("the unfenced store lost no increment under a pause past the lease; violations: %q", bad)
	}

	hist := core.LockHistory(evs, lockPath, func(x int64) int64 { return x })
	linear.Check(t, linear.LockModel, hist)
	var withoutLost []porcupine.Operation
	lost := 0
	for _, op := range hist {
		// Worker 0 was paused: its first Lost ends the paused session.
		if op.Input.(linear.LockInput).Kind == linear.LockLost && op.ClientId == 0 && lost == 0 {
			lost++
			continue
		}
		withoutLost = append(withoutLost, op)
	}
	if lost == 0 {
		t.Fatal("the paused client recorded no Lost operation")
	}
	if porcupine.CheckOperations(linear.LockModel, withoutLost) {
		t.Fatal("the lock history is linearizable without the paused session's Lost: the model does not see the lock move by expiry")
	}
}
