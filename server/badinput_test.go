package server_test

// DESIGN invariant 9 (bad input): malformed frames, unknown calls, oversize
// contents, bad paths and wrong epochs get a clear error; the server keeps
// serving everyone else and nothing committed is lost. Chubby §4 motivates
// the limits (a 256 KiB contents cap after users stored 1.5 MB files).

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/chubby-dev/chubby/client"
	"github.com/chubby-dev/chubby/fs"
	"github.com/chubby-dev/chubby/testing/cell"
	"github.com/chubby-dev/chubby/testing/wait"
	"github.com/chubby-dev/chubby/wire"
)

// wantBadFrame reads what the server says about a broken stream: one
// bad_request response (for the whole connection: id 0 unless it could read
// an id), then the connection closes.
func wantBadFrame(t *testing.T, r *cell.RawConn, id uint64, mention string) {
	t.Helper()
	resp, err := r.ReadResponse(cell.RawTimeout)
	if err != nil {
		t.Fatalf("no error response before the close: %v", err)
	}
	if resp.ID != id || resp.Code != "bad_request" || !strings.Contains(resp.Error, mention) {
		t.Fatalf("response = {id %d, code %q, %q}; want id %d, bad_request mentioning %q", resp.ID, resp.Code, resp.Error, id, mention)
	}
	if _, err := r.ReadResponse(cell.RawTimeout); !errors.Is(err, io.EOF) && !isConnReset(err) {
		t.Fatalf("after a bad frame the connection must close; read = %v", err)
	}
}

func isConnReset(err error) bool {
	var op *net.OpError
	return errors.As(err, &op)
}

func frameHeader(n uint32) []byte { return binary.BigEndian.AppendUint32(nil, n) }

func TestBadInput(t *testing.T) {
	c := cell.Start(t, cell.WithManualClock())
	mc := c.Manual(t)

	// Committed before any abuse; checked after each case.
	owner := c.Dial(t, client.Config{})
	keep := map[string]string{c.Path("keep"): "precious", c.Path("dir/nested"): "also precious"}
	if _, err := owner.Open(ctxT(t), c.Path("dir"), client.CreateDir()); err != nil {
		t.Fatal(err)
	}
	for p, v := range keep {
		if _, err := owner.WriteFile(ctxT(t), p, []byte(v)); err != nil {
			t.Fatal(err)
		}
	}
	hl := open(t, owner, c.Path("keep"))
	if err := hl.TryAcquire(ctxT(t), client.Exclusive); err != nil {
		t.Fatal(err)
	}
	seq := sequencer(t, hl)
	check := func(t *testing.T) {
		t.Helper()
		healthy(t, c, keep)
		if !checkSeq(t, owner, seq) {
			t.Fatalf("the lock held before the bad input was lost (%s)", seq)
		}
	}

	t.Run("garbage bytes", func(t *testing.T) {
		r := c.DialRaw(t)
		// An HTTP request: its first four bytes read as a 1.2 GB length.
		if err := r.WriteBytes([]byte("GET /status HTTP/1.1\r\nHost: chubby\r\n\r\n")); err != nil {
			t.Fatal(err)
		}
		wantBadFrame(t, r, 0, "frame too large")
		check(t)
	})

	t.Run("garbage body", func(t *testing.T) {
		r := c.DialRaw(t)
		// 0xc1 is never used in msgpack.
		if err := r.WriteBytes(append(frameHeader(5), 0xc1, 0xc1, 0xc1, 0xc1, 0xc1)); err != nil {
			t.Fatal(err)
		}
		wantBadFrame(t, r, 0, "decode request")
		check(t)
	})

	t.Run("deep nesting", func(t *testing.T) {
		// Issue 17, finding 4: a million nested arrays in one frame cost
		// the decoder 226 MB; the shape check refuses them first.
		r := c.DialRaw(t)
		body := append(bytes.Repeat([]byte{0x91}, wire.MaxFrame-1), 0xc0)
		if err := r.WriteBytes(append(frameHeader(uint32(len(body))), body...)); err != nil {
			t.Fatal(err)
		}
		wantBadFrame(t, r, 0, "nested deeper")
		check(t)
	})

	t.Run("length over MaxFrame", func(t *testing.T) {
		r := c.DialRaw(t)
		// Only the header: the server must refuse without waiting for (or
		// allocating) a body.
		if err := r.WriteBytes(frameHeader(wire.MaxFrame + 1)); err != nil {
			t.Fatal(err)
		}
		wantBadFrame(t, r, 0, "frame too large")
		check(t)
	})

	t.Run("empty frame", func(t *testing.T) {
		r := c.DialRaw(t)
		if err := r.WriteBytes(frameHeader(0)); err != nil {
			t.Fatal(err)
		}
		wantBadFrame(t, r, 0, "empty frame")
		check(t)
	})

	t.Run("truncated frame", func(t *testing.T) {
		r := c.DialRaw(t)
		if err := r.WriteBytes(append(frameHeader(100), make([]byte, 10)...)); err != nil {
			t.Fatal(err)
		}
		r.Conn().(*net.TCPConn).CloseWrite()
		wantBadFrame(t, r, 0, "unexpected EOF")
		check(t)
	})

	t.Run("unknown method", func(t *testing.T) {
		for _, m := range []wire.Method{wire.MInvalid, wire.MethodCount, 200} {
			r := c.DialRaw(t)
			if _, err := r.Hello(); err != nil {
				t.Fatal(err)
			}
			id, err := r.WriteFrame(wire.Request{ID: 42, Method: m, Epoch: r.Epoch}, wire.Empty{})
			if err != nil {
				t.Fatal(err)
			}
			wantBadFrame(t, r, id, "unknown call")
		}
		check(t)
	})

	t.Run("malformed arguments", func(t *testing.T) {
		r := c.NewRawSession(t, 0)
		// A valid envelope whose body is a string where OpenArgs is expected.
		err := r.Call(wire.MOpen, "not an OpenArgs", nil)
		if !errors.Is(err, fs.ErrBadRequest) {
			t.Fatalf("Open with a malformed body: %v, want bad_request", err)
		}
		// The connection stays usable for well-formed calls.
		var st wire.StatReply
		if err := r.Call(wire.MGetStat, wire.NodeArgs{Path: c.Path("keep")}, &st); err != nil {
			t.Fatalf("next call on the same connection: %v", err)
		}
		check(t)
	})

	t.Run("wrong epoch", func(t *testing.T) {
		r := c.NewRawSession(t, 0)
		epoch := r.Epoch
		for _, e := range []uint64{0, epoch - 1, epoch + 1, epoch + 1000} {
			r.Epoch = e
			err := r.Call(wire.MGetStat, wire.NodeArgs{Path: c.Path("keep")}, nil)
			if !errors.Is(err, wire.ErrWrongEpoch) || wire.Code(err) != "wrong_epoch" {
				t.Fatalf("call with epoch %d (master's %d): %v, want wrong_epoch", e, epoch, err)
			}
		}
		r.Epoch = epoch
		rawCall(t, r, wire.MSetContents, wire.SetContentsArgs{Path: c.Path("epoch-ok"), Data: []byte("x"), Create: true}, nil)
		r.Epoch = epoch + 1
		err := r.Call(wire.MSetContents, wire.SetContentsArgs{Path: c.Path("keep"), Data: []byte("clobbered")}, nil)
		wantErr(t, err, wire.ErrWrongEpoch, "write with a wrong epoch")
		check(t) // and "keep" was not clobbered
	})

	t.Run("bad paths", func(t *testing.T) {
		cl := c.Dial(t, client.Config{})
		bad := []string{"/ls/other/x", "/ls/localx/y", "/etc/passwd", "ls/local/x", "", c.Path("a/../keep"),
			c.Path("a//b"), c.Path("."), c.Path("sp ace"), c.Path("nul\x00"), c.Path("\xff"),
			c.Path(strings.Repeat("n", fs.MaxName+1)), c.Root() + "/"}
		for _, p := range bad {
			if _, err := cl.Open(ctxT(t), p, client.Create()); !errors.Is(err, client.ErrBadPath) {
				t.Fatalf("client Open(%q): %v, want ErrBadPath", p, err)
			}
		}
		// The client checks paths itself; the server must too.
		r := c.NewRawSession(t, 0)
		for _, p := range bad {
			calls := []struct {
				m    wire.Method
				args any
			}{
				{wire.MOpen, wire.OpenArgs{Path: p, Create: true}},
				{wire.MSetContents, wire.SetContentsArgs{Path: p, Data: []byte("x"), Create: true}},
				{wire.MAcquire, wire.AcquireArgs{Path: p, Mode: fs.Exclusive}},
				{wire.MDelete, wire.DeleteArgs{Path: p}},
				{wire.MRelease, wire.ReleaseArgs{Path: p, Gen: 1}},
				{wire.MGetContents, wire.NodeArgs{Path: p}},
			}
			for _, call := range calls {
				if err := r.Call(call.m, call.args, nil); !errors.Is(err, fs.ErrBadPath) {
					t.Fatalf("raw %s(%q): %v, want bad_path", call.m, p, err)
				}
			}
		}
		check(t)
	})

	t.Run("deceptive names", func(t *testing.T) {
		// Issue 17, finding 7: a right-to-left override and a zero-width
		// space were accepted as new names. They are refused on creation,
		// by the client and by the server; naming one that does not exist
		// is just a missing node.
		cl := c.Dial(t, client.Config{})
		for _, p := range []string{c.Path("abc\u202Etxt.exe"), c.Path("ad\u200Bmin")} {
			if _, err := cl.Open(ctxT(t), p, client.Create()); !errors.Is(err, client.ErrBadPath) {
				t.Fatalf("client Open(%q, Create): %v, want ErrBadPath", p, err)
			}
			if _, err := cl.WriteFile(ctxT(t), p, []byte("x")); !errors.Is(err, client.ErrBadPath) {
				t.Fatalf("client WriteFile(%q): %v, want ErrBadPath", p, err)
			}
			if _, err := cl.Open(ctxT(t), p); !errors.Is(err, client.ErrNoSuchNode) {
				t.Fatalf("client Open(%q): %v, want ErrNoSuchNode", p, err)
			}
			r := c.NewRawSession(t, 0)
			for m, args := range map[wire.Method]any{
				wire.MOpen:        wire.OpenArgs{Path: p, Create: true},
				wire.MSetContents: wire.SetContentsArgs{Path: p, Data: []byte("x"), Create: true},
			} {
				if err := r.Call(m, args, nil); !errors.Is(err, fs.ErrBadPath) {
					t.Fatalf("raw %s(%q): %v, want bad_path", m, p, err)
				}
			}
		}
		check(t)
	})

	t.Run("contents over 256 KiB", func(t *testing.T) {
		cl := c.Dial(t, client.Config{})
		h := open(t, cl, c.Path("big"), client.Create())
		_, err := h.SetContents(ctxT(t), make([]byte, fs.MaxContents+1))
		wantErr(t, err, client.ErrTooLarge, "SetContents of 256 KiB + 1")
		_, err = cl.WriteFile(ctxT(t), c.Path("big2"), make([]byte, fs.MaxContents+1))
		wantErr(t, err, client.ErrTooLarge, "WriteFile of 256 KiB + 1")
		if _, err := cl.Open(ctxT(t), c.Path("big2")); !errors.Is(err, client.ErrNoSuchNode) {
			t.Fatalf("an oversize WriteFile created the file: %v", err)
		}
		// Exactly the limit is fine.
		full := make([]byte, fs.MaxContents)
		full[0], full[len(full)-1] = 'a', 'z'
		if _, err := h.SetContents(ctxT(t), full); err != nil {
			t.Fatalf("SetContents of exactly 256 KiB: %v", err)
		}
		if got := contents(t, cl, c.Path("big")); got != string(full) {
			t.Fatalf("read back %d bytes, want %d", len(got), len(full))
		}
		check(t)
	})

	t.Run("expired and closed sessions", func(t *testing.T) {
		// Closed: the master forgets the session at once.
		r := c.NewRawSession(t, 0)
		rawCall(t, r, wire.MCloseSession, wire.Empty{}, nil)
		for _, m := range []wire.Method{wire.MGetStat, wire.MKeepAlive, wire.MCloseSession} {
			if err := r.Call(m, wire.NodeArgs{Path: c.Path("keep")}, nil); !errors.Is(err, fs.ErrSessionExpired) {
				t.Fatalf("%s on a closed session: %v, want session_expired", m, err)
			}
		}
		// Expired: a silent session of the minimum TTL (1 s) runs out.
		r = c.NewRawSession(t, time.Second)
		sessions := c.Status().Sessions
		mc.Advance(time.Second)
		wait.For(t, 0, "the silent session to expire", func() bool { return c.Status().Sessions == sessions-1 })
		for _, m := range []wire.Method{wire.MGetStat, wire.MSetContents, wire.MAcquire, wire.MKeepAlive} {
			var args any = wire.NodeArgs{Path: c.Path("keep")}
			switch m {
			case wire.MSetContents:
				args = wire.SetContentsArgs{Path: c.Path("keep"), Data: []byte("clobbered")}
			case wire.MAcquire:
				args = wire.AcquireArgs{Path: c.Path("keep"), Mode: fs.Exclusive}
			}
			if err := r.Call(m, args, nil); !errors.Is(err, fs.ErrSessionExpired) {
				t.Fatalf("%s on an expired session: %v, want session_expired", m, err)
			}
		}
		// A session id nobody was given.
		r.Session = 1 << 40
		if err := r.Call(wire.MGetStat, wire.NodeArgs{Path: c.Path("keep")}, nil); !errors.Is(err, fs.ErrSessionExpired) {
			t.Fatalf("call with an unknown session: %v, want session_expired", err)
		}
		// Through the client library: after Close every call fails.
		cl := c.Dial(t, client.Config{})
		h := open(t, cl, c.Path("keep"))
		if err := cl.Close(); err != nil {
			t.Fatal(err)
		}
		if _, err := h.GetStat(ctxT(t)); !errors.Is(err, client.ErrClosed) {
			t.Fatalf("call after Close: %v, want ErrClosed", err)
		}
		check(t)
	})

	t.Run("stale handle", func(t *testing.T) {
		cl := c.Dial(t, client.Config{})
		p := c.Path("reborn")
		old := open(t, cl, p, client.Create())
		if _, err := old.SetContents(ctxT(t), []byte("first life")); err != nil {
			t.Fatal(err)
		}
		if err := open(t, cl, p).Delete(ctxT(t)); err != nil {
			t.Fatal(err)
		}
		_, _, err := old.GetContentsAndStat(ctxT(t))
		wantErr(t, err, client.ErrStaleHandle, "read through a handle of a deleted node")
		reborn := open(t, cl, p, client.Create())
		if reborn.Instance() <= old.Instance() {
			t.Fatalf("re-created node has instance %d, not above the old %d", reborn.Instance(), old.Instance())
		}
		if _, err := reborn.SetContents(ctxT(t), []byte("second life")); err != nil {
			t.Fatal(err)
		}
		_, _, err = old.GetContentsAndStat(ctxT(t))
		wantErr(t, err, client.ErrStaleHandle, "read through a handle of a re-created node")
		_, err = old.SetContents(ctxT(t), []byte("from the past"))
		wantErr(t, err, client.ErrStaleHandle, "write through a stale handle")
		wantErr(t, old.TryAcquire(ctxT(t), client.Exclusive), client.ErrStaleHandle, "lock through a stale handle")
		wantErr(t, old.Delete(ctxT(t)), client.ErrStaleHandle, "delete through a stale handle")
		if got := contents(t, cl, p); got != "second life" {
			t.Fatalf("re-created file = %q, want %q", got, "second life")
		}
		check(t)
	})
}
