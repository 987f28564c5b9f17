// Package fencedstore is a small key-value server that embeds
// client/fence.Guard, the way a downstream store protects itself from lock
// holders that were superseded (Chubby §2.4; Kleppmann's fencing tokens).
//
// PUT /KEY with the value as body and the writer's sequencer in the
// X-Chubby-Sequencer header stores the value only if the sequencer is not
// older than the newest seen for its lock (409 Conflict otherwise). GET /KEY
// returns the value. With fencing off the header is ignored: the store
// behaves like one that trusts lock holders, to show the hazard.
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

// SequencerHeader carries the writer's sequencer.
const SequencerHeader = "X-Chubby-Sequencer"

// Store is the key-value server.
type Store struct {
	fenced bool
	guard  *fence.Guard

	mu       sync.Mutex
	data     map[string]string
	admitted int
	rejected int

	srv *http.Server
	ln  net.Listener
}

// Start serves a store on a loopback port.
func Start(fenced bool) (*Store, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s := &Store{fenced: fenced, guard: fence.NewGuard(), data: map[string]string{}, ln: ln}
	s.srv = &http.Server{Handler: s}
	go s.srv.Serve(ln)
	return s, nil
}

// URL is the store's base URL.
func (s *Store) URL() string { return "http://" + s.ln.Addr().String() }

// Close stops the server.
func (s *Store) Close() error { return s.srv.Close() }

// Counts returns how many writes were admitted and rejected.
func (s *Store) Counts() (admitted, rejected int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.admitted, s.rejected
}

func (s *Store) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	key := strings.TrimPrefix(r.URL.Path, "/")
	switch r.Method {
	case http.MethodGet:
		s.mu.Lock()
		v, ok := s.data[key]
		s.mu.Unlock()
		if !ok {
			http.NotFound(w, r)
			return
		}
		io.WriteString(w, v)
	case http.MethodPut:
		body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		put := func() error {
			s.mu.Lock()
			s.data[key] = string(body)
			s.admitted++
			s.mu.Unlock()
			return nil
		}
		if !s.fenced {
			put()
			return
		}
		seq, err := fs.ParseSequencer(r.Header.Get(SequencerHeader))
		if err == nil {
			err = s.guard.AdmitAndDo(seq, put)
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
		}
	default:
		http.Error(w, "GET or PUT", http.StatusMethodNotAllowed)
	}
}

// Client talks to a Store.
type Client struct{ URL string }

// Get reads a key.
func (c Client) Get(key string) (string, error) {
	resp, err := http.Get(c.URL + "/" + key)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("GET %s: %s", key, resp.Status)
	}
	return string(b), err
}

// ErrStale is returned by Put when the store rejected the sequencer.
var ErrStale = errors.New("store rejected a stale sequencer")

// Put writes a key carrying seq.
func (c Client) Put(key, value string, seq fs.Sequencer) error {
	req, err := http.NewRequest(http.MethodPut, c.URL+"/"+key, strings.NewReader(value))
	if err != nil {
		return err
	}
	req.Header.Set(SequencerHeader, seq.String())
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(resp.Body)
	switch resp.StatusCode {
	case http.StatusOK:
		return nil
	case http.StatusConflict:
		return fmt.Errorf("%w: %s", ErrStale, strings.TrimSpace(string(msg)))
	}
	return fmt.Errorf("PUT %s: %s: %s", key, resp.Status, strings.TrimSpace(string(msg)))
}
