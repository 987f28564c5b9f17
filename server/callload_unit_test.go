package server

import "testing"

func TestCallLoadEnterLeave(t *testing.T) {
	var l callLoad
	a := l.enter() // alone: no overlap
	b := l.enter() // a runs: overlap
	a()
	a()            // twice counts once
	c := l.enter() // b runs: overlap
	b()
	c()
	d := l.enter() // nothing runs: no overlap
	d()
	calls, over := l.started.Load(), l.overlaps.Load()
	if calls != 4 || over != 2 {
		t.Fatalf("calls %d overlapped %d, want 4 and 2", calls, over)
	}
	if r := l.running.Load(); r != 0 {
		t.Fatalf("running %d after every call left, want 0", r)
	}
}
