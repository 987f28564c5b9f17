package procnemesis

// Proof under fault (issue 5), with real processes: a seeded schedule of
// overlapping faults — SIGKILL and restart, SIGSTOP of servers and of lock
// clients, partitions of the raft links (minority, master isolated,
// majority split, one-way), cut and delayed client links — on a cell of
// three chubbyd processes, while register clients (in this process) and
// lock clients (separate processes) run through their own proxies; the
// histories are checked afterwards.

import (
	"context"
	"crypto/tls"
	"fmt"
	"math"
	"math/rand/v2"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/chubby-dev/chubby/client"
	"github.com/chubby-dev/chubby/testing/linear"
	"github.com/chubby-dev/chubby/testing/nemesis/core"
	"github.com/chubby-dev/chubby/testing/proc"
	"github.com/chubby-dev/chubby/testing/wait"
)

// plan is which schedules a run plays (core.PlanFromEnv: the same
// environment variables as the in-process nemesis).
type plan struct{ core.Plan }

// The short run's seeds: fixed, so that `go test` plays the same schedules
// every time (not the same interleavings: the scheduler decides those);
// chosen so that each draws every kind of fault (TestShortPlanDrawsEveryKind)
// and a client pause aimed right after a read of the counter.
var shortSeeds = []uint64{17, 19}

const shortDuration = 10 * time.Second

// planFromEnv is the plan the environment asks for.
func planFromEnv(t *testing.T) plan {
	p, err := core.PlanFromEnv(shortSeeds, shortDuration)
	if err != nil {
		t.Fatal(err)
	}
	return plan{p}
}

// bounds are the schedule bounds of a plan.
func (p plan) bounds() core.Bounds {
	b := core.Bounds{
		Duration: p.Duration,
		Kinds:    core.ProcessKinds, Deal: true,
		MinGap: 300 * time.Millisecond, MaxGap: 1200 * time.Millisecond,
		MinHold: 500 * time.Millisecond, MaxHold: 3 * time.Second,
		PauseMin: lockPause, PauseMax: lockPause + 2*time.Second,
		MinDelay: 5 * time.Millisecond, MaxDelay: 60 * time.Millisecond,
		MaxOverlap: 3,
	}
	if p.Long {
		b.MinGap, b.MaxGap = 500*time.Millisecond, 5*time.Second
		b.MinHold, b.MaxHold = time.Second, 10*time.Second
		b.PauseMax = 60 * time.Second
		b.MaxDelay = 150 * time.Millisecond
	}
	return b
}

const (
	nServers     = 3
	nRegClients  = 3 // reg0 reads; reg1 and reg2 write/CAS and read
	nLockWorkers = 3
	nKeys        = 3
	// liveTimeout bounds every liveness wait after the cell is healed:
	// far more than a failover and a lock-delay take, so hitting it is a
	// liveness bug, not a slow machine.
	liveTimeout = 60 * time.Second
)

// The sessions of the clients: short, so that faults of a few seconds
// straddle leases.
var (
	regConfig  = client.Config{SessionTTL: 2 * time.Second, Grace: 3 * time.Second}
	lockConfig = WorkerConfig{TTL: 2 * time.Second, Grace: 2 * time.Second, LockDelay: 500 * time.Millisecond, Think: 60 * time.Millisecond}
	// lockPause is the shortest pause of a lock client: past its TTL,
	// grace and lock-delay, so its session expires and the lock moves on
	// while it sleeps holding a counter value.
	lockPause = lockConfig.TTL + lockConfig.Grace + lockConfig.LockDelay + time.Second
)

// TestProcNemesis plays each schedule of the plan on a fresh cell of
// chubbyd processes under both workloads and checks their histories.
func TestProcNemesis(t *testing.T) { testProcNemesis(t, false) }

// TestProcNemesisTLS is TestProcNemesis on a secure cell (issue 11): every
// link mutual TLS — client RPC, raft (through the same proxies:
// netproxy carries the TLS bytes), HTTP — with certificates from
// `chubbyd tls`, gossip encrypted with a `chubbyd keygen` key, ACLs on.
// The workloads' clients (register sessions and lock-worker processes)
// are the non-admin principal "worker", whom admin grants read, write and
// change-ACL on the run's directory /ls/local/nemesis (core.Grant: an ACL
// file acl/nemesis naming it, set on the directory); an "intruder" must be
// refused there throughout (core.Intruder). The schedules, workloads,
// checks and plan are TestProcNemesis's.
func TestProcNemesisTLS(t *testing.T) { testProcNemesis(t, true) }

func testProcNemesis(t *testing.T, secure bool) {
	name := map[bool]string{false: "TestProcNemesis", true: "TestProcNemesisTLS"}[secure]
	p := planFromEnv(t)
	t.Logf("%s plan: %d schedules of %v, seeds %v", name, len(p.Seeds), p.Duration, p.Seeds)
	start := time.Now()
	injected := map[core.Kind]int{}
	for _, seed := range p.Seeds {
		ok := t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			defer func() {
				if t.Failed() {
					t.Logf("FAILED under process nemesis seed %d: replay with\n  CHUBBY_NEMESIS_SEED=%d CHUBBY_NEMESIS_SECONDS=%d%s go test -count=1 -run '%s$' -v ./testing/procnemesis",
						seed, seed, int(p.Duration/time.Second), map[bool]string{true: " CHUBBY_NEMESIS_LONG=1", false: ""}[p.Long], name)
				}
			}()
			var pk *PKI
			if secure {
				pk = NewPKI(t, nServers)
			}
			for k, n := range runSchedule(t, seed, p, pk) {
				injected[k] += n
			}
		})
		if !ok && !p.Long {
			break
		}
	}
	var parts []string
	for _, k := range core.ProcessKinds {
		parts = append(parts, fmt.Sprintf("%s=%d", k, injected[k]))
	}
	t.Logf("faults injected over the plan (%v): %s", time.Since(start).Round(time.Second), strings.Join(parts, " "))
	if !p.Explicit && !p.Long && !t.Failed() {
		for _, k := range core.ProcessKinds {
			if injected[k] == 0 {
				t.Errorf("the short plan injected no %s fault: its seeds no longer cover every kind", k)
			}
		}
	}
}

// TestShortPlanDrawsEveryKind: the short plan's schedules draw every kind of
// fault between them (whether each is injected also depends on the cell:
// TestProcNemesis checks that).
func TestShortPlanDrawsEveryKind(t *testing.T) {
	b := plan{core.Plan{Duration: shortDuration}}.bounds()
	seen := map[core.Kind]int{}
	for _, seed := range shortSeeds {
		for k, n := range core.NewSchedule(seed, b).Kinds() {
			seen[k] += n
		}
	}
	for _, k := range core.ProcessKinds {
		if seen[k] == 0 {
			t.Errorf("the short seeds %v draw no %s", shortSeeds, k)
		}
	}
}

func serverIndex(s *proc.Server) int {
	n, err := strconv.Atoi(strings.TrimPrefix(s.NodeID, "n"))
	if err != nil {
		panic(fmt.Sprintf("server name %q", s.NodeID))
	}
	return n - 1
}

// startCell starts three chubbyd processes whose raft traffic goes through
// nt: server i reaches server j's raft transport only through the link
// nt.Raft[i][j] (-raft-route). Gossip (memberlist) is not proxied: it only
// finds the servers at the first start and shows their state; raft alone
// decides the master, what commits and when sessions expire. With pk
// every link is TLS and gossip encrypted (PKI.cellOptions).
func startCell(t *testing.T, nt *Net, pk *PKI) (*proc.Cell, []*proc.Server) {
	opts := proc.CellOptions{LogLevel: "info", ServerArgs: func(s *proc.Server, all []*proc.Server) []string {
		addrs := make([]string, nServers)
		for _, o := range all {
			addrs[serverIndex(o)] = o.RaftAddr
		}
		nt.SetRaftTargets(addrs)
		i := serverIndex(s)
		var routes []string
		for j := range nServers {
			if j != i {
				routes = append(routes, fmt.Sprintf("n%d=%s", j+1, nt.Raft[i][j].Addr()))
			}
		}
		return []string{"-raft-route", strings.Join(routes, ",")}
	}}
	if pk != nil {
		opts = pk.cellOptions(t, opts)
	}
	c := proc.StartCell(t, nServers, opts)
	servers := c.Servers()
	sort.Slice(servers, func(i, j int) bool { return serverIndex(servers[i]) < serverIndex(servers[j]) })
	// The raft traffic goes through the proxies: the master dials each
	// follower through its link (heartbeats start at once).
	m := serverIndex(c.Master(t))
	for j := range nServers {
		if j == m {
			continue
		}
		if !wait.Until(10*time.Second, func() bool { return nt.Raft[m][j].Stats().BytesUp > 0 }) {
			t.Fatalf("no raft traffic from master n%d to n%d through its proxy: -raft-route not in force", m+1, j+1)
		}
	}
	return c, servers
}

// runSchedule plays seed's schedule on a fresh cell, with TLS and ACLs if
// pk is set, and returns the faults it injected.
func runSchedule(t *testing.T, seed uint64, p plan, pk *PKI) map[core.Kind]int {
	began := time.Now()
	sched := core.NewSchedule(seed, p.bounds())
	t.Log(sched)

	nt, err := NewNet(nServers)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nt.Close)
	c, servers := startCell(t, nt, pk)
	// The clients' TLS configurations by principal (nil without TLS).
	tc := map[string]*tls.Config{}
	if pk != nil {
		for _, name := range []string{adminName, workerName, intruderName} {
			tc[name] = pk.TLS(t, name)
		}
	}
	rpcAddrs := make([]string, nServers)
	for i, s := range servers {
		rpcAddrs[i] = s.RPCAddr
	}
	store := core.NewCounterStore(true, MonoNow)
	if err := store.Serve(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })

	// The namespace the workloads use, made directly (no proxy).
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	setup, err := client.Dial(ctx, client.Config{Servers: rpcAddrs, TLS: tc[adminName]})
	if err != nil {
		t.Fatal(err)
	}
	// The workloads' directory: the root on a dev cell; on a secure one a
	// directory admin grants the worker, under the root that stays the
	// admins'.
	dir := "/ls/local"
	if pk != nil {
		dir = "/ls/local/nemesis"
		if err := core.Grant(ctx, setup, "/ls/local", "nemesis", dir, workerName); err != nil {
			t.Fatal(err)
		}
	}
	keys := make([]string, nKeys)
	for i := range keys {
		keys[i] = fmt.Sprintf("%s/k%d", dir, i)
		if _, err := setup.WriteFile(ctx, keys[i], nil); err != nil {
			t.Fatal(err)
		}
	}
	lockPath, durDir, fencedPath := dir+"/counter-lock", dir+"/durable", dir+"/fenced"
	for _, p := range []string{lockPath, fencedPath} {
		if _, err := setup.WriteFile(ctx, p, nil); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := setup.Open(ctx, durDir, client.CreateDir()); err != nil {
		t.Fatal(err)
	}
	setup.Close()

	h := NewHistory()
	runCtx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var sessions []*Sess
	stopInProcess := func() {
		stop()
		wg.Wait()
		for _, s := range sessions {
			s.Close()
		}
	}
	defer stopInProcess()

	// Register clients. Every register client also reads the file the lock
	// workers write with their sequencers; only the workers write it.
	regStats := &core.RegStats{Last: make([]atomic.Int64, 1+2*(nRegClients-1))}
	regs := &core.Registers{Keys: append(append([]string(nil), keys...), fencedPath), Writable: nKeys, Rec: h.Recorder, Stats: regStats,
		ReadThink: 3 * time.Millisecond, WriteThink: 10 * time.Millisecond}
	id := 0
	for i := range nRegClients {
		name := fmt.Sprintf("reg%d", i)
		addrs, err := nt.AddClient(name, rpcAddrs)
		if err != nil {
			t.Fatal(err)
		}
		cfg := regConfig
		cfg.Servers, cfg.TLS = addrs, tc[workerName]
		s := NewSess(name, cfg, regs.Keys)
		sessions = append(sessions, s)
		if i > 0 {
			wg.Add(1)
			go func(id int) {
				defer wg.Done()
				regs.RunWriter(runCtx, id, name, s, rand.New(rand.NewPCG(seed, uint64(id))))
			}(id)
			id++
		}
		wg.Add(1)
		go func(id int) {
			defer wg.Done()
			regs.RunReader(runCtx, id, name, s, rand.New(rand.NewPCG(seed, uint64(id))))
		}(id)
		id++
	}
	// The durability log.
	durAddrs, err := nt.AddClient("dur", rpcAddrs)
	if err != nil {
		t.Fatal(err)
	}
	durCfg := regConfig
	durCfg.Servers, durCfg.TLS = durAddrs, tc[workerName]
	durSess := NewSess("dur", durCfg, nil)
	sessions = append(sessions, durSess)
	dur := &DurableLog{Dir: durDir}
	wg.Add(1)
	go func() {
		defer wg.Done()
		dur.Run(runCtx, durSess, h)
	}()
	// Lock clients, each a process of its own.
	workers := make([]*WorkerProc, nLockWorkers)
	for i := range workers {
		addrs, err := nt.AddClient(fmt.Sprintf("lock%d", i), rpcAddrs)
		if err != nil {
			t.Fatal(err)
		}
		cfg := lockConfig
		cfg.ID, cfg.Servers, cfg.Store, cfg.Lock, cfg.Seed, cfg.Fenced = i, addrs, store.URL(), lockPath, seed, fencedPath
		if pk != nil {
			cfg.TLSDir, cfg.TLSName = pk.Dir, workerName
		}
		workers[i] = StartWorker(t, cfg)
	}
	// The ACL probe of a secure run, straight to the servers (no fault
	// aims at it).
	var intruder *core.Intruder
	if pk != nil {
		intruder = &core.Intruder{Read: keys[0], Create: dir + "/intruder", Every: 200 * time.Millisecond,
			Dial: func(ctx context.Context) (*client.Client, error) {
				return client.Dial(ctx, client.Config{Servers: rpcAddrs, TLS: tc[intruderName]})
			}}
		wg.Add(1)
		go func() {
			defer wg.Done()
			intruder.Run(runCtx)
		}()
	}
	stopWorkers := func() {
		for _, w := range workers {
			if err := w.Stop(45 * time.Second); err != nil {
				t.Error(err)
			}
		}
	}
	waitFor(t, 30*time.Second, "every lock worker acquires the lock once", func() string {
		for _, w := range workers {
			if w.LastAcquire() == 0 {
				return fmt.Sprintf("lock worker %d has not", w.ID)
			}
		}
		return ""
	})
	setupTook := time.Since(began)

	// The schedule.
	r := &Target{T: t, Nodes: servers, Net: nt, Workers: workers}
	if pk != nil {
		r.TLS = pk.HTTPS(t, adminName)
	}
	schedStart := time.Now()
	tally := r.Run(sched, h)
	healedAt, healedMono := h.Now(), MonoNow()
	t.Logf("seed %d: schedule played in %v (planned %v); faults injected: %s; skipped: %s",
		seed, time.Since(schedStart).Round(time.Millisecond), p.Duration, core.CountString(tally.Ran), core.CountString(tally.Skipped))

	// Liveness once healed: one master, a write served, every client
	// making progress again.
	c.WaitMaster(t, liveTimeout, nil)
	func() {
		ctx, cancel := context.WithTimeout(context.Background(), liveTimeout)
		defer cancel()
		cl, err := client.Dial(ctx, client.Config{Servers: rpcAddrs, TLS: tc[adminName]})
		if err == nil {
			_, err = cl.WriteFile(ctx, "/ls/local/after", []byte("healed"))
			cl.Close()
		}
		if err != nil {
			t.Errorf("seed %d: the healed cell did not serve a write within %v: %v", seed, liveTimeout, err)
		}
	}()
	waitFor(t, liveTimeout, "every client makes progress after the heal", func() string {
		for i := range regStats.Last {
			if regStats.Last[i].Load() <= healedAt {
				return fmt.Sprintf("register client %d has not", i)
			}
		}
		if dur.Last() <= healedAt {
			return "the durability log has not"
		}
		for _, w := range workers {
			if w.LastAcquire() <= healedMono {
				return fmt.Sprintf("lock worker %d has not acquired the lock", w.ID)
			}
		}
		return ""
	})
	healTook := time.Since(schedStart) - p.Duration
	// No raft connection went around the proxies: raft warns when it has
	// no route for a server and dials its advertised address instead.
	for _, s := range servers {
		if strings.Contains(s.Log(), "unable to get address for server") {
			t.Errorf("seed %d: %s dialled a raft peer around its proxy (no -raft-route for it); see %s", seed, s.NodeID, s.LogPath)
		}
	}

	stopInProcess()
	stopWorkers()

	// Final reads of the registers, through a fresh session: recorded, so
	// every acknowledged write must show in them as porcupine orders it.
	finalID := len(regStats.Last)
	found := map[string]string{}
	func() {
		ctx, cancel := context.WithTimeout(context.Background(), liveTimeout)
		defer cancel()
		cl, err := client.Dial(ctx, client.Config{Servers: rpcAddrs, DisableCache: true, TLS: tc[adminName]})
		if err != nil {
			t.Fatalf("final reads: %v", err)
		}
		defer cl.Close()
		for _, k := range append(append([]string(nil), keys...), fencedPath) {
			call := h.Now()
			v, _, err := readFile(ctx, cl, k)
			if err != nil {
				t.Fatalf("final read of %s: %v", k, err)
			}
			h.Add(porcupine.Operation{ClientId: finalID, Input: core.RegInput{Kind: core.OpRead, Key: k}, Call: call,
				Output: core.RegOutput{Value: v}, Return: h.Now(), Metadata: "final read after the heal"})
		}
		d, err := cl.Open(ctx, durDir)
		if err != nil {
			t.Fatalf("final listing: %v", err)
		}
		names, err := d.ReadDir(ctx)
		if err != nil {
			t.Fatalf("final listing: %v", err)
		}
		for _, n := range names {
			p := durDir + "/" + n
			v, _, err := readFile(ctx, cl, p)
			if err != nil {
				t.Fatalf("final read of %s: %v", p, err)
			}
			found[p] = v
		}
	}()

	// The ACLs were on throughout.
	if intruder != nil {
		t.Logf("seed %d intruder: %s", seed, intruder)
		for _, v := range intruder.Check() {
			t.Errorf("seed %d: ACLs: %s", seed, v)
		}
	}

	// Fencing.
	var events []core.Event
	for _, w := range workers {
		events = append(events, w.Events()...)
	}
	holds := core.HoldsFrom(events, h.At)
	ops, final, rejected := core.CounterSnapshot(store)
	ls := lockStats(events, workers)
	t.Logf("seed %d locks: %d holds, %d increments admitted (counter %d), store refused %d stale operations; %s",
		seed, len(holds), countWrites(ops), final, rejected, ls)
	for i, v := range core.CheckFencing(holds, ops, final) {
		if i == 20 {
			t.Errorf("seed %d: fencing: ... and more", seed)
			break
		}
		t.Errorf("seed %d: fencing: %s", seed, v)
	}
	if countWrites(ops) == 0 {
		t.Errorf("seed %d: the fencing workload admitted no increment", seed)
	}
	cwrites := core.CellWritesFrom(events, h.At)
	cwOK, cwBad := 0, 0
	for _, w := range cwrites {
		switch {
		case w.OK:
			cwOK++
			h.Add(porcupine.Operation{ClientId: 100 + w.Worker, Input: core.RegInput{Kind: core.OpWrite, Key: fencedPath, Value: w.Data},
				Call: w.Call, Output: core.RegOutput{OK: true}, Return: w.Ret, Metadata: fmt.Sprintf("lockworker%d, fenced at gen %d", w.Worker, w.Gen)})
		case w.BadSeq:
			cwBad++ // refused by the cell: no effect
		default:
			h.Add(porcupine.Operation{ClientId: 100 + w.Worker, Input: core.RegInput{Kind: core.OpWrite, Key: fencedPath, Value: w.Data},
				Call: w.Call, Output: core.RegOutput{Unknown: true}, Return: math.MaxInt64, Metadata: fmt.Sprintf("lockworker%d, fenced at gen %d: outcome unknown", w.Worker, w.Gen)})
		}
	}
	t.Logf("seed %d fenced cell writes: %d committed, %d refused by the cell (stale sequencer), %d unknown", seed, cwOK, cwBad, len(cwrites)-cwOK-cwBad)
	for _, v := range core.CheckCellFencing(holds, cwrites) {
		t.Errorf("seed %d: cell fencing: %s", seed, v)
	}
	if cwOK == 0 {
		t.Errorf("seed %d: no fenced cell write committed", seed)
	}

	// Durability.
	acked := dur.Acked()
	t.Logf("seed %d durability: %d writes acknowledged, %d failed, %d files at the end", seed, len(acked), dur.Fails(), len(found))
	for _, v := range CheckDurable(acked, found) {
		t.Errorf("seed %d: durability: %s", seed, v)
	}

	// Registers and the lock, with porcupine.
	redials := int64(0)
	for _, s := range sessions {
		redials += s.Redials()
	}
	t.Logf("seed %d registers: %s; %d in-process sessions re-dialled", seed, regStats, redials)
	if regStats.Writes.Load()+regStats.CASOK.Load() == 0 {
		t.Errorf("seed %d: no register write succeeded", seed)
	}
	if dup := duplicateWrites(h.History()); dup != "" {
		t.Fatalf("seed %d: harness bug: %s (CASRegisterModel needs unique values)", seed, dup)
	}
	checkStart := time.Now()
	t.Run("registers", func(t *testing.T) {
		linear.Check(t, core.CASRegisterModel, h.History(), h.Annotations()...)
	})
	t.Run("lock", func(t *testing.T) {
		linear.Check(t, linear.LockModel, core.LockHistory(events, lockPath, h.At), h.Annotations()...)
	})
	t.Logf("seed %d took %v: setup %v, schedule %v, heal and progress %v, checks %v", seed, time.Since(began).Round(time.Millisecond),
		setupTook.Round(time.Millisecond), p.Duration, healTook.Round(time.Millisecond), time.Since(checkStart).Round(time.Millisecond))
	return tally.Ran
}

// duplicateWrites names a value written twice to one register ("" if
// none).
func duplicateWrites(ops []porcupine.Operation) string {
	seen := map[[2]string]bool{}
	for _, op := range ops {
		in := op.Input.(core.RegInput)
		if in.Kind == core.OpRead {
			continue
		}
		k := [2]string{in.Key, in.Value}
		if seen[k] {
			return fmt.Sprintf("%q written twice to %s", in.Value, in.Key)
		}
		seen[k] = true
	}
	return ""
}

func readFile(ctx context.Context, cl *client.Client, path string) (string, client.Stat, error) {
	h, err := cl.Open(ctx, path)
	if err != nil {
		return "", client.Stat{}, err
	}
	defer h.Close()
	b, st, err := h.GetContentsAndStat(ctx)
	return string(b), st, err
}

// waitFor polls cond (which says what is still missing, "" when done)
// until it is done or timeout passes, which fails the test.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() string) {
	t.Helper()
	var missing string
	if !wait.Until(timeout, func() bool { missing = cond(); return missing == "" }) {
		t.Fatalf("%s: not within %v: %s", what, timeout, missing)
	}
}

func countWrites(ops []core.StoreOp) int {
	n := 0
	for _, op := range ops {
		if op.Write {
			n++
		}
	}
	return n
}

// lockStats summarises the lock workers' events, and what became of the
// pauses that landed inside a hold: a worker stopped between its read of
// the counter and its write, whose write on waking the store refused
// (fencing at work) or admitted (the lock had not moved on).
func lockStats(events []core.Event, workers []*WorkerProc) string {
	mid, midRefused := 0, 0
	for _, w := range workers {
		evs := w.Events()
		for _, pz := range w.Pauses() {
			// The hold whose read returned before the pause and whose
			// write was called after it.
			for i, e := range evs {
				if e.Ev != "read" || !e.OK || e.Ret > pz[0] {
					continue
				}
				for _, f := range evs[i+1:] {
					if f.Hold != e.Hold {
						break
					}
					if f.Ev == "write" && f.Call > pz[1] {
						mid++
						if f.Refused {
							midRefused++
						}
					}
				}
			}
		}
	}
	return fmt.Sprintf("%s; %d pauses landed mid-increment, %d of those writes refused on waking", core.CountLocks(events), mid, midRefused)
}

// TestUnfencedPauseLosesIncrement is the negative control of the fencing
// check with real processes: the lock workload against a store that ignores
// sequencers, one worker SIGSTOPped right after reading the counter, for
// longer than its session's TTL, grace and lock-delay. The cell gives the
// lock to the others, they increment, and the stopped worker's write of
// its stale value, on waking, is admitted: CheckFencing must report the
// lost increments. (With fencing the same pause is refused: see the
// "mid-increment" counts of TestProcNemesis.)
func TestUnfencedPauseLosesIncrement(t *testing.T) {
	c := proc.StartCell(t, nServers, proc.CellOptions{LogLevel: "info"})
	const lockPath = "/ls/local/counter-lock"
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	setup, err := client.Dial(ctx, client.Config{Servers: c.AddrList()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := setup.WriteFile(ctx, lockPath, nil); err != nil {
		t.Fatal(err)
	}
	setup.Close()
	store := core.NewCounterStore(false, MonoNow)
	if err := store.Serve(); err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	workers := make([]*WorkerProc, 2)
	for i := range workers {
		cfg := lockConfig
		cfg.ID, cfg.Servers, cfg.Store, cfg.Lock, cfg.Seed = i, c.AddrList(), store.URL(), lockPath, 1
		workers[i] = StartWorker(t, cfg)
	}
	w := workers[0]
	if !w.WaitRead(30 * time.Second) {
		t.Fatalf("lock worker 0 never read the counter")
	}
	w.Pause(t)
	wait.Sleep(context.Background(), lockPause) // pacing: the pause's length
	w.Resume(t)
	// The stopped hold's write, on waking.
	waitFor(t, 30*time.Second, "the paused worker writes on waking", func() string {
		pz := w.Pauses()[0]
		for _, e := range w.Events() {
			if e.Ev == "write" && e.Call > pz[1] {
				return ""
			}
		}
		return "no write yet"
	})
	for _, w := range workers {
		if err := w.Stop(45 * time.Second); err != nil {
			t.Error(err)
		}
	}
	var events []core.Event
	for _, w := range workers {
		events = append(events, w.Events()...)
	}
	ops, final, _ := core.CounterSnapshot(store)
	bad := core.CheckFencing(core.HoldsFrom(events, func(x int64) int64 { return x }), ops, final)
	t.Logf("unfenced: %d increments admitted, counter %d; %s; %d violations, first: %.200q", countWrites(ops), final, lockStats(events, workers[:1]), len(bad), append(bad, "")[0])
	if all := strings.Join(bad, "\n"); !strings.Contains(all, "does not follow its own hold's read") && !strings.Contains(all, "lost or repeated") {
		t.Fatalf("the unfenced store lost no increment under a pause past the lease; violations: %q", bad)
	}
}
