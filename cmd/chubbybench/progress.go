package main

// The progress bar on stderr while a run goes on.

import (
	"io"
	"os"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"
)

// progress draws a bar of the run's time on stderr. It is off (every
// method does nothing) when stderr is not a terminal or with -quiet, so
// logs and pipes get only the report.
type progress struct {
	out io.Writer // nil: off
}

func newProgress(stderr io.Writer, quiet bool) *progress {
	f, ok := stderr.(*os.File)
	if quiet || !ok || !term.IsTerminal(int(f.Fd())) {
		return &progress{}
	}
	return &progress{out: stderr}
}

// run shows value() against total, described by describe, until the
// returned func is called (which clears the bar).
func (p *progress) run(total int64, value func() int64, describe func() string) (stop func()) {
	if p.out == nil {
		return func() {}
	}
	bar := progressbar.NewOptions64(total,
		progressbar.OptionSetWriter(p.out),
		progressbar.OptionSetDescription(describe()),
		progressbar.OptionSetWidth(30),
		progressbar.OptionSetPredictTime(false),
		progressbar.OptionClearOnFinish(),
		progressbar.OptionThrottle(100*time.Millisecond),
	)
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		t := time.NewTicker(200 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-done:
				bar.Finish()
				return
			case <-t.C:
				bar.Describe(describe())
				bar.Set64(min(value(), total))
			}
		}
	}()
	return func() {
		close(done)
		<-finished
	}
}

// runFor is run for a span of time from start, in milliseconds.
func (p *progress) runFor(span time.Duration, start time.Time, describe func() string) (stop func()) {
	return p.run(span.Milliseconds(), func() int64 { return time.Since(start).Milliseconds() }, describe)
}
