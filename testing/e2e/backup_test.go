package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chubby-dev/chubby/testing/proc"
)

// TestBackupRestore (issue 15, backup and restore): `chubbysh snapshot save`
// writes a backup while a session holds a lock and an ephemeral file; the
// data directory is wiped; `chubbyd restore` prepares a new one from the
// backup and chubbyd starts on it. Every permanent node is back with its
// contents and stat; what was written after the backup, the session, its
// lock and its ephemeral file are not; the old sequencer is invalid and a
// new lock's generation is greater than any before. A truncated or
// corrupted backup is refused with a clear error and writes nothing.
func TestBackupRestore(t *testing.T) {
	t.Parallel()
	s := proc.StartServer(t, proc.Options{})
	d := p("bk")
	wantOK(t, s.Sh(t, "mkdir", d))
	wantOK(t, s.Sh(t, "mkdir", d+"/sub"))
	wantOK(t, s.Sh(t, "write", d+"/config", "replicas=3"))
	wantOK(t, s.ShStdin(t, "\x00binary\xff\n", "write", d+"/sub/bin", "-"))
	wantOK(t, s.Sh(t, "create", d+"/empty"))

	sess := s.StartSh(t, "-json")
	sess.Send(t, "lock "+d+"/lock")
	seq := parseSeq(t, str(t, jsonLine(t, sess.NextLine(t, 20*time.Second)), "sequencer"))
	sess.Send(t, "create "+d+"/eph -ephemeral")
	jsonLine(t, sess.NextLine(t, 20*time.Second))

	paths := []string{d + "/sub", d + "/config", d + "/sub/bin", d + "/empty", d + "/lock"}
	before := snapshot(t, s, paths)

	file := filepath.Join(t.TempDir(), "cell.backup")
	obj := s.Sh(t, "-json", "snapshot", "save", file).JSON(t)
	if !boolean(t, obj, "ok") || num(t, obj, "bytes") == 0 {
		t.Fatalf("snapshot save: %v", obj)
	}
	if fi, err := os.Stat(file); err != nil || uint64(fi.Size()) != num(t, obj, "bytes") {
		t.Fatalf("backup file: %v, %v; want %d bytes", fi, err, num(t, obj, "bytes"))
	}
	wantOK(t, s.Sh(t, "write", d+"/after", "written after the backup"))
	maxGen := num(t, s.Sh(t, "-json", "stat", d+"/after").JSON(t), "content_gen")

	// Disaster: the server and its data are gone.
	s.Kill(t)
	if err := os.RemoveAll(s.DataDir); err != nil {
		t.Fatal(err)
	}

	// Damaged backups are refused and leave the directory empty.
	good, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(t.TempDir(), "bad.backup")
	for _, tc := range []struct {
		data []byte
		says string
	}{
		{good[:len(good)-100], "truncated"},
		{append(append([]byte{}, good[:len(good)-1]...), good[len(good)-1]^1), "checksum"},
		{[]byte("not a backup\n"), "not a valid chubby backup"},
	} {
		if err := os.WriteFile(bad, tc.data, 0o600); err != nil {
			t.Fatal(err)
		}
		r := proc.RunChubbyd(t, 30*time.Second, "restore", "-from", bad, "-data-dir", s.DataDir, "-node-id", s.NodeID, "-raft-addr", s.RaftAddr)
		if r.Code != 1 || !strings.Contains(r.Stderr, tc.says) {
			t.Errorf("restore of a damaged backup: want exit 1 saying %q\n%s", tc.says, r)
		}
		if entries, _ := os.ReadDir(s.DataDir); len(entries) != 0 {
			t.Fatalf("a refused restore wrote into the data directory: %v", entries)
		}
	}

	r := proc.RunChubbyd(t, 30*time.Second, "restore", "-from", file, "-data-dir", s.DataDir, "-node-id", s.NodeID, "-raft-addr", s.RaftAddr)
	wantCode(t, r, 0)
	again := proc.RunChubbyd(t, 30*time.Second, "restore", "-from", file, "-data-dir", s.DataDir, "-node-id", s.NodeID, "-raft-addr", s.RaftAddr)
	if again.Code != 1 || !strings.Contains(again.Stderr, "already holds") {
		t.Errorf("a second restore into the same directory: want exit 1\n%s", again)
	}
	s.Start(t)

	compareSnapshots(t, "restore from backup", before, snapshot(t, s, paths))
	wantFail(t, s.Sh(t, "cat", d+"/after"), 1) // written after the backup
	wantFail(t, s.Sh(t, "stat", d+"/eph"), 1)  // its session is gone
	if got := s.Sh(t, "ls", d).Lines(); strings.Join(got, " ") != "config empty lock sub" {
		t.Errorf("ls %s after the restore = %q, want config empty lock sub", d, got)
	}
	if r := s.Sh(t, "checkseq", seq.text); r.Code != 1 || strings.TrimSpace(r.Stdout) != "invalid" {
		t.Errorf("checkseq of the old holder's sequencer after the restore: want invalid, exit 1\n%s", r)
	}
	// The lock is free at once (no holder, no lock-delay) and its new
	// generation is past every generation the old cell issued.
	seq2 := parseSeq(t, str(t, s.Sh(t, "-json", "trylock", d+"/lock").JSON(t), "sequencer"))
	if seq2.gen <= seq.gen || seq2.gen <= maxGen {
		t.Errorf("lock generation after the restore %d, want > %d (old lock) and > %d (any old generation)", seq2.gen, seq.gen, maxGen)
	}
	wantOK(t, s.Sh(t, "write", d+"/config", "replicas=4")) // and it serves writes
}
