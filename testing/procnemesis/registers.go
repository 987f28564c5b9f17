package procnemesis

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/chubby-dev/chubby/client"
	"github.com/chubby-dev/chubby/testing/nemesis"
)

// Sess is a client of the test process that reaches the cell only through
// its own proxies (Config.Servers, FixedServers), with a handle on each of
// its keys; when its session ends (expired under a fault) the next caller
// dials a new one. Safe for concurrent use.
type Sess struct {
	Name string
	// Writable is how many of the keys, from the first, RunWriter writes
	// (0: all); the others are only read.
	Writable int
	cfg      client.Config
	keys     []string

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

// RegStats counts the register workload's operations; Last holds, per
// porcupine client id, when its last successful operation returned.
type RegStats struct {
	Reads, Writes, CASOK, CASMismatch, Failed atomic.Int64
	Last                                      []atomic.Int64
}

func (s *RegStats) String() string {
	return fmt.Sprintf("%d reads, %d writes, %d CAS ok, %d CAS mismatch, %d failed (reads dropped, writes/CAS kept as unknown)",
		s.Reads.Load(), s.Writes.Load(), s.CASOK.Load(), s.CASMismatch.Load(), s.Failed.Load())
}

// regOpTimeout bounds one register call.
const regOpTimeout = 10 * time.Second

func stopped(stop <-chan struct{}) bool {
	select {
	case <-stop:
		return true
	default:
		return false
	}
}

// pause sleeps d or until stop.
func pause(stop <-chan struct{}, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-stop:
	}
}

// RunReader reads random keys of s (from its cache when it can) as
// porcupine client id until stop is closed. Failed reads changed nothing
// and are left out of the history.
func RunReader(id int, s *Sess, rng *rand.Rand, h *History, st *RegStats, stop <-chan struct{}) {
	for !stopped(stop) {
		_, hs := s.Get()
		if hs == nil {
			pause(stop, 50*time.Millisecond)
			continue
		}
		k := rng.IntN(len(hs))
		call := h.Now()
		ctx, cancel := context.WithTimeout(context.Background(), regOpTimeout)
		data, _, err := hs[k].GetContentsAndStat(ctx)
		cancel()
		ret := h.Now()
		if err != nil {
			st.Failed.Add(1)
		} else {
			st.Reads.Add(1)
			st.Last[id].Store(ret)
			h.Add(porcupine.Operation{ClientId: id, Input: nemesis.RegInput{Kind: nemesis.OpRead, Key: s.keys[k]}, Call: call,
				Output: nemesis.RegOutput{Value: string(data)}, Return: ret, Metadata: s.Name})
		}
		pause(stop, time.Duration(rng.Int64N(int64(3*time.Millisecond))))
	}
}

// RunWriter writes unique values to random keys of s as porcupine client id
// until stop is closed: half plain writes, half read-then-CAS on the content
// generation read with the value (the read is recorded too). A write or CAS
// that failed is kept with an unknown outcome.
func RunWriter(id int, s *Sess, rng *rand.Rand, h *History, st *RegStats, stop <-chan struct{}) {
	for n := 0; !stopped(stop); n++ {
		_, hs := s.Get()
		if hs == nil {
			pause(stop, 50*time.Millisecond)
			continue
		}
		writable := len(hs)
		if s.Writable > 0 {
			writable = s.Writable
		}
		k := rng.IntN(writable)
		key := s.keys[k]
		v := fmt.Sprintf("%s-%d", s.Name, n)
		if rng.IntN(2) == 0 {
			call := h.Now()
			ctx, cancel := context.WithTimeout(context.Background(), regOpTimeout)
			_, err := hs[k].SetContents(ctx, []byte(v))
			cancel()
			out, ret := nemesis.RegOutput{OK: true}, h.Now()
			if err != nil {
				st.Failed.Add(1)
				out, ret = nemesis.RegOutput{Unknown: true}, math.MaxInt64
			} else {
				st.Writes.Add(1)
				st.Last[id].Store(ret)
			}
			h.Add(porcupine.Operation{ClientId: id, Input: nemesis.RegInput{Kind: nemesis.OpWrite, Key: key, Value: v},
				Call: call, Output: out, Return: ret, Metadata: meta(s.Name, err)})
		} else {
			call := h.Now()
			ctx, cancel := context.WithTimeout(context.Background(), regOpTimeout)
			data, stat, err := hs[k].GetContentsAndStat(ctx)
			cancel()
			if err != nil {
				st.Failed.Add(1)
				continue
			}
			ret := h.Now()
			st.Reads.Add(1)
			h.Add(porcupine.Operation{ClientId: id, Input: nemesis.RegInput{Kind: nemesis.OpRead, Key: key}, Call: call,
				Output: nemesis.RegOutput{Value: string(data)}, Return: ret, Metadata: s.Name})
			call = h.Now()
			ctx, cancel = context.WithTimeout(context.Background(), regOpTimeout)
			_, err = hs[k].SetContentsIf(ctx, []byte(v), stat.ContentGen)
			cancel()
			out, ret := nemesis.RegOutput{OK: true}, h.Now()
			switch {
			case err == nil:
				st.CASOK.Add(1)
				st.Last[id].Store(ret)
			case errors.Is(err, client.ErrCASMismatch):
				st.CASMismatch.Add(1)
				st.Last[id].Store(ret)
				out.OK = false
			default:
				st.Failed.Add(1)
				out, ret = nemesis.RegOutput{Unknown: true}, math.MaxInt64
			}
			h.Add(porcupine.Operation{ClientId: id, Input: nemesis.RegInput{Kind: nemesis.OpCAS, Key: key, Expect: string(data), Value: v},
				Call: call, Output: out, Return: ret, Metadata: meta(s.Name, err)})
		}
		pause(stop, time.Duration(rng.Int64N(int64(10*time.Millisecond))))
	}
}

func meta(name string, err error) any {
	if err == nil {
		return name
	}
	return name + ": outcome unknown: " + err.Error()
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

// Run writes until stop is closed.
func (d *DurableLog) Run(s *Sess, h *History, stop <-chan struct{}) {
	for n := 0; !stopped(stop); {
		cl, _ := s.Get()
		if cl == nil {
			pause(stop, 50*time.Millisecond)
			continue
		}
		p, v := fmt.Sprintf("%s/f%d", d.Dir, n), fmt.Sprintf("v%d", n)
		ctx, cancel := context.WithTimeout(context.Background(), regOpTimeout)
		_, err := cl.WriteFile(ctx, p, []byte(v))
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
		pause(stop, 5*time.Millisecond)
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
