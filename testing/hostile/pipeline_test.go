package hostile

import (
	"testing"
	"time"

	"github.com/chubby-dev/chubby/testing/proc"
	"github.com/chubby-dev/chubby/wire"
)

// TestPipelinedWritesDoNotStall replays issue 17, finding 1 (one session
// pipelining writes to one file stalled every other session for the whole
// pipeline: 26 s for 25,000 writes): a raw session writes 25,000
// SetContents of one file without waiting for replies while a second
// session writes another file in a loop. Bound: the second session's
// writes take at most 100 ms at the 99th percentile, and every pipelined
// write is answered.
func TestPipelinedWritesDoNotStall(t *testing.T) {
	n := scale(25_000, 25_000)
	s := proc.StartServer(t, proc.Options{LogLevel: "info"})
	by := newBystander(t, s)
	hot := root + "/hot"
	r := rawSession(t, s, time.Minute)

	done := make(chan struct{})
	var got outcome
	var err error
	var took time.Duration
	go func() {
		defer close(done)
		start := time.Now()
		got, err = pipeline(r, n, func(i int) (wire.Request, any) {
			req := stamp(r, wire.MSetContents)
			req.Call = uint64(i + 1)
			return req, wire.SetContentsArgs{Path: hot, Data: []byte("y"), Create: true}
		}, nil)
		took = time.Since(start)
	}()
	by.writeUntil(t, root+"/other", done, 0)
	if err != nil {
		t.Fatalf("pipeline: %v", err)
	}
	if got[""] != n {
		t.Errorf("pipelined writes: %v, want %d successes", got, n)
	}
	t.Logf("%d pipelined SetContents of one file answered in %v; the second session's writes meanwhile: %s",
		n, took.Round(time.Millisecond), &by.lat)
	wantP99(t, &by.lat, "second session's writes beside the pipeline")
}
