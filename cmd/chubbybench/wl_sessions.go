package main

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/chubby-dev/chubby/client"
)

// runSessions: create -clients sessions, hold them for -duration.
func runSessions(ctx context.Context, e *env) (*Result, error) {
	n := e.o.clients
	ws := make([]*worker, n)
	cs := make([]*client.Client, n)
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
			c, err := e.dialOne(ctx)
			if err != nil {
				if ctx.Err() == nil {
					ws[i].fail(err)
				}
				return
			}
			ws[i].record(time.Since(t0))
			cs[i] = c
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
	var lost int64
	for _, c := range cs {
		if c == nil {
			continue
		}
		select {
		case <-c.Done():
			lost++
		default:
		}
	}

	r := &Result{
		Workload:    e.o.workload.name,
		Clients:     n,
		Duration:    createTime + held,
		Rate:        e.o.rate,
		RateOf:      "sessions created",
		Interrupted: intr,
		OpsMeaning:  "sessions created",
		LatencyOf:   "session creation (client.Dial)",
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
