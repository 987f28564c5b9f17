package fs

import (
	"strconv"
	"strings"
)

// Mode is a lock mode.
type Mode uint8

// Lock modes.
const (
	Exclusive Mode = 1
	Shared    Mode = 2
)

func (m Mode) String() string {
	switch m {
	case Exclusive:
		return "exclusive"
	case Shared:
		return "shared"
	}
	return "mode(" + strconv.Itoa(int(m)) + ")"
}

func (m Mode) valid() bool { return m == Exclusive || m == Shared }

// Sequencer is a fencing token: it names a lock, the mode it was held in and
// the lock generation of that acquisition. Lock generations of one path
// strictly increase at every free→held transition, so a later holder's
// sequencer compares greater (Newer). A sequencer is valid while the lock is
// held in that mode at that generation.
type Sequencer struct {
	Path string `msgpack:"p"`
	Mode Mode   `msgpack:"m"`
	Gen  uint64 `msgpack:"g"`
}

// String prints the sequencer as one token with no spaces, for example
// "X:42:/ls/local/lock" (X exclusive, S shared). ParseSequencer reads it back.
func (s Sequencer) String() string {
	m := "X"
	if s.Mode == Shared {
		m = "S"
	}
	return m + ":" + strconv.FormatUint(s.Gen, 10) + ":" + s.Path
}

// IsZero reports whether s is the zero Sequencer.
func (s Sequencer) IsZero() bool { return s == Sequencer{} }

// Newer reports whether s was issued after o for the same lock.
func (s Sequencer) Newer(o Sequencer) bool { return s.Path == o.Path && s.Gen > o.Gen }

// ParseSequencer parses the form String prints. It checks the syntax only;
// whether the path is in a given cell is checked where it is used.
func ParseSequencer(text string) (Sequencer, error) {
	parts := strings.SplitN(text, ":", 3)
	if len(parts) != 3 {
		return Sequencer{}, errf(ErrBadSequencer, "%q is not MODE:GEN:PATH", text)
	}
	var s Sequencer
	switch parts[0] {
	case "X":
		s.Mode = Exclusive
	case "S":
		s.Mode = Shared
	default:
		return Sequencer{}, errf(ErrBadSequencer, "%q: mode must be X or S", text)
	}
	gen, err := strconv.ParseUint(parts[1], 10, 64)
	if err != nil || gen == 0 {
		return Sequencer{}, errf(ErrBadSequencer, "%q: generation must be a positive integer", text)
	}
	s.Gen = gen
	if !strings.HasPrefix(parts[2], "/ls/") {
		return Sequencer{}, errf(ErrBadSequencer, "%q: path must start with /ls/", text)
	}
	s.Path = parts[2]
	return s, nil
}
