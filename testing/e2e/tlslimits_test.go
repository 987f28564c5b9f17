package e2e

// The per-session, per-principal and per-server limits (issue 11, "limits"),
// each hit on a three-server TLS cell of real chubbyd processes started with
// small values of their flags: the caller past a limit gets a clear
// resource exhausted error (chubbysh exits non-zero saying so),
// chubby_rejected_total{limit=...} rises in /metrics, and other clients
// are served on.

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chubby-dev/chubby/fs"
	"github.com/chubby-dev/chubby/testing/proc"
	"github.com/chubby-dev/chubby/testing/wait"
	"github.com/chubby-dev/chubby/wire"
)

func TestTLSLimits(t *testing.T) {
	p := proc.NewPKI(t, "local", []string{"n1", "n2", "n3"}, "alice", "carol", "dave")
	c := proc.StartCell(t, 3, cellOptions(t, p, p, "alice",
		"-max-waits-per-session", "2", "-max-watches-per-session", "2", "-max-sessions-per-principal", "3",
		"-create-session-rate", "4", "-max-conns", "8"))
	master := c.Master(t)
	rejected := func(s *proc.Server, limit string) float64 {
		t.Helper()
		return s.MetricWith(t, "chubby_rejected_total", `limit="`+limit+`"`)
	}
	// session is a raw TLS connection to the master with a session of
	// principal who (no KeepAlives: its TTL outlives the test's steps).
	session := func(who string) *proc.RawConn {
		t.Helper()
		var r *proc.RawConn
		wait.For(t, 30*time.Second, "a session for "+who, func() bool {
			var err error
			if r, err = proc.DialRawTLS(master.RPCAddr, 5*time.Second, p.TLSConfig(t, who, "")); err != nil {
				t.Fatal(err)
			}
			if _, err = r.Hello(5 * time.Second); err != nil {
				t.Fatal(err)
			}
			err = r.CreateSession(60*time.Second, 5*time.Second)
			if err != nil {
				r.Close()
				if !errors.Is(err, wire.ErrResourceExhausted) { // the creation rate: try again
					t.Fatalf("%s: CreateSession: %v", who, err)
				}
			}
			return err == nil
		})
		t.Cleanup(func() { r.Close() })
		return r
	}
	exhausted := func(what string, err error, says string) {
		t.Helper()
		if !errors.Is(err, wire.ErrResourceExhausted) || !strings.Contains(err.Error(), "resource exhausted") || !strings.Contains(err.Error(), says) {
			t.Fatalf("%s: %v, want resource exhausted saying %q", what, err, says)
		}
	}
	// sh runs chubbysh as who, again while its session is refused for the
	// creation rate (-create-session-rate 4 is easily hit: "try again
	// shortly").
	sh := func(who string, args ...string) *proc.Result {
		t.Helper()
		var r *proc.Result
		wait.For(t, 30*time.Second, "chubbysh admitted past the creation rate", wait.Every(100*time.Millisecond, func() bool {
			r = master.Sh(t, append(p.ShArgs(who), args...)...)
			return !strings.Contains(r.Stderr, "CreateSessions a second")
		}))
		return r
	}
	served := func(what string) {
		t.Helper()
		wantOK(t, sh("alice", "write", p0("served"), what))
	}
	open := func(r *proc.RawConn, path string, events uint32) error {
		return r.Call(wire.MOpen, wire.OpenArgs{Path: path, Create: true, Events: events}, nil, 10*time.Second)
	}

	// Blocked Acquires per session (-max-waits-per-session 2): carol holds
	// three locks, dave waits on two of them; his third wait is refused.
	carol, dave := session("carol"), session("dave")
	wantOK(t, sh("alice", "write", p0("acl/everyone"), "*"))
	wantOK(t, sh("alice", "mkdir", p0("lim"), "-read", "everyone", "-write", "everyone"))
	lim := func(name string) string { return root + "/lim/" + name }
	lock := func(i int) string { return lim(fmt.Sprint("l", i)) }
	var held []wire.SeqReply
	for i := range 3 {
		if err := open(carol, lock(i), 0); err != nil {
			t.Fatal(err)
		}
		held = append(held, wire.SeqReply{})
		if err := carol.Call(wire.MAcquire, wire.AcquireArgs{Path: lock(i), Mode: fs.Exclusive}, &held[i], 10*time.Second); err != nil {
			t.Fatalf("carol locks %s: %v", lock(i), err)
		}
	}
	before := rejected(master, "waits")
	var waits []uint64
	for i := range 2 {
		id, err := dave.Go(wire.MAcquire, wire.AcquireArgs{Path: lock(i), Mode: fs.Exclusive, Wait: true, WaitID: uint64(i + 1)})
		if err != nil {
			t.Fatal(err)
		}
		waits = append(waits, id)
	}
	for i, id := range waits { // blocked: no answer yet
		if resp, err := dave.Await(id, time.Second); !errors.Is(err, proc.ErrNoReply) {
			t.Fatalf("dave's blocked Acquire %d answered: %v %v", i, err, resp)
		}
	}
	err := dave.Call(wire.MAcquire, wire.AcquireArgs{Path: lock(2), Mode: fs.Exclusive, Wait: true, WaitID: 3}, nil, 10*time.Second)
	exhausted("dave's third blocked Acquire", err, "blocked Acquires waiting (limit 2)")
	if after := rejected(master, "waits"); after <= before {
		t.Errorf(`chubby_rejected_total{limit="waits"} %v → %v, want a rise`, before, after)
	}
	// A grant frees the slot; carol's own calls go on.
	if err := carol.Call(wire.MRelease, wire.ReleaseArgs{Path: lock(0), Gen: held[0].Seq.Gen}, nil, 10*time.Second); err != nil {
		t.Fatalf("carol releases: %v", err)
	}
	resp, err := dave.Await(waits[0], 15*time.Second)
	if err != nil || resp.Err() != nil {
		t.Fatalf("dave's first wait after the release: %v %v", err, resp)
	}
	served("after waits")

	// Watches per session (-max-watches-per-session 2).
	before = rejected(master, "watches")
	for i := range 2 {
		if err := open(carol, lim(fmt.Sprint("w", i)), wire.EvAll); err != nil {
			t.Fatalf("carol's watch %d: %v", i, err)
		}
	}
	exhausted("carol's third watch", open(carol, lim("w2"), wire.EvAll), "watches 2 nodes (limit 2)")
	if after := rejected(master, "watches"); after <= before {
		t.Errorf(`chubby_rejected_total{limit="watches"} %v → %v, want a rise`, before, after)
	}
	if err := open(dave, lim("w2"), wire.EvAll); err != nil {
		t.Fatalf("dave's watch while carol is at her limit: %v", err)
	}
	served("after watches")

	// Sessions per principal (-max-sessions-per-principal 3): carol holds
	// three; chubbysh as carol fails saying so, dave is served.
	session("carol")
	session("carol")
	before = rejected(master, "principal_sessions")
	r := master.Sh(t, append(append([]string{"-timeout", "5s"}, p.ShArgs("carol")...), "whoami")...)
	t.Logf("carol's fourth session: exit %d: %s", r.Code, strings.TrimSpace(r.Stderr))
	if r.Code == 0 || !strings.Contains(r.Stderr, "resource exhausted") || !strings.Contains(r.Stderr, "carol holds 3 sessions") {
		t.Errorf("chubbysh as carol with 3 sessions: want a failure saying resource exhausted: %s", r)
	}
	if after := rejected(master, "principal_sessions"); after <= before {
		t.Errorf(`chubby_rejected_total{limit="principal_sessions"} %v → %v, want a rise`, before, after)
	}
	if got := wantOK(t, sh("dave", "whoami")); got != "dave" {
		t.Fatalf("whoami = %q", got)
	}

	// CreateSession rate (-create-session-rate 4 a second): dave makes and
	// ends sessions back to back until one is refused.
	before = rejected(master, "create_rate")
	rr, err := proc.DialRawTLS(master.RPCAddr, 5*time.Second, p.TLSConfig(t, "dave", ""))
	if err != nil {
		t.Fatal(err)
	}
	defer rr.Close()
	if _, err := rr.Hello(5 * time.Second); err != nil {
		t.Fatal(err)
	}
	var rateErr error
	for i := 0; i < 100 && rateErr == nil; i++ {
		rr.Session, rr.Secret = 0, nil
		if err := rr.CreateSession(60*time.Second, 10*time.Second); err != nil {
			rateErr = err
			break
		}
		if err := rr.Call(wire.MCloseSession, wire.Empty{}, nil, 10*time.Second); err != nil {
			t.Fatalf("dave ends a session: %v", err)
		}
	}
	exhausted("CreateSessions back to back", rateErr, "CreateSessions a second")
	if after := rejected(master, "create_rate"); after <= before {
		t.Errorf(`chubby_rejected_total{limit="create_rate"} %v → %v, want a rise`, before, after)
	}
	// A session made before goes on; new ones are admitted a moment later.
	if err := open(dave, lim("after-rate"), 0); err != nil {
		t.Fatalf("dave's older session: %v", err)
	}
	served("after the rate")

	// Connections (-max-conns 8), on a follower: fill it until one is
	// refused; that one is answered resource exhausted and closed, the
	// open ones and the rest of the cell are served.
	f := c.Others(master)[0]
	before = rejected(f, "connections")
	var conns []*proc.RawConn
	var refused error
	for i := 0; i < 20 && refused == nil; i++ {
		rc, err := proc.DialRawTLS(f.RPCAddr, 5*time.Second, p.TLSConfig(t, "alice", ""))
		if err != nil {
			t.Fatalf("connection %d: %v", i, err)
		}
		defer rc.Close()
		if _, err := rc.Hello(10 * time.Second); err != nil {
			refused = err
			break
		}
		conns = append(conns, rc)
	}
	exhausted(fmt.Sprintf("connection %d to %s", len(conns)+1, f.NodeID), refused, "client connections open (limit 8)")
	if len(conns) > 8 {
		t.Errorf("%d connections served, limit 8", len(conns))
	}
	if after := rejected(f, "connections"); after <= before {
		t.Errorf(`chubby_rejected_total{limit="connections"} %v → %v, want a rise`, before, after)
	}
	if _, err := conns[0].Hello(10 * time.Second); err != nil {
		t.Errorf("an open connection to %s after the refusal: %v", f.NodeID, err)
	}
	served("after conns")
}
