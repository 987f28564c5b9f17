package server

import (
	"bytes"
	"runtime"
	"strconv"
	"testing"

	"github.com/chubby-dev/chubby/testing/wait"
)

func goroutineID() uint64 {
	b := make([]byte, 64)
	b = b[:runtime.Stack(b, false)]
	b = bytes.TrimPrefix(b, []byte("goroutine "))
	id, _ := strconv.ParseUint(string(b[:bytes.IndexByte(b, ' ')]), 10, 64)
	return id
}

// TestWorkerPool: a call runs on the goroutine an earlier call left idle
// (its grown stack kept), run never waits for a busy worker, and idle
// workers end when the server stops.
func TestWorkerPool(t *testing.T) {
	stop := make(chan struct{})
	p := newWorkerPool(stop)
	ids := make(chan uint64, 3)
	p.run(func() { ids <- goroutineID() })
	first := <-ids

	// While a worker is busy, run starts another rather than waiting.
	block := make(chan struct{})
	p.run(func() { ids <- goroutineID(); <-block })
	blocked := <-ids
	p.run(func() { ids <- goroutineID() })
	third := <-ids
	if third == blocked {
		t.Fatal("a call ran on the worker busy with another")
	}
	close(block)

	// Hand a call to an idle worker: one of those that ran the calls
	// above (a worker that ended after its call could not take it).
	seen := map[uint64]bool{first: true, blocked: true, third: true}
	wait.For(t, 0, "an idle worker to take a call", func() bool {
		select {
		case p.work <- func() { ids <- goroutineID() }:
			return true
		default:
			return false
		}
	})
	if reused := <-ids; !seen[reused] {
		t.Fatalf("call ran on goroutine %d, not on a worker kept from %v", reused, seen)
	}

	before := runtime.NumGoroutine()
	close(stop)
	wait.For(t, 0, "idle workers to end after stop", func() bool { return runtime.NumGoroutine() <= before-2 })
}
