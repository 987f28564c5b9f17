package fencedstore_test

import (
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/chubby-dev/chubby/fs"
	"github.com/chubby-dev/chubby/testing/fencedstore"
)

// TestStoreFences: the store admits a sequencer not older than the newest
// it has seen and refuses an older one — on a write and on a fenced read,
// in memory and over HTTP (409) — and logs only what it admitted, with the
// caller's tag; unfenced, it admits everything.
func TestStoreFences(t *testing.T) {
	seq := func(gen uint64) fs.Sequencer { return fs.Sequencer{Path: "/ls/local/l", Mode: fs.Exclusive, Gen: gen} }
	for _, fenced := range []bool{true, false} {
		s := fencedstore.New(fenced, func() int64 { return 7 })
		s.Set("counter", "0")
		if err := s.Serve(); err != nil {
			t.Fatal(err)
		}
		c := fencedstore.Client{URL: s.URL(), HTTP: &http.Client{Timeout: 5 * time.Second}}
		if err := c.Write("counter", "1", seq(5), fencedstore.Tag{Worker: 0, Hold: 1}); err != nil {
			t.Fatalf("fenced=%v: first write: %v", fenced, err)
		}
		v, err := c.Read("counter", seq(4), fencedstore.Tag{Worker: 1, Hold: 2})
		if fenced != errors.Is(err, fencedstore.ErrStale) || (!fenced && v != "1") {
			t.Fatalf("fenced=%v: read with an older sequencer over HTTP: %q %v", fenced, v, err)
		}
		_, err = s.Read("counter", seq(3), fencedstore.Tag{Worker: 1, Hold: 3})
		if fenced != errors.Is(err, fencedstore.ErrStale) {
			t.Fatalf("fenced=%v: read with an older sequencer in memory: %v", fenced, err)
		}
		ops := s.Log()
		_, rejected := s.Counts()
		wantOps, wantRejected := 1, 2
		if !fenced {
			wantOps, wantRejected = 3, 0
		}
		if len(ops) != wantOps || s.Value("counter") != "1" || rejected != wantRejected ||
			ops[0] != (fencedstore.Op{Key: "counter", Worker: 0, Hold: 1, Gen: 5, Write: true, Value: "1", At: 7}) {
			t.Fatalf("fenced=%v: ops %+v counter %q rejected %d", fenced, ops, s.Value("counter"), rejected)
		}
		if _, err := c.Read("missing", seq(9), fencedstore.Tag{}); !errors.Is(err, fencedstore.ErrNotFound) {
			t.Fatalf("fenced=%v: read of a missing key: %v", fenced, err)
		}
		s.Close()
	}
}
