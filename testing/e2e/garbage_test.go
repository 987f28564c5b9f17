package e2e

import (
	"bufio"
	"encoding/binary"
	"io"
	"math/rand/v2"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chubby-dev/chubby/testing/proc"
	"github.com/chubby-dev/chubby/wire"
)

// frame prefixes body with its 4-byte big-endian length.
func frame(body []byte) []byte {
	return append(binary.BigEndian.AppendUint32(nil, uint32(len(body))), body...)
}

// request encodes a well-formed envelope around an arbitrary body.
func request(t *testing.T, req *wire.Request) []byte {
	t.Helper()
	b, err := wire.AppendFrame(nil, req)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestGarbageOnRPCPort (DESIGN invariant 9): random bytes, absurd length
// prefixes, truncated frames, undecodable envelopes and bodies, unknown
// calls and wrong epochs on raw TCP connections, many at once. The server
// stays up, serves a session that was already running and new ones, and
// loses nothing that was committed.
func TestGarbageOnRPCPort(t *testing.T) {
	t.Parallel()
	s := proc.StartServer(t, proc.Options{})
	f, l := p("precious"), p("held")
	wantOK(t, s.Sh(t, "write", f, "committed before the garbage"))
	before := s.Sh(t, "-json", "stat", f).JSON(t)
	holder := s.StartSh(t, "-json")
	holder.Send(t, "lock "+l)
	seq := str(t, jsonLine(t, holder.NextLine(t, 15*time.Second)), "sequencer")

	rng := rand.New(rand.NewPCG(1, 2))
	random := func(n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(rng.UintN(256))
		}
		return b
	}
	huge := binary.BigEndian.AppendUint32(nil, 0xffffffff)
	overLimit := binary.BigEndian.AppendUint32(nil, wire.MaxFrame+1)
	// msgpack claiming far more than the frame holds: a map of 2^32-1
	// entries; a bin32 body of 4 GiB; a str32 key of 4 GiB.
	bigMap := frame([]byte{0xdf, 0xff, 0xff, 0xff, 0xff, 0xa2, 'i', 'd', 0x01})
	bigBin := frame(append([]byte{0x85, 0xa2, 'i', 'd', 0x01, 0xa1, 'm', 0x01, 0xa1, 'e', 0x00, 0xa1, 's', 0x00, 0xa1, 'b', 0xc6}, 0xff, 0xff, 0xff, 0xf0))
	bigStr := frame([]byte{0x81, 0xdb, 0xff, 0xff, 0xff, 0xf0, 'x'})
	deepNest := make([]byte, 0, 100000)
	for range 100000 - 1 {
		deepNest = append(deepNest, 0x91) // fixarray of 1, nested
	}
	deepNest = append(deepNest, 0xc0)
	payloads := map[string][][]byte{
		"random 64KiB":         {random(64 << 10)},
		"random small":         {random(7)},
		"length 0xffffffff":    {huge, random(100)},
		"length over MaxFrame": {overLimit, random(1000)},
		"zero length":          {{0, 0, 0, 0}},
		"truncated frame":      {binary.BigEndian.AppendUint32(nil, 1000), random(10)},
		"truncated header":     {{0, 0}},
		"not msgpack":          {frame([]byte{0xc1, 0xc1, 0xc1})},
		"msgpack not a map":    {frame([]byte{0x93, 0x01, 0x02, 0x03})},
		"trailing garbage":     {frame(append(request(t, &wire.Request{ID: 1, Method: wire.MHello})[4:], 0xc1))},
		"map 2^32 entries":     {bigMap},
		"bin 4GiB claimed":     {bigBin},
		"str 4GiB claimed":     {bigStr},
		"deep nesting":         {frame(deepNest)},
		"unknown call":         {request(t, &wire.Request{ID: 1, Method: 200})},
		"invalid call":         {request(t, &wire.Request{ID: 1, Method: wire.MInvalid})},
		"wrong epoch":          {request(t, &wire.Request{ID: 1, Method: wire.MGetStat, Epoch: 999, Session: 1, Body: []byte{0x80}})},
		"no session":           {request(t, &wire.Request{ID: 1, Method: wire.MOpen, Epoch: 1, Session: 424242, Body: []byte{0x80}})},
		"bad session body":     {request(t, &wire.Request{ID: 1, Method: wire.MCreateSession, Epoch: 1, Body: []byte{0xc1}})},
		"seq body garbage":     {request(t, &wire.Request{ID: 1, Method: wire.MCheckSequencer, Epoch: 1, Body: []byte{0xa3, 'a', 'b', 'c'}})},
		"hello then garbage":   {request(t, &wire.Request{ID: 1, Method: wire.MHello}), random(5000)},
		"many tiny writes":     {{0}, {0}, {0}, {7}, {0x80}},
		"close at once":        {},
		"keep alive no sess":   {request(t, &wire.Request{ID: 1, Method: wire.MKeepAlive, Epoch: 1, Session: 0, Body: []byte{0x80}})},
		"huge id and method":   {frame([]byte{0x82, 0xa2, 'i', 'd', 0xcf, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xa1, 'm', 0xcd, 0xff, 0xff})},
		"negative TTL session": {request(t, &wire.Request{ID: 1, Method: wire.MCreateSession, Epoch: 1, Body: mustMarshal(t, map[string]any{"ttl": -1})})},
	}

	badBefore := s.Metric(t, "chubby_rpc_bad_frames_total")

	// Connections that stay open mid-frame while everything else goes on.
	var stuck []net.Conn
	for range 20 {
		c, err := net.Dial("tcp", s.RPCAddr)
		if err != nil {
			t.Fatalf("dial: %v", err)
		}
		c.Write(binary.BigEndian.AppendUint32(nil, 500))
		c.Write([]byte("half a frame"))
		stuck = append(stuck, c)
	}
	defer func() {
		for _, c := range stuck {
			c.Close()
		}
	}()

	var wg sync.WaitGroup
	for round := range 3 {
		for name, chunks := range payloads {
			wg.Add(1)
			go func() {
				defer wg.Done()
				c, err := net.DialTimeout("tcp", s.RPCAddr, 5*time.Second)
				if err != nil {
					t.Errorf("round %d %s: dial: %v", round, name, err)
					return
				}
				defer c.Close()
				for _, b := range chunks {
					c.SetWriteDeadline(time.Now().Add(5 * time.Second))
					if _, err := c.Write(b); err != nil {
						return // the server may close on the first bad frame
					}
				}
				// Read whatever the server answers until it closes or goes
				// quiet; the answer itself is not the point here.
				c.SetReadDeadline(time.Now().Add(2 * time.Second))
				io.Copy(io.Discard, c)
			}()
		}
	}
	wg.Wait()

	if !s.Running(t) {
		t.Fatalf("chubbyd exited after the garbage")
	}
	// The garbage reached the server's frame reader, not some other port.
	if bad := s.Metric(t, "chubby_rpc_bad_frames_total") - badBefore; bad < 3*10 {
		t.Errorf("chubby_rpc_bad_frames_total grew by %v for 3 rounds of garbage", bad)
	}
	// New sessions are served.
	if got := wantOK(t, s.Sh(t, "cat", f)); got != "committed before the garbage" {
		t.Errorf("contents after the garbage = %q", got)
	}
	after := s.Sh(t, "-json", "stat", f).JSON(t)
	if str(t, after, "mtime") != str(t, before, "mtime") || num(t, after, "content_gen") != num(t, before, "content_gen") {
		t.Errorf("stat changed: %v → %v", before, after)
	}
	wantOK(t, s.Sh(t, "write", p("after"), "still writable"))
	// The session that was running all along still is, and holds its lock.
	holder.Send(t, "seq "+l)
	if got := str(t, jsonLine(t, holder.NextLine(t, 10*time.Second)), "sequencer"); got != seq {
		t.Errorf("holder's seq after the garbage = %q, want %q", got, seq)
	}
	wantOK(t, s.Sh(t, "checkseq", seq))
	wantFail(t, s.Sh(t, "trylock", l), 1)
	// The half-open connections did not wedge anything either; the server is
	// still up after they go away.
	for _, c := range stuck {
		c.Close()
	}
	stuck = nil
	wantOK(t, s.Sh(t, "-json", "session"))
	if st := s.Status(t); st["master"] != true {
		t.Errorf("/status after the garbage: %v", st)
	}
}

func mustMarshal(t *testing.T, v any) []byte {
	t.Helper()
	b, err := wire.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestBadCallsGetClearErrors (DESIGN invariant 9): a malformed frame or call
// is answered with an error that says what was wrong — the connection's
// last frame for a broken frame, the call's own reply for a bad call — and
// the server keeps serving.
func TestBadCallsGetClearErrors(t *testing.T) {
	t.Parallel()
	s := proc.StartServer(t, proc.Options{})
	hello := func(c net.Conn) wire.HelloReply {
		t.Helper()
		var rep wire.HelloReply
		resp := roundTrip(t, c, &wire.Request{ID: 7, Method: wire.MHello, Body: mustMarshal(t, wire.HelloArgs{})})
		if resp.Code != "" {
			t.Fatalf("Hello: %s: %s", resp.Code, resp.Error)
		}
		if err := wire.Unmarshal(resp.Body, &rep); err != nil {
			t.Fatal(err)
		}
		return rep
	}
	c := dial(t, s.RPCAddr)
	epoch := hello(c).Epoch
	if epoch == 0 {
		t.Fatalf("Hello from the only server: not master")
	}
	for _, tc := range []struct {
		name string
		req  *wire.Request
		code string
	}{
		{"wrong epoch", &wire.Request{ID: 1, Method: wire.MGetStat, Epoch: epoch + 5, Session: 1, Body: []byte{0x80}}, "wrong_epoch"},
		{"no such session", &wire.Request{ID: 2, Method: wire.MOpen, Epoch: epoch, Session: 424242, Body: []byte{0x80}}, "session_expired"},
		{"body of the wrong type", &wire.Request{ID: 3, Method: wire.MCreateSession, Epoch: epoch, Body: []byte{0xc3}}, "bad_request"},
		{"body of the wrong shape", &wire.Request{ID: 4, Method: wire.MCheckSequencer, Epoch: epoch, Body: []byte{0xa3, 'a', 'b', 'c'}}, "bad_request"},
	} {
		resp := roundTrip(t, c, tc.req)
		if resp.ID != tc.req.ID || resp.Code != tc.code || resp.Error == "" {
			t.Errorf("%s: reply id %d code %q error %q; want id %d code %q with a message", tc.name, resp.ID, resp.Code, resp.Error, tc.req.ID, tc.code)
		}
	}
	// The connection survived bad calls: it still works.
	if hello(c).Epoch != epoch {
		t.Errorf("epoch changed")
	}
	c.Close()

	// A broken frame or an unknown call ends the connection with one last
	// error frame.
	for _, tc := range []struct {
		name string
		raw  []byte
		id   uint64
		says string
	}{
		{"unknown call", request(t, &wire.Request{ID: 9, Method: 200, Epoch: epoch}), 9, "unknown call"},
		{"length over the limit", binary.BigEndian.AppendUint32(nil, wire.MaxFrame+1), 0, "too large"},
		{"not msgpack", frame([]byte{0xc1, 0xc1}), 0, "decode"},
		// The body is msgpack inside the envelope: a broken body is a broken frame.
		{"body not msgpack", request(t, &wire.Request{ID: 3, Method: wire.MCreateSession, Epoch: epoch, Body: []byte{0xc1}}), 0, "decode"},
	} {
		c := dial(t, s.RPCAddr)
		c.Write(tc.raw)
		resp, err := readResponse(c)
		if err != nil {
			t.Errorf("%s: no error frame: %v", tc.name, err)
		} else if resp.ID != tc.id || resp.Code != "bad_request" || !strings.Contains(resp.Error, tc.says) {
			t.Errorf("%s: reply id %d code %q error %q; want id %d bad_request saying %q", tc.name, resp.ID, resp.Code, resp.Error, tc.id, tc.says)
		}
		if _, err := readResponse(c); err == nil {
			t.Errorf("%s: the connection stayed open", tc.name)
		}
		c.Close()
	}
	wantOK(t, s.Sh(t, "-json", "session"))
}

func dial(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func roundTrip(t *testing.T, c net.Conn, req *wire.Request) *wire.Response {
	t.Helper()
	c.SetWriteDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Write(request(t, req)); err != nil {
		t.Fatalf("write %s: %v", req.Method, err)
	}
	resp, err := readResponse(c)
	if err != nil {
		t.Fatalf("read reply to %s: %v", req.Method, err)
	}
	return resp
}

func readResponse(c net.Conn) (*wire.Response, error) {
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	b, err := wire.ReadFrame(bufio.NewReader(c))
	if err != nil {
		return nil, err
	}
	return wire.DecodeResponse(b)
}
