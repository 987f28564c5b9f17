package server_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/chubby-dev/chubby/client"
	"github.com/chubby-dev/chubby/fs"
	"github.com/chubby-dev/chubby/server"
	"github.com/chubby-dev/chubby/testing/cell"
	"github.com/chubby-dev/chubby/testing/wait"
	"github.com/chubby-dev/chubby/wire"
)

// callTimeout bounds every client call a test makes; a call that needs
// longer is a bug, not a slow machine.
const callTimeout = 10 * time.Second

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	t.Cleanup(cancel)
	return ctx
}

// barrier waits until the master has applied, and acted on, everything
// proposed so far.
func barrier(t *testing.T, c *cell.Cell) {
	t.Helper()
	if err := server.Barrier(c.Server()); err != nil {
		t.Fatalf("raft barrier: %v", err)
	}
}

func open(t *testing.T, cl *client.Client, path string, opts ...client.OpenOption) *client.Handle {
	t.Helper()
	h, err := cl.Open(ctxT(t), path, opts...)
	if err != nil {
		t.Fatalf("open %s: %v", path, err)
	}
	return h
}

// acquireAsync starts a blocking Acquire; its result arrives on the channel.
func acquireAsync(ctx context.Context, h *client.Handle, mode client.Mode, opts ...client.LockOption) <-chan error {
	ch := make(chan error, 1)
	go func() { ch <- h.Acquire(ctx, mode, opts...) }()
	return ch
}

// queue starts a blocking Acquire and returns once the master has queued it
// (its command is applied), so several waiters queue in a known order.
func queue(t *testing.T, c *cell.Cell, h *client.Handle, ctx context.Context, opts ...client.LockOption) <-chan error {
	t.Helper()
	before := c.Status().Applied
	ch := acquireAsync(ctx, h, client.Exclusive, opts...)
	c.WaitApplied(t, before)
	barrier(t, c)
	select {
	case err := <-ch:
		t.Fatalf("Acquire of %s returned %v at once; want it queued", h.Path(), err)
	default:
	}
	return ch
}

// granted waits for a blocking Acquire to return and fails unless it succeeded.
func granted(t *testing.T, ch <-chan error, what string) {
	t.Helper()
	select {
	case err := <-ch:
		if err != nil {
			t.Fatalf("%s: Acquire failed: %v", what, err)
		}
	case <-time.After(wait.Timeout):
		t.Fatalf("%s: Acquire not granted within %v", what, wait.Timeout)
	}
}

// notGranted checks that a blocking Acquire is still blocked. The master is
// idle (callers run a barrier first), so a wrong grant would already be on
// its way; the short real-time wait only covers the TCP hop.
func notGranted(t *testing.T, ch <-chan error, what string) {
	t.Helper()
	wait.Never(t, 20*time.Millisecond, what+": Acquire returned", func() bool { return len(ch) > 0 })
}

func sequencer(t *testing.T, h *client.Handle) client.Sequencer {
	t.Helper()
	seq, err := h.Sequencer()
	if err != nil {
		t.Fatalf("sequencer of %s: %v", h.Path(), err)
	}
	return seq
}

func checkSeq(t *testing.T, cl *client.Client, seq client.Sequencer) bool {
	t.Helper()
	ok, err := cl.CheckSequencer(ctxT(t), seq)
	if err != nil {
		t.Fatalf("CheckSequencer(%s): %v", seq, err)
	}
	return ok
}

func wantErr(t *testing.T, err, want error, what string) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Fatalf("%s: got error %v, want %v", what, err, want)
	}
}

func contents(t *testing.T, cl *client.Client, path string) string {
	t.Helper()
	h := open(t, cl, path)
	data, _, err := h.GetContentsAndStat(ctxT(t))
	if err != nil {
		t.Fatalf("read %s: %v", path, err)
	}
	return string(data)
}

// healthy checks the cell still serves a new client: the files in want
// have their committed contents, and a new write is read back.
func healthy(t *testing.T, c *cell.Cell, want map[string]string) {
	t.Helper()
	cl := c.Dial(t, client.Config{})
	defer cl.Close()
	for p, v := range want {
		if got := contents(t, cl, p); got != v {
			t.Fatalf("%s = %q, want %q (committed data lost)", p, got, v)
		}
	}
	p := c.Path("healthy")
	v := time.Now().String()
	if _, err := cl.WriteFile(ctxT(t), p, []byte(v)); err != nil {
		t.Fatalf("write by a new client: %v", err)
	}
	if got := contents(t, cl, p); got != v {
		t.Fatalf("read back %q, want %q", got, v)
	}
}

// rawCall makes a call on a raw session and fails the test on error.
func rawCall(t *testing.T, r *cell.RawConn, m wire.Method, args, reply any) {
	t.Helper()
	if err := r.Call(m, args, reply); err != nil {
		t.Fatalf("raw %s: %v", m, err)
	}
}

func rawAcquire(t *testing.T, r *cell.RawConn, path string, delay time.Duration) fs.Sequencer {
	t.Helper()
	var rep wire.SeqReply
	rawCall(t, r, wire.MAcquire, wire.AcquireArgs{Path: path, Mode: fs.Exclusive, LockDelay: int64(delay)}, &rep)
	return rep.Seq
}

// waitParked waits until n sessions have a KeepAlive parked on the master.
func waitParked(t *testing.T, c *cell.Cell, n int, what string) {
	t.Helper()
	wait.For(t, 0, fmt.Sprintf("%s: %d parked KeepAlives", what, n), func() bool {
		return server.ParkedKeepAlives(c.Server()) == n
	})
}
