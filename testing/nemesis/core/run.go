package core

import (
	"context"
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/chubby-dev/chubby/testing/wait"
)

// Target is what a nemesis acts on: a cell, its links and its clients.
// testing/nemesis implements it on an in-process cell (testing/cell), and
// testing/procnemesis on chubbyd processes behind TCP proxies. Its methods
// are called from the test's goroutine, one at a time.
type Target interface {
	// Servers is how many servers the cell has.
	Servers() int
	// Inject starts st's fault and returns what it did and how to undo it
	// (nil: nothing to undo), or, if it skipped the step (every candidate
	// busy with another fault), why.
	Inject(st Step) (f Fault, skipped string)
	// Settle is called before a server fault that starts while no other
	// server fault is active, and waits until the cell is ready for one
	// (one master); an error fails the test, as a liveness bug. The time
	// it takes shifts the rest of the schedule.
	Settle() error
	// Heal leaves everything healed: every link up and undelayed, every
	// server running and continued, every client resumed, every clock at
	// real speed. It is given the undos of the faults still active, latest
	// first (what to do with them after a failure is the target's call).
	Heal(pending []func())
}

// Fault is a fault a Target injected.
type Fault struct {
	What string // for the log and the history's annotations
	Undo func() // nil: nothing to undo
}

// Noter records what the nemesis did, for the history's visualization.
type Noter interface {
	Now() int64
	Note(tag, what string, start, end int64)
}

// Tally counts the steps Run injected and those it skipped.
type Tally struct {
	Ran, Skipped map[Kind]int
}

func (t Tally) String() string {
	return "ran " + CountString(t.Ran) + "; skipped " + CountString(t.Skipped)
}

// Run plays s on target from the calling goroutine (the test's: it may
// fail t) and returns when every step ran and was undone. Steps start at
// their At, counted from the call, shifted by the time Target.Settle took
// (an injection that takes time, a restart, delays the steps after it).
// At each moment undos run before injections. Whatever happens, Run ends
// with Target.Heal.
func Run(t testing.TB, target Target, s Schedule, notes Noter) Tally {
	t.Helper()
	tally := Tally{Ran: map[Kind]int{}, Skipped: map[Kind]int{}}
	undos := map[int]func(){}
	defer func() {
		var steps []int
		for i := range undos {
			steps = append(steps, i)
		}
		sort.Sort(sort.Reverse(sort.IntSlice(steps)))
		pending := make([]func(), len(steps))
		for j, i := range steps {
			pending[j] = undos[i]
		}
		target.Heal(pending)
	}()

	type event struct {
		at   time.Duration
		step int
		end  bool
	}
	var events []event
	for i, st := range s.Steps {
		events = append(events, event{st.At, i, false}, event{st.End(), i, true})
	}
	sort.SliceStable(events, func(i, j int) bool {
		if events[i].at != events[j].at {
			return events[i].at < events[j].at
		}
		return events[i].end && !events[j].end // undo before inject
	})
	start := time.Now()
	var shift time.Duration
	serverActive := 0
	for _, e := range events {
		wait.Sleep(context.Background(), time.Until(start.Add(e.at+shift)))
		st := s.Steps[e.step]
		if e.end {
			if u, ok := undos[e.step]; ok {
				delete(undos, e.step)
				u()
			}
			if !st.Kind.ClientKind() {
				serverActive--
			}
			continue
		}
		if !st.Kind.ClientKind() {
			if serverActive == 0 {
				w := time.Now()
				if err := target.Settle(); err != nil {
					t.Fatalf("seed %d, before step %d (%s): %v", s.Seed, e.step+1, st, err)
				}
				shift += time.Since(w)
			}
			serverActive++
		}
		at := notes.Now()
		f, why := target.Inject(st)
		if why != "" {
			tally.Skipped[st.Kind]++
			t.Logf("nemesis seed %d step %d at %.3fs: %s skipped: %s", s.Seed, e.step+1, time.Since(start).Seconds(), st.Kind, why)
			continue
		}
		tally.Ran[st.Kind]++
		t.Logf("nemesis seed %d step %d at %.3fs: %s for %v", s.Seed, e.step+1, time.Since(start).Seconds(), f.What, st.Hold.Round(time.Millisecond))
		undos[e.step] = func() {
			if f.Undo != nil {
				f.Undo()
			}
			notes.Note(fmt.Sprintf("nemesis: %s", st.Kind), f.What, at, notes.Now())
		}
	}
	return tally
}

// NextFree is how both targets resolve a step's pick among n candidates
// (servers, clients): the first of want, want+1, ... (mod n) that free
// accepts, and how far it moved from want; -1 if none does.
func NextFree(want, n int, free func(int) bool) (i, moved int) {
	for k := range n {
		if i := (want + k) % n; free(i) {
			return i, k
		}
	}
	return -1, 0
}
