package procnemesis

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/chubby-dev/chubby/client"
	"github.com/chubby-dev/chubby/testing/nemesis/core"
	"github.com/chubby-dev/chubby/testing/wait"
)

// Sess is a client of the test process that reaches the cell only through
// its own proxies (Config.Servers, FixedServers), with a handle on each of
// its keys; when its session ends (expired under a fault) the next caller
// dials a new one. Safe for concurrent use.
type Sess struct {
	Name string
	cfg  client.Config
	keys []string

	mu      sync.Mutex
	cl      *client.Client
	hs      []*client.Handle
	redials atomic.Int64
}

// NewSess returns a Sess that dials with cfg and opens keys (they must
// exist).
func NewSess(name string, cfg client.Config, keys []string) *Sess {
	cfg.FixedServers = true
	return &Sess{Name: name, cfg: cfg, keys: keys}
}

// Get returns a live client and its handles, dialling if needed (bounded by
// 10 s); nil if there is none now.
func (s *Sess) Get() (*client.Client, []*client.Handle) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cl != nil {
		select {
		case <-s.cl.Done():
			s.cl.Close()
			s.cl, s.hs = nil, nil
			s.redials.Add(1)
		default:
			return s.cl, s.hs
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cl, err := client.Dial(ctx, s.cfg)
	if err != nil {
		return nil, nil
	}
	hs := make([]*client.Handle, len(s.keys))
	for i, k := range s.keys {
		if hs[i], err = cl.Open(ctx, k); err != nil {
			cl.Close()
			return nil, nil
		}
	}
	s.cl, s.hs = cl, hs
	return cl, hs
}

// Redials is how many times the session ended and was dialled again.
func (s *Sess) Redials() int64 { return s.redials.Load() }

// Close ends the current session.
func (s *Sess) Close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cl != nil {
		s.cl.Close()
		s.cl, s.hs = nil, nil
	}
}

// Handles returns the client's handles (core.RegClient), dialling if
// needed; nil if there is no session now.
func (s *Sess) Handles() []*client.Handle {
	_, hs := s.Get()
	return hs
}

// DurableLog is the durability workload: it writes new files dir/f<n>
// (value "v<n>") one after the other and remembers each acknowledged one.
type DurableLog struct {
	Dir string

	mu    sync.Mutex
	acked []Durable
	last  atomic.Int64 // History time of the last acknowledgement
	fails atomic.Int64
}

// Run writes until ctx is done.
func (d *DurableLog) Run(ctx context.Context, s *Sess, h *History) {
	for n := 0; ctx.Err() == nil; {
		cl, _ := s.Get()
		if cl == nil {
			wait.Sleep(ctx, 50*time.Millisecond)
			continue
		}
		p, v := fmt.Sprintf("%s/f%d", d.Dir, n), fmt.Sprintf("v%d", n)
		wctx, cancel := context.WithTimeout(context.Background(), core.RegOpTimeout)
		_, err := cl.WriteFile(wctx, p, []byte(v))
		cancel()
		if err != nil {
			d.fails.Add(1)
			n++ // the next file is a new one: this one may or may not exist
			continue
		}
		d.mu.Lock()
		d.acked = append(d.acked, Durable{Path: p, Value: v})
		d.mu.Unlock()
		d.last.Store(h.Now())
		n++
		wait.Sleep(ctx, 5*time.Millisecond)
	}
}

// Acked returns the acknowledged writes.
func (d *DurableLog) Acked() []Durable {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]Durable(nil), d.acked...)
}

// Last is the History time of the last acknowledged write (0: none).
func (d *DurableLog) Last() int64 { return d.last.Load() }

// Fails is how many writes failed (outcome unknown).
func (d *DurableLog) Fails() int64 { return d.fails.Load() }
