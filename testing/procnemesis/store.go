package procnemesis

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"

	"github.com/chubby-dev/chubby/client/fence"
	"github.com/chubby-dev/chubby/fs"
)

// SequencerHeader carries the caller's sequencer; HoldHeader names the
// caller's hold ("WORKER/HOLD") for the history.
const (
	SequencerHeader = "X-Chubby-Sequencer"
	HoldHeader      = "X-Hold"
)

// Store is the downstream store of the fencing workload: one counter behind
// a fence.Guard, served over HTTP on loopback. GET /counter returns it and
// PUT /counter (body: the new value) sets it; both carry the caller's
// sequencer and both go through the guard, which answers 409 Conflict to a
// sequencer older than the newest it has seen. (A fenced read is what keeps
// a superseded holder that read before the new holder from writing after
// it.) Every admitted operation is logged in admission order with the time
// it was admitted, on MonoNow's clock.
type Store struct {
	guard    *fence.Guard
	unfenced bool // the store ignores sequencers (the negative control)

	mu       sync.Mutex
	counter  int
	ops      []StoreOp
	rejected int

	srv *http.Server
	ln  net.Listener
}

// StoreOp is an operation the store admitted.
type StoreOp struct {
	Worker, Hold int
	Gen          uint64
	Write        bool
	Value        int   // a read: the value returned; a write: the value written
	At           int64 // MonoNow at admission
}

// StartStore serves a store whose counter is 0 on a loopback port. An
// unfenced store ignores sequencers: it trusts every caller, like a store
// that believes lock holders (the negative control).
func StartStore(fenced bool) (*Store, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s := &Store{guard: fence.NewGuard(), unfenced: !fenced, ln: ln}
	s.srv = &http.Server{Handler: s}
	go s.srv.Serve(ln)
	return s, nil
}

// Addr is the store's host:port.
func (s *Store) Addr() string { return s.ln.Addr().String() }

// Close stops the server and closes its connections.
func (s *Store) Close() error { return s.srv.Close() }

// Snapshot returns the admitted operations, the counter and how many
// operations the guard refused.
func (s *Store) Snapshot() (ops []StoreOp, counter, rejected int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]StoreOp(nil), s.ops...), s.counter, s.rejected
}

func (s *Store) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/counter" {
		http.NotFound(w, r)
		return
	}
	seq, err := fs.ParseSequencer(r.Header.Get(SequencerHeader))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var worker, hold int
	if _, err := fmt.Sscanf(r.Header.Get(HoldHeader), "%d/%d", &worker, &hold); err != nil {
		http.Error(w, "bad "+HoldHeader, http.StatusBadRequest)
		return
	}
	op := StoreOp{Worker: worker, Hold: hold, Gen: seq.Gen}
	switch r.Method {
	case http.MethodGet:
	case http.MethodPut:
		b, err := io.ReadAll(io.LimitReader(r.Body, 64))
		if err == nil {
			op.Value, err = strconv.Atoi(strings.TrimSpace(string(b)))
		}
		if err != nil {
			http.Error(w, "bad value", http.StatusBadRequest)
			return
		}
		op.Write = true
	default:
		http.Error(w, "GET or PUT", http.StatusMethodNotAllowed)
		return
	}
	do := func() error {
		s.mu.Lock()
		defer s.mu.Unlock()
		if op.Write {
			s.counter = op.Value
		} else {
			op.Value = s.counter
		}
		op.At = MonoNow()
		s.ops = append(s.ops, op)
		return nil
	}
	if s.unfenced {
		err = do()
	} else {
		err = s.guard.AdmitAndDo(seq, do)
	}
	if err != nil {
		s.mu.Lock()
		s.rejected++
		s.mu.Unlock()
		code := http.StatusBadRequest
		if errors.Is(err, fence.ErrStale) {
			code = http.StatusConflict
		}
		http.Error(w, err.Error(), code)
		return
	}
	io.WriteString(w, strconv.Itoa(op.Value))
}
