package fencedstore

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"

	"github.com/chubby-dev/chubby/client/fence"
	"github.com/chubby-dev/chubby/fs"
)

// SequencerHeader carries the caller's sequencer; HoldHeader its Tag.
const (
	SequencerHeader = "X-Chubby-Sequencer"
	HoldHeader      = "X-Hold"
)

// ErrStale is returned for an operation whose sequencer the guard refused.
var ErrStale = fence.ErrStale

// ErrNotFound is returned by a read of a key that has no value.
var ErrNotFound = errors.New("no such key")

// Fenced is a store operated with sequencers: a Store in memory, or a
// Client of a served one.
type Fenced interface {
	// Read reads key carrying seq and tag (a fenced read).
	Read(key string, seq fs.Sequencer, tag Tag) (string, error)
	// Write writes key carrying seq and tag.
	Write(key, value string, seq fs.Sequencer, tag Tag) error
}

// Tag names who made an operation, for the log: a worker and its hold.
type Tag struct{ Worker, Hold int }

// Op is an operation the store admitted with a sequencer.
type Op struct {
	Key          string
	Worker, Hold int // the caller's Tag
	Gen          uint64
	Write        bool
	Value        string // a read: the value returned; a write: the value written
	At           int64  // the store's clock at admission
}

// Store is the key-value store. The zero value is not usable: see New.
type Store struct {
	fenced bool
	guard  *fence.Guard
	now    func() int64

	mu       sync.Mutex
	data     map[string]string
	log      []Op
	admitted int
	rejected int

	srv *http.Server
	ln  net.Listener
}

// New returns an in-memory store (Serve puts it on the network). now
// stamps the log (nil: every Op.At is 0).
func New(fenced bool, now func() int64) *Store {
	if now == nil {
		now = func() int64 { return 0 }
	}
	return &Store{fenced: fenced, guard: fence.NewGuard(), now: now, data: map[string]string{}}
}

// Start serves a new store on a loopback port.
func Start(fenced bool) (*Store, error) {
	s := New(fenced, nil)
	return s, s.Serve()
}

// Serve serves the store over HTTP on a loopback port.
func (s *Store) Serve() error {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	s.ln = ln
	s.srv = &http.Server{Handler: s}
	go s.srv.Serve(ln)
	return nil
}

// URL is the served store's base URL.
func (s *Store) URL() string { return "http://" + s.ln.Addr().String() }

// Close stops the server.
func (s *Store) Close() error {
	if s.srv == nil {
		return nil
	}
	return s.srv.Close()
}

// Set stores a value without a sequencer and without logging it (setup).
func (s *Store) Set(key, value string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.data[key] = value
}

// Value is key's value now ("" if none).
func (s *Store) Value(key string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.data[key]
}

// Counts returns how many writes were admitted and operations rejected.
func (s *Store) Counts() (admitted, rejected int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.admitted, s.rejected
}

// Log returns the admitted operations that carried a sequencer, in
// admission order.
func (s *Store) Log() []Op {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Op(nil), s.log...)
}

// Read returns key's value if the guard admits seq: ErrStale if it does
// not, ErrNotFound if key has no value.
func (s *Store) Read(key string, seq fs.Sequencer, tag Tag) (string, error) {
	return s.read(key, &seq, tag)
}

// Write sets key to value if the guard admits seq (ErrStale otherwise).
func (s *Store) Write(key, value string, seq fs.Sequencer, tag Tag) error {
	return s.write(key, value, &seq, tag)
}

// read returns key's value, admitted by the guard if seq is not nil.
func (s *Store) read(key string, seq *fs.Sequencer, tag Tag) (v string, err error) {
	found := false
	err = s.admit(seq, func() {
		v, found = s.data[key]
		s.logLocked(Op{Key: key, Worker: tag.Worker, Hold: tag.Hold, Value: v}, seq)
	})
	if err == nil && !found {
		err = ErrNotFound
	}
	return v, err
}

// write sets key to value, admitted by the guard if seq is not nil.
func (s *Store) write(key, value string, seq *fs.Sequencer, tag Tag) error {
	return s.admit(seq, func() {
		s.data[key] = value
		s.admitted++
		s.logLocked(Op{Key: key, Worker: tag.Worker, Hold: tag.Hold, Write: true, Value: value}, seq)
	})
}

func (s *Store) logLocked(op Op, seq *fs.Sequencer) {
	if seq == nil {
		return
	}
	op.Gen, op.At = seq.Gen, s.now()
	s.log = append(s.log, op)
}

// admit runs do under the store's lock, through the guard when the store
// is fenced and the operation carries a sequencer.
func (s *Store) admit(seq *fs.Sequencer, do func()) error {
	locked := func() error {
		s.mu.Lock()
		defer s.mu.Unlock()
		do()
		return nil
	}
	if !s.fenced || seq == nil {
		return locked()
	}
	err := s.guard.AdmitAndDo(*seq, locked)
	if err != nil {
		s.mu.Lock()
		s.rejected++
		s.mu.Unlock()
	}
	return err
}

func (s *Store) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	key := strings.TrimPrefix(r.URL.Path, "/")
	var seq *fs.Sequencer
	if h := r.Header.Get(SequencerHeader); h != "" || s.fenced && r.Method == http.MethodPut {
		q, err := fs.ParseSequencer(h)
		if err != nil {
			s.mu.Lock()
			s.rejected++
			s.mu.Unlock()
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		seq = &q
	}
	var tag Tag
	if h := r.Header.Get(HoldHeader); h != "" {
		if _, err := fmt.Sscanf(h, "%d/%d", &tag.Worker, &tag.Hold); err != nil {
			http.Error(w, "bad "+HoldHeader, http.StatusBadRequest)
			return
		}
	}
	var err error
	switch r.Method {
	case http.MethodGet:
		var v string
		if v, err = s.read(key, seq, tag); err == nil {
			io.WriteString(w, v)
			return
		}
	case http.MethodPut:
		body, rerr := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		if rerr != nil {
			http.Error(w, rerr.Error(), http.StatusBadRequest)
			return
		}
		if err = s.write(key, string(body), seq, tag); err == nil {
			return
		}
	default:
		http.Error(w, "GET or PUT", http.StatusMethodNotAllowed)
		return
	}
	code := http.StatusBadRequest
	switch {
	case errors.Is(err, fence.ErrStale):
		code = http.StatusConflict
	case errors.Is(err, ErrNotFound):
		code = http.StatusNotFound
	}
	http.Error(w, err.Error(), code)
}

// Client talks to a served Store.
type Client struct {
	URL  string
	HTTP *http.Client // nil: http.DefaultClient
}

// Get reads a key without a sequencer.
func (c Client) Get(key string) (string, error) { return c.do(http.MethodGet, key, "", nil, nil) }

// Put writes a key carrying seq.
func (c Client) Put(key, value string, seq fs.Sequencer) error {
	_, err := c.do(http.MethodPut, key, value, &seq, nil)
	return err
}

// Read reads a key carrying seq and tag (a fenced read); ErrStale if the
// store refused seq.
func (c Client) Read(key string, seq fs.Sequencer, tag Tag) (string, error) {
	return c.do(http.MethodGet, key, "", &seq, &tag)
}

// Write writes a key carrying seq and tag; ErrStale if the store refused
// seq.
func (c Client) Write(key, value string, seq fs.Sequencer, tag Tag) error {
	_, err := c.do(http.MethodPut, key, value, &seq, &tag)
	return err
}

func (c Client) do(method, key, value string, seq *fs.Sequencer, tag *Tag) (string, error) {
	var body io.Reader
	if method == http.MethodPut {
		body = strings.NewReader(value)
	}
	req, err := http.NewRequest(method, c.URL+"/"+key, body)
	if err != nil {
		return "", err
	}
	if seq != nil {
		req.Header.Set(SequencerHeader, seq.String())
	}
	if tag != nil {
		req.Header.Set(HoldHeader, fmt.Sprintf("%d/%d", tag.Worker, tag.Hold))
	}
	hc := c.HTTP
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	msg := strings.TrimSpace(string(b))
	switch resp.StatusCode {
	case http.StatusOK:
		return string(b), nil
	case http.StatusConflict:
		return "", fmt.Errorf("%w: %s", ErrStale, msg)
	case http.StatusNotFound:
		return "", fmt.Errorf("%w: %s", ErrNotFound, key)
	}
	return "", fmt.Errorf("%s %s: %s: %s", method, key, resp.Status, msg)
}
