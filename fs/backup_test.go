package fs

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"
)

// TestBackupRestoresPermanentState (issue 15, backup and restore): a backup
// brings back every permanent node with its contents and stat; sessions,
// ephemeral nodes, holders, waiters and lock-delays of the old cell are
// gone; the counter moves on, so a new lock's generation is greater than any
// the old cell issued, and session ids continue.
func TestBackupRestoresPermanentState(t *testing.T) {
	s := New("local")
	idx := uint64(0)
	apply := func(session uint64, b Body) *Result { return mustApply(t, &s, &idx, session, b) }
	a := apply(0, &CreateSession{TTL: int64(12 * time.Second)}).Session
	b := apply(0, &CreateSession{TTL: int64(12 * time.Second)}).Session
	apply(a, &Create{Path: "/ls/local/app", IsDir: true})
	apply(a, &Create{Path: "/ls/local/app/config", Data: []byte("replicas=3\x00\xff")})
	apply(a, &Create{Path: "/ls/local/app/lock"})
	apply(a, &Create{Path: "/ls/local/app/me", Ephemeral: true})
	seq := apply(a, &Acquire{Path: "/ls/local/app/lock", Mode: Exclusive, LockDelay: int64(15 * time.Second)}).Seq
	apply(b, &Acquire{Path: "/ls/local/app/lock", Mode: Exclusive, Wait: true, WaitID: 1})
	before, _ := s.Stat("/ls/local/app/config")

	var file bytes.Buffer
	if err := s.WriteBackup(&file); err != nil {
		t.Fatal(err)
	}
	r, err := ReadBackup(bytes.NewReader(file.Bytes()))
	if err != nil {
		t.Fatalf("ReadBackup: %v", err)
	}
	data, st, err := r.Get("/ls/local/app/config", 0)
	if err != nil || string(data) != "replicas=3\x00\xff" || st != before {
		t.Fatalf("config after restore: %q %+v %v; want %q %+v", data, st, err, "replicas=3\x00\xff", before)
	}
	if _, err := r.Stat("/ls/local/app/me"); !errors.Is(err, ErrNoSuchNode) {
		t.Fatalf("the ephemeral file survived the restore: %v", err)
	}
	if n := len(r.Sessions()); n != 0 {
		t.Fatalf("%d sessions after restore, want none", n)
	}
	if got := len(r.DelayedLocks()); got != 0 {
		t.Fatalf("lock-delays after restore: %d", got)
	}
	// A new session takes the lock at once (no holder, waiter or
	// lock-delay left) with a generation past every old one.
	s, idx = r, 0
	c := apply(0, &CreateSession{TTL: int64(12 * time.Second)}).Session
	if c <= b {
		t.Fatalf("new session id %d, want > the old cell's %d", c, b)
	}
	got := apply(c, &Acquire{Path: "/ls/local/app/lock", Mode: Exclusive})
	if got.Seq.Gen <= seq.Gen+BackupCounterGap-1 || !got.Seq.Newer(seq) {
		t.Fatalf("lock generation after restore %d, want > %d + the gap", got.Seq.Gen, seq.Gen)
	}
	if r.CheckSequencer(seq) {
		t.Fatalf("the old holder's sequencer %s is valid after the restore", seq)
	}
}

// TestReadBackupRefusesDamage: a truncated, padded, corrupted or foreign
// file is refused with ErrBadBackup and a message saying what is wrong.
func TestReadBackupRefusesDamage(t *testing.T) {
	s := New("local")
	s.Apply(1, cmdFor(0, &Create{Path: "/ls/local/f", Data: bytes.Repeat([]byte("x"), 1000)}))
	var file bytes.Buffer
	if err := s.WriteBackup(&file); err != nil {
		t.Fatal(err)
	}
	good := file.Bytes()
	flip := bytes.Clone(good)
	flip[len(flip)-10] ^= 0x40
	for _, tc := range []struct {
		name string
		data []byte
		says string
	}{
		{"empty", nil, "no header"},
		{"not a backup", []byte("hello world\n"), "header"},
		{"truncated", good[:len(good)-1], "truncated"},
		{"header only", good[:bytes.IndexByte(good, '\n')+1], "truncated"},
		{"padded", append(bytes.Clone(good), '\n'), "after the end"},
		{"corrupted", flip, "checksum"},
		{"future version", bytes.Replace(good, []byte("chubby-backup 1 "), []byte("chubby-backup 9 "), 1), "version"},
	} {
		_, err := ReadBackup(bytes.NewReader(tc.data))
		if !errors.Is(err, ErrBadBackup) || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("%s: ReadBackup = %v; want ErrBadBackup saying %q", tc.name, err, tc.says)
		}
	}
}
