package fence

import (
	"errors"
	"fmt"
	"sync"

	"github.com/chubby-dev/chubby/fs"
)

// ErrStale is returned by Admit for a sequencer older than one already seen.
var ErrStale = errors.New("stale sequencer")

// Guard admits sequencers whose generation is not older than the newest seen
// for the same lock. It is safe for concurrent use.
type Guard struct {
	mu     sync.Mutex
	newest map[string]uint64
}

// NewGuard returns an empty guard.
func NewGuard() *Guard { return &Guard{newest: map[string]uint64{}} }

// Admit records seq and reports whether a write carrying it may proceed. A
// sequencer with the newest generation seen for its lock (or newer) is
// admitted; an older one fails with ErrStale. The caller must apply the
// admitted write while no newer Admit can interleave — typically by calling
// Admit and the write under the store's own lock — or use AdmitAndDo.
func (g *Guard) Admit(seq fs.Sequencer) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.admitLocked(seq)
}

func (g *Guard) admitLocked(seq fs.Sequencer) error {
	if seq.Gen == 0 || seq.Path == "" {
		return fmt.Errorf("%w: %q is not a sequencer", ErrStale, seq.String())
	}
	if cur := g.newest[seq.Path]; seq.Gen < cur {
		return fmt.Errorf("%w: %s is older than generation %d", ErrStale, seq, cur)
	}
	g.newest[seq.Path] = seq.Gen
	return nil
}

// AdmitAndDo admits seq and, if admitted, runs write while holding the
// guard's lock, so no newer sequencer can be admitted between the check and
// the write.
func (g *Guard) AdmitAndDo(seq fs.Sequencer, write func() error) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if err := g.admitLocked(seq); err != nil {
		return err
	}
	return write()
}

// AdmitString parses a sequencer as printed by chubbysh and admits it.
func (g *Guard) AdmitString(s string) error {
	seq, err := fs.ParseSequencer(s)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrStale, err)
	}
	return g.Admit(seq)
}

// Newest returns the newest generation seen for a lock path (0 if none).
func (g *Guard) Newest(path string) uint64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.newest[path]
}
