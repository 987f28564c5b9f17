package fs

import (
	"bytes"
	"errors"
	"testing"
)

// Exactly-once retries (issue: replicated cell): a call retried after its
// reply was lost carries the same call id and gets the first answer without
// being applied again; ids below the client's acknowledged mark are forgotten.
func TestCallDeduplication(t *testing.T) {
	s := New("local")
	sess := s.Apply(1, NewCommand(&CreateSession{TTL: 12e9})).Session

	w := called(sess, 1, 1, &SetContents{Path: "/ls/local/f", Data: []byte("a"), Create: true})
	first := s.Apply(2, w)
	if first.Err != nil {
		t.Fatal(first.Err)
	}
	retry := s.Apply(3, w)
	if retry.Err != nil || retry.Stat != first.Stat {
		t.Fatalf("retry = %+v, %v; want the first answer %+v", retry.Stat, retry.Err, first.Stat)
	}
	if st, _ := s.Stat("/ls/local/f"); st.ContentGen != first.Stat.ContentGen {
		t.Fatalf("the retry was applied again: content gen %d, want %d", st.ContentGen, first.Stat.ContentGen)
	}

	// A failed call's error is remembered too (CAS that lost).
	cas := called(sess, 2, 1, &SetContents{Path: "/ls/local/f", Data: []byte("b"), CAS: true, ContentGen: 999})
	if r := s.Apply(4, cas); !errors.Is(r.Err, ErrCASMismatch) {
		t.Fatalf("cas = %v, want mismatch", r.Err)
	}
	if r := s.Apply(5, cas); !errors.Is(r.Err, ErrCASMismatch) {
		t.Fatalf("retried cas = %v, want the same mismatch", r.Err)
	}

	// Release by the same call id twice: the second is the first's success,
	// not "not held", and a later acquisition is untouched.
	acq := s.Apply(6, called(sess, 3, 1, &Acquire{Path: "/ls/local/f", Mode: Exclusive}))
	rel := called(sess, 4, 1, &Release{Path: "/ls/local/f", LockGen: acq.Seq.Gen})
	if r := s.Apply(7, rel); r.Err != nil {
		t.Fatal(r.Err)
	}
	again := s.Apply(8, called(sess, 5, 1, &Acquire{Path: "/ls/local/f", Mode: Exclusive}))
	if r := s.Apply(9, rel); r.Err != nil {
		t.Fatalf("retried release = %v, want the remembered success", r.Err)
	}
	if !s.CheckSequencer(again.Seq) {
		t.Fatal("a retried release freed the newer acquisition")
	}

	// Acknowledged ids are forgotten: the same id is then a new call.
	s.Apply(10, called(sess, 6, 6, &SetContents{Path: "/ls/local/g", Data: []byte("x"), Create: true}))
	if n := len(s.sessions[sess].Calls); n != 1 {
		t.Fatalf("%d remembered calls after acking below 6, want 1", n)
	}

	// Remembered calls survive a snapshot.
	var buf bytes.Buffer
	if err := s.Snapshot(&buf); err != nil {
		t.Fatal(err)
	}
	r2 := New("local")
	if err := r2.Restore(&buf); err != nil {
		t.Fatal(err)
	}
	if n := len(r2.sessions[sess].Calls); n != 1 {
		t.Fatalf("restored %d remembered calls, want 1", n)
	}
}

func TestCachedCallsBounded(t *testing.T) {
	s := New("local")
	sess := s.Apply(1, NewCommand(&CreateSession{TTL: 12e9})).Session
	for i := uint64(1); i <= maxCachedCalls+10; i++ {
		s.Apply(i+1, called(sess, i, 0, &SetContents{Path: "/ls/local/f", Data: []byte("a"), Create: true}))
	}
	if n := len(s.sessions[sess].Calls); n != maxCachedCalls {
		t.Fatalf("%d remembered calls, want the bound %d", n, maxCachedCalls)
	}
	if _, ok := s.sessions[sess].Calls[1]; ok {
		t.Fatal("the oldest call was kept past the bound")
	}
}
