package hostile

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chubby-dev/chubby/testing/cell"
	"github.com/chubby-dev/chubby/testing/proc"
	"github.com/chubby-dev/chubby/testing/wait"
	"github.com/chubby-dev/chubby/wire"
)

// rssBound is the acceptance bound on chubbyd's resident memory while
// hostile connections hold large frames open.
const rssBound = 500 << 10 // kB

// TestStalledFramesBounded replays issue 17, finding 4 (each connection
// that sent most of a 1 MiB frame and stopped held a megabyte of the
// server's memory: a few thousand of them, gigabytes): 2,000 connections
// each send all but 40 bytes of a 1 MiB frame and then trickle a byte a
// second. Bound: chubbyd's resident set (VmRSS) stays at most 500 MB
// while they hold on (the large-frame budget, -max-frame-memory, is
// 256 MiB), and `chubbysh ls` from another client answers meanwhile.
// After they close, the resident set is reported, not asserted: the Go
// runtime gives freed memory back to the kernel at its own pace.
func TestStalledFramesBounded(t *testing.T) {
	conns := scale(2_000, 500)
	hold, after := time.Duration(scale(10, 5))*time.Second, time.Duration(scale(30, 5))*time.Second
	s := proc.StartServer(t, proc.Options{LogLevel: "info"})
	pid := s.PID(t)
	base := rssKB(t, pid, "VmRSS")
	frame := append(binary.BigEndian.AppendUint32(nil, wire.MaxFrame), make([]byte, wire.MaxFrame)...)
	most := frame[:len(frame)-40]

	stop := make(chan struct{})
	var wg sync.WaitGroup
	var sent, dialErrs atomic.Int64
	ncs := make([]net.Conn, 0, conns)
	for range conns {
		nc, err := net.DialTimeout("tcp", s.RPCAddr, 10*time.Second)
		if err != nil {
			dialErrs.Add(1)
			continue
		}
		ncs = append(ncs, nc)
		wg.Go(func() {
			// Blocks while the server does not read: the point.
			if _, err := nc.Write(most); err != nil {
				return
			}
			sent.Add(1)
			for i := 0; i < 39; i++ { // a byte a second, never the last
				if !wait.Sleep(ctxOf(stop), time.Second) {
					return
				}
				if _, err := nc.Write(frame[len(most)+i : len(most)+i+1]); err != nil {
					return
				}
			}
		})
	}
	closeAll := func() {
		close(stop)
		for _, nc := range ncs {
			nc.Close()
		}
		wg.Wait()
	}
	defer func() {
		if ncs != nil {
			closeAll()
		}
	}()
	if n := dialErrs.Load(); n > 0 {
		t.Fatalf("%d of %d connections could not be made", n, conns)
	}

	// Hold: sample the resident set while the frames stall, and list the
	// root from another client.
	peak := int64(0)
	var lsTook []time.Duration
	deadline := time.Now().Add(hold)
	for time.Now().Before(deadline) {
		peak = max(peak, rssKB(t, pid, "VmRSS"))
		r := proc.RunSh(t, s.RPCAddr, proc.ShOptions{Timeout: 20 * time.Second}, "-timeout", "10s", "ls", root)
		if r.Code != 0 {
			t.Fatalf("ls while %d frames stall: %s", conns, r)
		}
		lsTook = append(lsTook, r.Took)
		peak = max(peak, rssKB(t, pid, "VmRSS"))
	}
	hwm := rssKB(t, pid, "VmHWM")
	t.Logf("%d connections holding all but 40 bytes of a 1 MiB frame (%d sent it all so far): chubbyd VmRSS %s before, peak sampled %s, VmHWM %s (bound %s)",
		conns, sent.Load(), mb(base), mb(peak), mb(hwm), mb(rssBound))
	t.Logf("chubbysh ls meanwhile: %d runs, slowest %v (a whole chubbysh process each)", len(lsTook), slicesMax(lsTook).Round(time.Millisecond))
	if hwm > rssBound {
		t.Errorf("chubbyd's peak resident set %s, want at most %s", mb(hwm), mb(rssBound))
	}

	closeAll()
	ncs = nil
	start := time.Now()
	settled := wait.Until(after, wait.Every(time.Second, func() bool { return rssKB(t, pid, "VmRSS") < base+64<<10 }))
	t.Logf("after the connections closed: VmRSS %s %v later (back within 64 MB of the start: %v)",
		mb(rssKB(t, pid, "VmRSS")), time.Since(start).Round(time.Second), settled)
	if r := s.Sh(t, "ls", root); r.Code != 0 {
		t.Fatalf("ls after the connections closed: %s", r)
	}
}

// TestDeepNestingRefused replays issue 17, finding 4 (a 1 MiB frame of a
// million nested arrays cost the decoder 226 MB): many connections at
// once each send one frame whose body is 1,048,575 nested one-element
// arrays. Bound: each is answered bad_request ("nested deeper") and
// closed, and chubbyd's peak resident set grows by no more than the
// frames themselves plus 64 MB.
func TestDeepNestingRefused(t *testing.T) {
	senders := scale(64, 32)
	const rounds = 3
	s := proc.StartServer(t, proc.Options{LogLevel: "info"})
	pid := s.PID(t)
	base := rssKB(t, pid, "VmRSS")
	body := append(bytes.Repeat([]byte{0x91}, wire.MaxFrame-1), 0xc0)
	frame := append(binary.BigEndian.AppendUint32(nil, uint32(len(body))), body...)
	var refused atomic.Int64
	for round := range rounds {
		var wg sync.WaitGroup
		errs := make(chan error, senders)
		for range senders {
			wg.Go(func() {
				r := cell.DialRawTo(t, s.RPCAddr)
				defer r.Close()
				if err := r.WriteBytes(frame); err != nil {
					errs <- err
					return
				}
				resp, err := r.ReadResponse(30 * time.Second)
				if err != nil {
					errs <- err
					return
				}
				if resp.Code != "bad_request" || !strings.Contains(resp.Error, "nested deeper") {
					errs <- errors.New("answer " + resp.Code + ": " + resp.Error)
					return
				}
				if _, err := r.ReadResponse(30 * time.Second); !errors.Is(err, io.EOF) && !isReset(err) {
					errs <- errors.New("the connection stayed open: " + errString(err))
					return
				}
				refused.Add(1)
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatalf("round %d: %v", round, err)
		}
	}
	hwm := rssKB(t, pid, "VmHWM")
	bound := base + int64(senders)*(wire.MaxFrame>>10) + 64<<10
	t.Logf("%d frames nested %d deep (%d at once) refused bad_request: chubbyd VmRSS %s before, VmHWM %s after (bound %s; the decoder alone took 226 MB a frame before the fix)",
		refused.Load(), len(body)-1, senders, mb(base), mb(hwm), mb(bound))
	if hwm > bound {
		t.Errorf("peak resident set %s, want at most %s", mb(hwm), mb(bound))
	}
	if r := s.Sh(t, "ls", root); r.Code != 0 {
		t.Fatalf("ls after the nesting: %s", r)
	}
}

func isReset(err error) bool {
	var op *net.OpError
	return errors.As(err, &op)
}

func errString(err error) string {
	if err == nil {
		return "no error"
	}
	return err.Error()
}

func slicesMax(ds []time.Duration) time.Duration {
	m := time.Duration(0)
	for _, d := range ds {
		m = max(m, d)
	}
	return m
}
