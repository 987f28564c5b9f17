package failover_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/chubby-dev/chubby/client"
	"github.com/chubby-dev/chubby/testing/cell"
	"github.com/chubby-dev/chubby/testing/wait"
	"github.com/chubby-dev/chubby/wire"
)

// callTimeout bounds a client call that must succeed: far more than a
// failover takes, so hitting it means a bug.
const callTimeout = 15 * time.Second

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	t.Cleanup(cancel)
	return ctx
}

// others lists the servers of c other than i.
func others(c *cell.Cluster, i int) []int {
	var out []int
	for j := 0; j < c.N(); j++ {
		if j != i {
			out = append(out, j)
		}
	}
	return out
}

func open(t *testing.T, cl *client.Client, path string, opts ...client.OpenOption) *client.Handle {
	t.Helper()
	h, err := cl.Open(ctxT(t), path, opts...)
	if err != nil {
		t.Fatalf("open %s: %v", path, err)
	}
	return h
}

func stat(t *testing.T, h *client.Handle) client.Stat {
	t.Helper()
	st, err := h.GetStat(ctxT(t))
	if err != nil {
		t.Fatalf("stat %s: %v", h.Path(), err)
	}
	return st
}

func contents(t *testing.T, h *client.Handle) string {
	t.Helper()
	data, _, err := h.GetContentsAndStat(ctxT(t))
	if err != nil {
		t.Fatalf("read %s: %v", h.Path(), err)
	}
	return string(data)
}

func checkSeq(t *testing.T, cl *client.Client, seq client.Sequencer) bool {
	t.Helper()
	ok, err := cl.CheckSequencer(ctxT(t), seq)
	if err != nil {
		t.Fatalf("CheckSequencer(%s): %v", seq, err)
	}
	return ok
}

func rawCall(t *testing.T, r *cell.RawConn, m wire.Method, args, reply any) {
	t.Helper()
	if err := r.Call(m, args, reply); err != nil {
		t.Fatalf("raw %s: %v", m, err)
	}
}

// op is one operation of a register history: a write of value val by the
// one writer, or a read that returned val. ok is false for a write whose
// outcome is unknown (it may or may not have been applied) and for a read
// that failed (failed reads are recorded only to count them).
type op struct {
	who        string
	write      bool
	val        int
	ok         bool
	err        error
	start, end time.Time
}

// history records the operations on one register whose writes come from a
// single sequential writer writing 1, 2, 3, ...
type history struct {
	mu  sync.Mutex
	ops []op
}

func (h *history) add(o op) {
	h.mu.Lock()
	h.ops = append(h.ops, o)
	h.mu.Unlock()
}

func (h *history) snapshot() []op {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]op(nil), h.ops...)
}

// lastAcked is the highest acknowledged write and when it was acknowledged.
func (h *history) lastAcked() (int, time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	val, at := 0, time.Time{}
	for _, o := range h.ops {
		if o.write && o.ok && o.val > val {
			val, at = o.val, o.end
		}
	}
	return val, at
}

// check verifies what linearizability demands of every successful read of
// the register, given a single sequential writer of increasing values:
//   - it is not older than the newest write acknowledged before the read
//     started (no stale read, whichever server answered it);
//   - it is not newer than the newest write that had started before the
//     read ended (no value from nowhere).
//
// Writes whose outcome is unknown may or may not be seen.
func (h *history) check(t *testing.T) (reads, writes int) {
	t.Helper()
	ops := h.snapshot()
	for _, r := range ops {
		if r.write {
			if r.ok {
				writes++
			}
			continue
		}
		if !r.ok {
			continue
		}
		reads++
		lower, upper := 0, 0
		var lowerAt time.Time
		for _, w := range ops {
			if !w.write {
				continue
			}
			if w.ok && w.end.Before(r.start) && w.val > lower {
				lower, lowerAt = w.val, w.end
			}
			if w.start.Before(r.end) && w.val > upper {
				upper = w.val
			}
		}
		if r.val < lower {
			t.Errorf("stale read by %s: got %d in [%s, %s], but %d was acknowledged at %s",
				r.who, r.val, r.start.Format("15:04:05.000"), r.end.Format("15:04:05.000"), lower, lowerAt.Format("15:04:05.000"))
		}
		if r.val > upper {
			t.Errorf("read by %s returned %d, never written before the read ended (last write started: %d)", r.who, r.val, upper)
		}
	}
	return reads, writes
}

// workload runs a sequential writer and a reader of one register through
// clients that follow the master, recording everything in hist, until stop
// is called.
type workload struct {
	hist *history
	stop func()
	// pause holds the writer (after its write in flight); resume lets it go.
	pauseMu sync.Mutex
}

func (w *workload) pause()  { w.pauseMu.Lock() }
func (w *workload) resume() { w.pauseMu.Unlock() }

func startWorkload(t *testing.T, c *cell.Cluster, path string, hist *history) *workload {
	t.Helper()
	w := c.Dial(t, client.Config{})
	r := c.Dial(t, client.Config{})
	if _, err := w.WriteFile(ctxT(t), path, []byte("0")); err != nil {
		t.Fatalf("initial write: %v", err)
	}
	rh := open(t, r, path)
	ctx, cancel := context.WithCancel(context.Background())
	wl := &workload{hist: hist}
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { // the one writer: 1, 2, 3, ...
		defer wg.Done()
		for v := 1; ctx.Err() == nil; v++ {
			wl.pauseMu.Lock()
			cctx, ccancel := context.WithTimeout(ctx, callTimeout)
			start := time.Now()
			_, err := w.WriteFile(cctx, path, []byte(strconv.Itoa(v)))
			ccancel()
			hist.add(op{who: "writer", write: true, val: v, ok: err == nil, err: err, start: start, end: time.Now()})
			wl.pauseMu.Unlock()
			wait.Sleep(ctx, 5*time.Millisecond) // pacing
		}
	}()
	go func() {
		defer wg.Done()
		for ctx.Err() == nil {
			cctx, ccancel := context.WithTimeout(ctx, callTimeout)
			start := time.Now()
			data, _, err := rh.GetContentsAndStat(cctx)
			ccancel()
			recordRead(hist, "reader", data, err, start)
			wait.Sleep(ctx, 5*time.Millisecond) // pacing
		}
	}()
	wl.stop = func() { cancel(); wg.Wait() }
	return wl
}

// recordRead adds a read to hist; a read that returned something that is
// not a value of the register is recorded as value -1 (always an error).
func recordRead(hist *history, who string, data []byte, err error, start time.Time) {
	o := op{who: who, ok: err == nil, err: err, start: start, end: time.Now()}
	if err == nil {
		v, perr := strconv.Atoi(string(data))
		if perr != nil {
			v = -1
		}
		o.val = v
	}
	hist.add(o)
}

// waitAckAfter waits until the writer has a write acknowledged that started
// after t0 and returns its value and acknowledgement time.
func waitAckAfter(t *testing.T, hist *history, t0 time.Time) (int, time.Time) {
	t.Helper()
	val, at := 0, time.Time{}
	wait.For(t, callTimeout, "a write acknowledged after "+t0.Format("15:04:05.000"), func() bool {
		for _, o := range hist.snapshot() {
			if o.write && o.ok && o.start.After(t0) {
				val, at = o.val, o.end
				return true
			}
		}
		return false
	})
	return val, at
}

// masterEpochs samples which servers report IsMaster, every few
// milliseconds, and records any moment two of them do so with the same
// epoch (two masters of one epoch would be a split brain; an old master
// that has not yet noticed it is deposed has an older epoch and can serve
// nothing).
type masterEpochs struct {
	mu       sync.Mutex
	overlaps int // moments with two servers reporting IsMaster
	same     []string
	stop     func()
}

func watchMasters(c *cell.Cluster) *masterEpochs {
	m := &masterEpochs{}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		tk := time.NewTicker(2 * time.Millisecond)
		defer tk.Stop()
		for {
			select {
			case <-done:
				return
			case <-tk.C:
			}
			epochs := map[uint64]int{}
			n := 0
			for i := 0; i < c.N(); i++ {
				srv := c.Server(i)
				if srv == nil {
					continue
				}
				if e := srv.Epoch(); e != 0 {
					n++
					if j, ok := epochs[e]; ok {
						m.mu.Lock()
						m.same = append(m.same, fmt.Sprintf("node%d and node%d both master at epoch %d", j, i, e))
						m.mu.Unlock()
					}
					epochs[e] = i
				}
			}
			if n > 1 {
				m.mu.Lock()
				m.overlaps++
				m.mu.Unlock()
			}
		}
	}()
	m.stop = func() { close(done); wg.Wait() }
	return m
}

func (m *masterEpochs) check(t *testing.T) {
	t.Helper()
	m.stop()
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, s := range m.same {
		t.Errorf("split brain: %s", s)
	}
	if m.overlaps > 0 {
		t.Logf("%d samples saw an old master not yet deposed next to the new one (different epochs; allowed)", m.overlaps)
	}
}

// isCode reports whether err carries one of the fs sentinel errors.
func isAny(err error, targets ...error) bool {
	for _, e := range targets {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// method matches requests of method m for path (any path if "").
func method(m wire.Method, path string) func(*wire.Request) bool {
	return func(r *wire.Request) bool {
		if r.Method != m {
			return false
		}
		if path == "" {
			return true
		}
		var a struct {
			Path string `msgpack:"p"`
		}
		return wire.Unmarshal(r.Body, &a) == nil && a.Path == path
	}
}

var _ = wire.ErrNotMaster
