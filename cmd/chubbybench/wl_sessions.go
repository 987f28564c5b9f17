package main

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/chubby-dev/chubby/client"
)

// sessionForm is how the sessions workload holds its sessions: a
// client.Client each (over shared Pools with -conns), or with -group a
// client.SessionGroup per connection that renews all of its sessions in
// one loop (the protocol's multi-session form).
type sessionForm interface {
	// create makes session i.
	create(ctx context.Context, i int) error
	// lost counts the sessions that ended before the end of the hold.
	lost() int64
	// close ends the sessions.
	close()
}

// clientForm: a client.Client per session, closed by the env's close.
type clientForm struct {
	e  *env
	cs []*client.Client
}

func (f *clientForm) create(ctx context.Context, i int) error {
	c, err := f.e.dialOne(ctx)
	if err == nil {
		f.cs[i] = c
	}
	return err
}

func (f *clientForm) lost() int64 {
	var n int64
	for _, c := range f.cs {
		if c == nil {
			continue
		}
		select {
		case <-c.Done():
			n++
		default:
		}
	}
	return n
}

func (f *clientForm) close() {}

// groupForm: session i in group i mod len(gs).
type groupForm struct {
	e  *env
	gs []*client.SessionGroup
}

// groupSize is how many sessions a connection carries with -group and no
// -conns.
const groupSize = 1000

func newGroupForm(ctx context.Context, e *env) (*groupForm, error) {
	n := e.o.conns
	if n == 0 {
		n = max(1, (e.o.clients+groupSize-1)/groupSize)
	}
	f := &groupForm{e: e, gs: make([]*client.SessionGroup, n)}
	cfg := e.config()
	cfg.Pool = nil
	for i := range f.gs {
		dctx, cancel := context.WithTimeout(ctx, e.o.timeout)
		g, err := client.NewSessionGroup(dctx, cfg)
		cancel()
		if err != nil {
			f.close()
			return nil, fmt.Errorf("dial the cell at %v: %w", e.o.servers, err)
		}
		f.gs[i] = g
	}
	return f, nil
}

func (f *groupForm) create(ctx context.Context, i int) error {
	ctx, cancel := context.WithTimeout(ctx, f.e.o.timeout)
	defer cancel()
	_, err := f.gs[i%len(f.gs)].Create(ctx)
	return err
}

func (f *groupForm) lost() int64 {
	var n int64
	for _, g := range f.gs {
		n += int64(g.Lost())
	}
	return n
}

func (f *groupForm) close() {
	var wg sync.WaitGroup
	for _, g := range f.gs {
		if g == nil {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			g.Close(ctx)
		}()
	}
	wg.Wait()
}

// runSessions: create -clients sessions, hold them for -duration.
func runSessions(ctx context.Context, e *env) (*Result, error) {
	n := e.o.clients
	var form sessionForm = &clientForm{e: e, cs: make([]*client.Client, n)}
	if e.o.group {
		f, err := newGroupForm(ctx, e)
		if err != nil {
			return nil, err
		}
		form = f
	}
	defer form.close()
	ws := make([]*worker, n)
	for i := range ws {
		ws[i] = &worker{id: i, run: e}
	}
	// Creation counts as measured: the phase is open from the start.
	e.phase.Store(phaseMeasure)
	start := time.Now()
	var created atomic.Int64
	stopProg := e.prog.run(int64(n), created.Load, func() string {
		return fmt.Sprintf("sessions: %d of %d created", created.Load(), n)
	})
	sem := make(chan struct{}, e.dialParallelism())
	var wg sync.WaitGroup
	for i := range ws {
		if e.limiter.Wait(ctx) != nil {
			break
		}
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			t0 := time.Now()
			if err := form.create(ctx, i); err != nil {
				if ctx.Err() == nil {
					ws[i].fail(err)
				}
				return
			}
			ws[i].record(time.Since(t0))
			created.Add(1)
		}()
	}
	wg.Wait()
	createTime := time.Since(start)
	stopProg()
	if created.Load() == 0 {
		if err := ws[0].firstErr; err != nil {
			return nil, fmt.Errorf("dial the cell at %v: %w", e.o.servers, err)
		}
		return nil, fmt.Errorf("no session created")
	}

	// Hold them. A lost session is one whose Done closed before the end.
	e.usage.begin()
	holdStart := time.Now()
	intr := ctx.Err() != nil
	if !intr {
		stopProg = e.prog.runFor(e.o.duration, holdStart, func() string {
			return fmt.Sprintf("sessions: holding %d", created.Load())
		})
		t := time.NewTimer(e.o.duration)
		select {
		case <-t.C:
		case <-ctx.Done():
			intr = true
		}
		t.Stop()
		stopProg()
	}
	held := time.Since(holdStart)
	e.usage.finish()
	e.phase.Store(phaseDone)
	lost := form.lost()

	r := &Result{
		Workload:    e.o.workload.name,
		Clients:     n,
		Duration:    createTime + held,
		Rate:        e.o.rate,
		RateOf:      "sessions created",
		Interrupted: intr,
		OpsMeaning:  "sessions created",
		LatencyOf:   "session creation (client.Dial, or SessionGroup.Create with -group)",
	}
	collect(r, ws)
	r.Extras = []Figure{
		{"create_s", createTime.Seconds(), "time to create them all"},
		{"creates_per_s", perSec(r.Ops(), createTime), "sessions created per second"},
		{"held_s", held.Seconds(), "how long they were held after"},
		{"sessions_lost", lost, "sessions that ended before the end of the hold"},
	}
	return r, nil
}
