package server_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/chubby-dev/chubby/client"
	"github.com/chubby-dev/chubby/fs"
	"github.com/chubby-dev/chubby/server"
	"github.com/chubby-dev/chubby/testing/cell"
	"github.com/chubby-dev/chubby/testing/wait"
	"github.com/chubby-dev/chubby/wire"
)

// TestConnectionLimit (issue 17, finding 4): past MaxConns a connection is
// answered resource_exhausted and closed; the connections already open
// keep working, and a slot freed is usable again.
func TestConnectionLimit(t *testing.T) {
	c := cell.Start(t, cell.WithServerConfig(func(_ int, cfg *server.Config) { cfg.MaxConns = 3 }))
	var open []*cell.RawConn
	for range 3 {
		r := c.DialRaw(t)
		if _, err := r.Hello(); err != nil {
			t.Fatalf("connection within the limit: %v", err)
		}
		open = append(open, r)
	}
	over := c.DialRaw(t)
	resp, err := over.ReadResponse(10 * time.Second)
	if err != nil {
		t.Fatalf("the connection over the limit got no answer: %v", err)
	}
	if err := resp.Err(); !errors.Is(err, wire.ErrResourceExhausted) {
		t.Fatalf("over the limit: %v, want resource_exhausted", err)
	}
	if _, err := over.Hello(); err == nil {
		t.Fatal("the connection over the limit was served")
	}
	if _, err := open[0].Hello(); err != nil {
		t.Fatalf("an open connection stopped working: %v", err)
	}
	open[2].Close()
	// The server drops the closed connection asynchronously.
	wait.For(t, 0, "the freed connection slot to serve a new connection", func() bool {
		r := c.DialRaw(t)
		_, err := r.Hello()
		if err != nil {
			r.Close()
		}
		return err == nil
	})
}

// TestSessionLimit: past MaxSessions CreateSession fails with
// resource_exhausted (Dial returns it); ending a session frees its slot.
func TestSessionLimit(t *testing.T) {
	c := cell.Start(t, cell.WithServerConfig(func(_ int, cfg *server.Config) { cfg.MaxSessions = 2 }))
	a := c.Dial(t, client.Config{})
	c.Dial(t, client.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if cl, err := client.Dial(ctx, client.Config{Servers: []string{c.Addr()}}); !errors.Is(err, client.ErrResourceExhausted) {
		if cl != nil {
			cl.Close()
		}
		t.Fatalf("a third session: %v, want ErrResourceExhausted", err)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	cl, err := client.Dial(ctx, client.Config{Servers: []string{c.Addr()}})
	if err != nil {
		t.Fatalf("a session after one ended: %v", err)
	}
	cl.Close()
}

// TestFrameMemoryBounded (issue 17, finding 4): connections that send most
// of a large frame and then stall hold no more than MaxFrameMemory of the
// server's heap between them (each held about a megabyte before), and
// small calls are served meanwhile.
func TestFrameMemoryBounded(t *testing.T) {
	const budget = 2 << 20
	c := cell.Start(t, cell.WithServerConfig(func(_ int, cfg *server.Config) { cfg.MaxFrameMemory = budget }))
	const conns, frame, sent = 40, 1_000_000, 900_000
	payload := append(binary.BigEndian.AppendUint32(nil, frame), make([]byte, sent)...)

	var ms runtime.MemStats
	heap := func() uint64 {
		runtime.GC()
		runtime.ReadMemStats(&ms)
		return ms.HeapAlloc
	}
	base := heap()
	var wg sync.WaitGroup
	var ncs []net.Conn
	for range conns {
		nc := c.DialRaw(t).Conn()
		ncs = append(ncs, nc)
		wg.Add(1)
		go func() {
			defer wg.Done()
			nc.Write(payload) // may block while the server reads others: the point
		}()
	}
	t.Cleanup(func() { // closing the connections unblocks the writes
		for _, nc := range ncs {
			nc.Close()
		}
		wg.Wait()
	})
	// While the frames stall, the heap stays within the budget plus the
	// connections' read buffers (16 KiB each) and slack for the cell.
	bound := uint64(budget + conns*(16<<10) + 8<<20)
	peak := uint64(0)
	for range 20 {
		if h := heap(); h > base {
			peak = max(peak, h-base)
		}
		if _, err := c.DialRaw(t).Hello(); err != nil {
			t.Fatalf("a small call while large frames stall: %v", err)
		}
	}
	if peak > bound {
		t.Fatalf("%d stalled 1 MB frames grew the heap by %d bytes; want at most %d (a %d-byte budget)", conns, peak, bound, budget)
	}
	t.Logf("%d stalled 1 MB frames: heap grew by %d bytes at most (budget %d)", conns, peak, budget)
}

// TestMassExpiry (issue 17, finding 3): hundreds of abandoned sessions whose
// leases end together are all expired after their TTL, in batches (one
// leadership check per batch, a bounded number of proposals at once), and
// the master keeps serving the sessions that are alive.
func TestMassExpiry(t *testing.T) {
	c := cell.Start(t, cell.WithManualClock())
	mc := c.Manual(t)
	alive := c.Dial(t, client.Config{SessionTTL: time.Minute})
	base := c.Status().Sessions
	const abandoned = 300
	r := c.DialRaw(t)
	if _, err := r.Hello(); err != nil {
		t.Fatal(err)
	}
	for range abandoned {
		if _, err := r.CreateSession(2 * time.Second); err != nil {
			t.Fatal(err)
		}
	}
	if n := c.Status().Sessions; n != base+abandoned {
		t.Fatalf("%d sessions, want %d", n, base+abandoned)
	}
	mc.Advance(2 * time.Second)
	wait.For(t, 0, "every abandoned session to expire", func() bool { return c.Status().Sessions == base })
	if _, err := alive.WriteFile(context.Background(), c.Path("after"), []byte("x")); err != nil {
		t.Fatalf("the live session after the flood of expiries: %v", err)
	}
}

// TestBlockedAcquiresDoNotHoldUpTheConnection: a connection runs a bounded
// number of calls at once (back-pressure), but calls waiting for a lock
// grant do not count: with more Acquires blocked on one connection than it
// runs at once, that connection's other calls are still answered, and every
// wait is granted once the locks are released.
func TestBlockedAcquiresDoNotHoldUpTheConnection(t *testing.T) {
	c := cell.Start(t)
	a := c.NewRawSession(t, 0)
	b := c.NewRawSession(t, 0)
	const n = 100 // more than a connection runs at once
	var seqs []fs.Sequencer
	for i := range n {
		p := c.Path(fmt.Sprintf("l%d", i))
		if err := a.Call(wire.MOpen, wire.OpenArgs{Path: p, Create: true}, nil); err != nil {
			t.Fatal(err)
		}
		var rep wire.SeqReply
		if err := a.Call(wire.MAcquire, wire.AcquireArgs{Path: p, Mode: fs.Exclusive}, &rep); err != nil {
			t.Fatal(err)
		}
		seqs = append(seqs, rep.Seq)
	}
	var waits []uint64
	for i := range n {
		id, err := b.Go(wire.MAcquire, wire.AcquireArgs{Path: seqs[i].Path, Mode: fs.Exclusive, Wait: true, WaitID: uint64(i + 1)})
		if err != nil {
			t.Fatal(err)
		}
		waits = append(waits, id)
	}
	for range 3 { // answered while the n Acquires wait on the same connection
		if err := b.Call(wire.MGetStat, wire.NodeArgs{Path: seqs[0].Path}, nil); err != nil {
			t.Fatalf("a call behind %d blocked Acquires: %v", n, err)
		}
	}
	for _, seq := range seqs {
		if err := a.Call(wire.MRelease, wire.ReleaseArgs{Path: seq.Path, Gen: seq.Gen}, nil); err != nil {
			t.Fatal(err)
		}
	}
	for i, id := range waits {
		resp, err := b.Await(id, 10*time.Second)
		if err != nil {
			t.Fatalf("wait %d: %v", i, err)
		}
		if err := resp.Err(); err != nil {
			t.Fatalf("wait %d: %v", i, err)
		}
	}
}
