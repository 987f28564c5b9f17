package main

import (
	"bytes"
	"context"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/chubby-dev/chubby/client"
)

// runRead: every client reads one small file.
func runRead(ctx context.Context, e *env) (*Result, error) {
	cs, err := e.dialWithDir(ctx, e.o.clients)
	if err != nil {
		return nil, err
	}
	path := e.file("read")
	want := bytes.Repeat([]byte("r"), e.o.size)
	if _, err := cs[0].WriteFile(ctx, path, want); err != nil {
		return nil, fmt.Errorf("write %s: %w", path, err)
	}
	var opts []client.OpenOption
	if !e.o.cached {
		opts = append(opts, client.NoCache())
	}
	hs, err := openEach(ctx, cs, func(int) string { return path }, opts...)
	if err != nil {
		return nil, err
	}
	defer closeHandles(hs)

	// The caches' counters over the measured window.
	var hits, misses atomic.Int64
	cacheStats := func(sign int64) func() {
		return func() {
			for _, c := range cs {
				s := c.CacheStats()
				hits.Add(sign * int64(s.Hits))
				misses.Add(sign * int64(s.Misses))
			}
		}
	}
	e.atMeasure, e.atEnd = cacheStats(-1), cacheStats(+1)

	ws, window, intr := e.loop(ctx, len(cs), func(ctx context.Context, w *worker) error {
		t0 := time.Now()
		data, _, err := hs[w.id].GetContentsAndStat(ctx)
		if err != nil {
			return err
		}
		if len(data) != len(want) {
			return fmt.Errorf("read %s: %d bytes, want %d", path, len(data), len(want))
		}
		w.observe(time.Since(t0))
		return nil
	})
	r := e.result(ws, window, intr)
	r.OpsMeaning = "reads (GetContentsAndStat)"
	r.LatencyOf = "read"
	r.Extras = []Figure{
		{"cached", e.o.cached, "true: reads through the client cache; false: opened with client.NoCache"},
		{"size", int64(e.o.size), "bytes in the file"},
		{"cache_hits", hits.Load(), "client cache hits in the measured window"},
		{"cache_misses", misses.Load(), "client cache misses in the measured window"},
	}
	return r, nil
}

// runWrite: each client writes a file of its own, one write at a time.
func runWrite(ctx context.Context, e *env) (*Result, error) {
	cs, err := e.dialWithDir(ctx, e.o.clients)
	if err != nil {
		return nil, err
	}
	hs, err := openEach(ctx, cs, func(i int) string { return e.file(fmt.Sprintf("write-%d", i)) }, client.Create(), client.NoCache())
	if err != nil {
		return nil, err
	}
	defer closeHandles(hs)
	bufs := make([][]byte, len(cs))
	for i := range bufs {
		bufs[i] = bytes.Repeat([]byte("w"), e.o.size)
	}
	seq := make([]uint64, len(cs))
	ws, window, intr := e.loop(ctx, len(cs), func(ctx context.Context, w *worker) error {
		seq[w.id]++ // each write's contents differ from the last
		copy(bufs[w.id], strconv.FormatUint(seq[w.id], 10))
		t0 := time.Now()
		if _, err := hs[w.id].SetContents(ctx, bufs[w.id]); err != nil {
			return err
		}
		w.observe(time.Since(t0))
		return nil
	})
	r := e.result(ws, window, intr)
	r.OpsMeaning = "writes (SetContents)"
	r.LatencyOf = "write, durable when it returns"
	r.Extras = []Figure{
		{"size", int64(e.o.size), "bytes per write"},
	}
	return r, nil
}
