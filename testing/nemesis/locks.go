package nemesis

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/chubby-dev/chubby/client"
	"github.com/chubby-dev/chubby/client/election"
	"github.com/chubby-dev/chubby/testing/cell"
	"github.com/chubby-dev/chubby/testing/fencedstore"
	"github.com/chubby-dev/chubby/testing/nemesis/core"
	"github.com/chubby-dev/chubby/testing/wait"
	"github.com/chubby-dev/chubby/wire"
)

// LockConfig is the lock clients' session: short, so that a pause
// straddles it.
var LockConfig = client.Config{
	SessionTTL: time.Second,
	Grace:      time.Second,
	LockDelay:  200 * time.Millisecond,
}

// LockPauseMin is the shortest PauseClient hold: past the lock client's
// TTL, grace and lock-delay, so the cell expires its session and another
// client can take the lock while it sleeps holding a counter value.
var LockPauseMin = LockConfig.SessionTTL + LockConfig.Grace + LockConfig.LockDelay + 500*time.Millisecond

// LockPause is the pause of the negative control (TestUnfencedPauseLosesIncrement).
var LockPause = LockConfig.SessionTTL + LockConfig.Grace + LockConfig.LockDelay + 1500*time.Millisecond

// LockWorker is one in-process client of the fencing workload: it runs
// core.LockCycle hold after hold — lock → fenced read of the counter from
// Store → think (one time in four a CheckSequencer) → maybe a pause →
// fenced write of counter+1 → release — through its own proxies to the
// servers (so the nemesis can silence it), and reports each step to Events
// as a core.Event: the same cycle and events as testing/procnemesis's
// worker processes, checked by the same core.CheckFencing and
// core.LockHistory.
type LockWorker struct {
	ID      int
	Path    string
	Proxies []*cell.Proxy
	Log     hclog.Logger
	Store   fencedstore.Fenced
	Events  *core.EventLog
	// Election: the worker campaigns in the election on the directory
	// Path (client/election, core.ElectionLocker) instead of locking the
	// file Path.
	Election bool
	// Clock is the lease clock of the worker's sessions (nil: the real
	// clock). A pause freezes it; on resume it jumps by the pause.
	Clock *cell.SkewClock
	// TLS is the worker's client certificate on a cell with TLS (nil:
	// none); its Proxies must then be TLS ones (cell.Cluster.ProxiesAs).
	TLS *tls.Config

	smu       sync.Mutex
	sid       uint64 // the current session (0: none)
	lastAlive int64  // Events time the current session was last known alive
	learned   int64  // Events time the cell said it expired; -1: not yet

	mu       sync.Mutex
	pauseReq bool
	frozen   bool // the pause was taken and froze Clock
	resume   chan struct{}
}

// Pause asks the worker to stop at its next point between reading the
// counter and writing it back (holding the lock), with its links to the
// cell silent and its lease clock frozen, until Resume — a client stopped
// as by SIGSTOP. If it does not get there before Resume (it cannot acquire
// the lock meanwhile), the pause does not happen.
func (w *LockWorker) Pause() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.pauseReq = true
	w.resume = make(chan struct{})
}

// Resume ends a pause (taken or not).
func (w *LockWorker) Resume() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.pauseReq {
		return
	}
	w.pauseReq = false
	if w.frozen {
		// Woken, the client first sees its clock jump by the pause.
		w.Clock.Unfreeze()
		w.frozen = false
	}
	for _, p := range w.Proxies {
		p.Heal()
	}
	close(w.resume)
}

// gate blocks while a pause is requested and reports whether it did.
func (w *LockWorker) gate() bool {
	w.mu.Lock()
	if !w.pauseReq {
		w.mu.Unlock()
		return false
	}
	for _, p := range w.Proxies {
		p.Blackhole()
	}
	if w.Clock != nil {
		w.Clock.Freeze()
		w.frozen = true
	}
	ch := w.resume
	w.mu.Unlock()
	<-ch
	return true
}

func (w *LockWorker) now() int64 { return w.Events.Now() }

func (w *LockWorker) emit(e core.Event) {
	e.Worker = w.ID
	w.Events.Add(e)
}

func (w *LockWorker) dial(ctx context.Context) *client.Client {
	cfg := LockConfig
	cfg.Servers = cell.ProxyAddrs(w.Proxies)
	cfg.FixedServers = true
	cfg.Logger = w.Log
	cfg.TLS = w.TLS
	if w.Clock != nil {
		cfg.Clock = w.Clock
	}
	for ctx.Err() == nil {
		dctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		call := w.now()
		cl, err := client.Dial(dctx, cfg)
		cancel()
		if err == nil {
			w.smu.Lock()
			// The session was created during Dial: alive after its call.
			w.sid, w.lastAlive, w.learned = cl.Session().ID, call, -1
			w.smu.Unlock()
			w.emit(core.Event{Ev: "session", Session: cl.Session().ID, Call: call, Ret: w.now(), OK: true})
			return cl
		}
		wait.Sleep(ctx, 50*time.Millisecond)
	}
	return nil
}

// observe follows the replies to the worker's client (Proxy.OnReply): a
// reply that succeeded for the current session shows it alive when its
// request was forwarded; the first reply saying the session expired is
// when the cell told the client so.
func (w *LockWorker) observe(req *wire.Request, sentAt time.Time, resp *wire.Response) {
	err := resp.Err()
	now := w.now()
	w.smu.Lock()
	defer w.smu.Unlock()
	if w.sid == 0 || req.Session != w.sid {
		return
	}
	switch {
	case err == nil:
		if at := now - int64(time.Since(sentAt)); at > w.lastAlive {
			w.lastAlive = at
		}
	case errors.Is(err, client.ErrSessionExpired) && w.learned < 0:
		w.learned = now
	}
}

// alive notes that the current session answered an operation called at
// call.
func (w *LockWorker) alive(call int64) {
	w.smu.Lock()
	defer w.smu.Unlock()
	w.lastAlive = max(w.lastAlive, call)
}

// lost reports the end of the current session: it expired after it was
// last known alive, and either the cell said so (learned) or it may have
// expired any time since (the client gave up on its own, or the run ended
// with it).
func (w *LockWorker) lost() {
	w.smu.Lock()
	sid, lastAlive, learned := w.sid, w.lastAlive, w.learned
	w.sid = 0
	w.smu.Unlock()
	if sid == 0 {
		return
	}
	e := core.Event{Ev: "lost", Session: sid, Call: lastAlive, Ret: w.now()}
	if learned >= 0 {
		e.Ret, e.OK = learned, true
	}
	w.emit(e)
}

// Run loops until ctx is done: a session (dialled again when it ended),
// a handle on the lock, and hold after hold (core.LockCycle).
func (w *LockWorker) Run(ctx context.Context, rng *rand.Rand) {
	for _, p := range w.Proxies {
		p.OnReply(w.observe)
	}
	cycle := &core.LockCycle{Worker: w.ID, Now: w.now, Store: w.Store, Think: 3 * time.Millisecond, Emit: w.emit, Alive: w.alive,
		BeforeWrite: func(seq client.Sequencer, sid uint64, hold, _ int) {
			if w.gate() {
				now := w.now()
				w.emit(core.Event{Ev: "pause", Hold: hold, Session: sid, Gen: seq.Gen, Call: now, Ret: now})
			}
		}}
	var cl *client.Client
	var h core.Locker
	defer func() {
		if cl != nil {
			w.lost() // the run ends with the session: it may end any time
			cl.Close()
		}
	}()
	for hold := 1; ctx.Err() == nil; {
		if cl != nil && sessionOver(cl) {
			w.lost()
			cl.Close()
			cl, h = nil, nil
		}
		if cl == nil {
			if cl = w.dial(ctx); cl == nil {
				return
			}
		}
		if h == nil && w.Election {
			h = &core.ElectionLocker{E: election.New(cl, w.Path), Value: []byte(fmt.Sprint(w.ID))}
		}
		if h == nil {
			octx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			hd, err := cl.Open(octx, w.Path, client.Create())
			cancel()
			if err != nil {
				wait.Sleep(ctx, 20*time.Millisecond)
				continue
			}
			h = hd
		}
		cycle.Hold(ctx, cl, h, hold, rng)
		hold++
	}
}

func sessionOver(cl *client.Client) bool {
	select {
	case <-cl.Done():
		return true
	default:
		return false
	}
}
