package procnemesis

import "github.com/chubby-dev/chubby/testing/linear"

// History collects porcupine operations and the nemesis's notes from any
// goroutine (a linear.Recorder), with times in nanoseconds since base on
// MonoNow's clock, so the lock clients' events, stamped in their own
// processes, fit in.
type History struct {
	*linear.Recorder
	base int64
}

// NewHistory starts a history whose time zero is now.
func NewHistory() *History {
	base := MonoNow()
	return &History{Recorder: linear.NewRecorderClock(func() int64 { return MonoNow() - base }), base: base}
}

// At converts a MonoNow reading to the history's time.
func (h *History) At(mono int64) int64 { return mono - h.base }
