package main

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/chubby-dev/chubby/client"
)

// fanoutState is what the readers have read: each reader's newest content
// generation and when its read returned it. Readers write it; the writer
// reads it after each write.
type fanoutState struct {
	mu       sync.Mutex
	gen      []uint64
	at       []time.Time
	errs     int64
	firstErr error
	notify   chan struct{} // capacity 1: some reader moved on
}

// saw notes that reader i read generation gen at t.
func (s *fanoutState) saw(i int, gen uint64, t time.Time) {
	s.mu.Lock()
	if gen > s.gen[i] {
		s.gen[i], s.at[i] = gen, t
	}
	s.mu.Unlock()
	select {
	case s.notify <- struct{}{}:
	default:
	}
}

func (s *fanoutState) fail(err error) {
	s.mu.Lock()
	s.errs++
	if s.firstErr == nil {
		s.firstErr = err
	}
	s.mu.Unlock()
}

// waitAll waits until every reader has generation gen or timeout passes,
// and returns each reader's generation and read time.
func (s *fanoutState) waitAll(ctx context.Context, gen uint64, timeout time.Duration) ([]uint64, []time.Time) {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		s.mu.Lock()
		all := true
		for _, g := range s.gen {
			all = all && g >= gen
		}
		gens, ats := append([]uint64(nil), s.gen...), append([]time.Time(nil), s.at...)
		s.mu.Unlock()
		if all {
			return gens, ats
		}
		select {
		case <-s.notify:
		case <-deadline.C:
			return gens, ats
		case <-ctx.Done():
			return gens, ats
		}
	}
}

// runFanout: one writer, N caching readers notified of each write.
func runFanout(ctx context.Context, e *env) (*Result, error) {
	n := e.o.clients
	cs, err := e.dialWithDir(ctx, n+1) // the writer, last, makes it
	if err != nil {
		return nil, err
	}
	readers, writer := cs[:n], cs[n]
	path := e.file("config")
	value := func(round int) []byte {
		v := bytes.Repeat([]byte("."), e.o.size)
		copy(v, fmt.Sprintf("write %d", round))
		return v
	}
	if _, err := writer.WriteFile(ctx, path, value(0)); err != nil {
		return nil, fmt.Errorf("write %s: %w", path, err)
	}
	wh, err := writer.Open(ctx, path, client.NoCache())
	if err != nil {
		return nil, err
	}
	defer wh.Close()
	hs, err := openEach(ctx, readers, func(int) string { return path }, client.WithEvents(client.EventContentsModified))
	if err != nil {
		return nil, err
	}
	defer closeHandles(hs)

	st := &fanoutState{gen: make([]uint64, n), at: make([]time.Time, n), notify: make(chan struct{}, 1)}
	for i, h := range hs {
		_, stat, err := h.GetContentsAndStat(ctx)
		if err != nil {
			return nil, err
		}
		st.gen[i] = stat.ContentGen
	}
	// Each reader reads the file after each contents_modified event.
	readersDone := make(chan struct{})
	var rwg sync.WaitGroup
	for i, c := range readers {
		rwg.Add(1)
		go func() {
			defer rwg.Done()
			for {
				select {
				case <-readersDone:
					return
				case ev := <-c.Events():
					if ev.Type != client.EventContentsModified || ev.Path != path {
						continue
					}
					_, stat, err := hs[i].GetContentsAndStat(ctx)
					if err != nil {
						if ctx.Err() == nil {
							st.fail(fmt.Errorf("reader %d: %w", i, err))
						}
						continue
					}
					st.saw(i, stat.ContentGen, time.Now())
				}
			}
		}()
	}
	stopReaders := sync.OnceFunc(func() { close(readersDone); rwg.Wait() })
	defer stopReaders()

	rws := make([]*worker, n) // the readers' records; only the writer's goroutine writes them
	for i := range rws {
		rws[i] = &worker{id: i, run: e}
	}
	var (
		writes        int64
		missed        int64
		last, writeLt []time.Duration
		round         int
	)
	wws, window, intr := e.loop(ctx, 1, func(ctx context.Context, w *worker) error {
		round++
		t0 := time.Now()
		stat, err := wh.SetContents(ctx, value(round))
		if err != nil {
			return err
		}
		t1 := time.Now()
		gens, ats := st.waitAll(ctx, stat.ContentGen, e.o.roundTimeout)
		if ctx.Err() != nil {
			return nil
		}
		measuring := e.measuring()
		slowest := time.Duration(0)
		for i, g := range gens {
			if g != stat.ContentGen {
				missed++
				rws[i].fail(fmt.Errorf("reader %d had content generation %d, not %d, %v after the write", i, g, stat.ContentGen, e.o.roundTimeout))
				continue
			}
			d := max(ats[i].Sub(t1), 0)
			slowest = max(slowest, d)
			if measuring {
				rws[i].record(d)
			}
		}
		if measuring {
			writes++
			last = append(last, slowest)
			writeLt = append(writeLt, t1.Sub(t0))
		}
		return nil
	})
	stopReaders()

	r := e.result(rws, window, intr)
	r.Clients, r.RateOf = n, "writes"
	r.Errors += wws[0].errs + st.errs
	if r.FirstError == "" {
		if wws[0].firstErr != nil {
			r.FirstError = "write: " + wws[0].firstErr.Error()
		} else if st.firstErr != nil {
			r.FirstError = st.firstErr.Error()
		}
	}
	r.OpsMeaning = "deliveries: a reader read a write's generation"
	r.LatencyOf = "per-reader delay, write return to that reader's read of the new generation"
	r.Extras = []Figure{
		{"readers", int64(n), "caching readers (clients); the writer is one more session"},
		{"size", int64(e.o.size), "bytes in the file"},
		{"writes", writes, "writes (rounds) completed in the measured window"},
		{"writes_per_s", perSec(writes, window), "writes / duration_s"},
		{"missed", missed, "reader×write pairs not delivered within " + e.o.roundTimeout.String() + " (in errors too)"},
	}
	r.Extras = append(r.Extras, latencyFigures("last_reader", summarize(last), "delay of the slowest reader of a write")...)
	r.Extras = append(r.Extras, latencyFigures("write", summarize(writeLt), "write (SetContents) latency")...)
	return r, nil
}
