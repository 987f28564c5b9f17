package server

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
)

// boltDataDir makes a data dir whose bolt log holds entries first..last
// (entries before first compacted away, as after a snapshot) and the three
// raft stable keys.
func boltDataDir(t *testing.T, first, last uint64) string {
	t.Helper()
	dir := t.TempDir()
	b, err := raftboltdb.New(raftboltdb.Options{Path: filepath.Join(dir, boltFile)})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	var logs []*raft.Log
	for i := first; i <= last; i++ {
		logs = append(logs, &raft.Log{
			Index: i, Term: 1 + i/100, Type: raft.LogCommand,
			Data:       []byte(fmt.Sprintf("command %d %s", i, strings.Repeat("x", int(i%300)))),
			Extensions: []byte(fmt.Sprintf("ext%d", i)),
			AppendedAt: time.Unix(1_700_000_000+int64(i), 0).UTC(),
		})
	}
	if len(logs) > 0 {
		if err := b.StoreLogs(logs); err != nil {
			t.Fatal(err)
		}
	}
	must(t, b.SetUint64([]byte("CurrentTerm"), 7))
	must(t, b.SetUint64([]byte("LastVoteTerm"), 6))
	must(t, b.Set([]byte("LastVoteCand"), []byte("node-b")))
	return dir
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// dumpStore reads every stable key raft uses and every log entry.
func dumpStore(t *testing.T, s raftStore) (map[string]string, []raft.Log) {
	t.Helper()
	stable := map[string]string{}
	for _, k := range stableUint64Keys {
		v, err := s.GetUint64([]byte(k))
		must(t, err)
		stable[k] = fmt.Sprint(v)
	}
	for _, k := range stableBytesKeys {
		v, err := s.Get([]byte(k))
		must(t, err)
		stable[k] = string(v)
	}
	first, err := s.FirstIndex()
	must(t, err)
	last, err := s.LastIndex()
	must(t, err)
	var logs []raft.Log
	for i := first; i <= last && last > 0; i++ {
		var l raft.Log
		must(t, s.GetLog(i, &l))
		l.AppendedAt = l.AppendedAt.UTC()
		logs = append(logs, l)
	}
	return stable, logs
}

func dumpBolt(t *testing.T, path string) (map[string]string, []raft.Log) {
	t.Helper()
	b, err := raftboltdb.New(raftboltdb.Options{Path: path})
	must(t, err)
	defer b.Close()
	return dumpStore(t, b)
}

func openWALStore(t *testing.T, dir string) raftStore {
	t.Helper()
	s, _, err := openRaftStores(dir, RaftLogWAL, false, hclog.NewNullLogger())
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestMigrateBoltToWAL: the wal holds exactly the bolt log's stable keys
// and entries (a compacted log that starts past 1, several batches);
// raft.db is kept as raft.db.migrated; a second open does not migrate again.
func TestMigrateBoltToWAL(t *testing.T) {
	dir := boltDataDir(t, 1000, 1000+5000)
	wantStable, wantLogs := dumpBolt(t, filepath.Join(dir, boltFile))

	s := openWALStore(t, dir)
	gotStable, gotLogs := dumpStore(t, s)
	if !reflect.DeepEqual(gotStable, wantStable) {
		t.Errorf("stable keys after migration = %v, want %v", gotStable, wantStable)
	}
	if len(gotLogs) != len(wantLogs) || !reflect.DeepEqual(gotLogs, wantLogs) {
		t.Errorf("log after migration: %d entries, want %d (or contents differ)", len(gotLogs), len(wantLogs))
	}
	// The wal takes appends after the migrated tail.
	must(t, s.StoreLogs([]*raft.Log{{Index: 6001, Term: 61, Type: raft.LogCommand, Data: []byte("new")}}))
	must(t, s.Close())

	if exists(filepath.Join(dir, boltFile)) || !exists(filepath.Join(dir, boltMigratedFile)) || exists(filepath.Join(dir, walTempDir)) {
		t.Fatalf("after migration: raft.db %v, raft.db.migrated %v, wal.migrating %v; want false, true, false",
			exists(filepath.Join(dir, boltFile)), exists(filepath.Join(dir, boltMigratedFile)), exists(filepath.Join(dir, walTempDir)))
	}
	if st, logs := dumpBolt(t, filepath.Join(dir, boltMigratedFile)); !reflect.DeepEqual(st, wantStable) || len(logs) != len(wantLogs) {
		t.Errorf("raft.db.migrated changed: %v, %d entries", st, len(logs))
	}

	s = openWALStore(t, dir)
	defer s.Close()
	last, err := s.LastIndex()
	must(t, err)
	if last != 6001 {
		t.Errorf("reopened wal: last index %d, want 6001", last)
	}
}

// TestMigrateEmptyBolt: a bolt store with stable keys but no entries (a
// server just restored from a backup: a snapshot and CurrentTerm) migrates
// to a wal with the keys and no entries.
func TestMigrateEmptyBolt(t *testing.T) {
	dir := boltDataDir(t, 1, 0)
	s := openWALStore(t, dir)
	defer s.Close()
	stable, logs := dumpStore(t, s)
	if stable["CurrentTerm"] != "7" || stable["LastVoteCand"] != "node-b" || len(logs) != 0 {
		t.Errorf("migrated empty log: %v, %d entries", stable, len(logs))
	}
}

// TestMigrationInterrupted: a crash after the copy but before the rename
// (the hook fails) leaves raft.db usable by bolt and a wal.migrating that
// the next start with wal removes, migrating again from scratch.
func TestMigrationInterrupted(t *testing.T) {
	dir := boltDataDir(t, 1, 3000)
	wantStable, wantLogs := dumpBolt(t, filepath.Join(dir, boltFile))

	crash := errors.New("crash before rename")
	migrateHook = func() error { return crash }
	_, _, err := openRaftStores(dir, RaftLogWAL, false, hclog.NewNullLogger())
	migrateHook = func() error { return nil }
	if !errors.Is(err, crash) {
		t.Fatalf("interrupted migration: err %v, want %v", err, crash)
	}
	if !exists(filepath.Join(dir, walTempDir)) || exists(filepath.Join(dir, walDir)) {
		t.Fatal("after the crash: want wal.migrating left over and no wal")
	}
	// The old store is still whole and usable with bolt.
	b, _, err := openRaftStores(dir, RaftLogBolt, false, hclog.NewNullLogger())
	must(t, err)
	st, logs := dumpStore(t, b)
	must(t, b.Close())
	if !reflect.DeepEqual(st, wantStable) || !reflect.DeepEqual(logs, wantLogs) {
		t.Fatalf("bolt store after an interrupted migration differs")
	}
	// Make the leftover look torn: a stray file in it.
	must(t, os.WriteFile(filepath.Join(dir, walTempDir, "junk"), []byte("torn"), 0o644))

	s := openWALStore(t, dir)
	defer s.Close()
	st, logs = dumpStore(t, s)
	if !reflect.DeepEqual(st, wantStable) || !reflect.DeepEqual(logs, wantLogs) {
		t.Errorf("retried migration: %v, %d entries; want %v, %d", st, len(logs), wantStable, len(wantLogs))
	}
	if exists(filepath.Join(dir, walTempDir)) {
		t.Error("wal.migrating still there after the retried migration")
	}
}

// TestMigrationRenamedButBoltNotSetAside: a crash between renaming the wal
// into place and renaming raft.db: the wal is complete, so the next start
// uses it and sets raft.db aside without copying again.
func TestMigrationRenamedButBoltNotSetAside(t *testing.T) {
	dir := boltDataDir(t, 1, 10)
	s := openWALStore(t, dir)
	must(t, s.StoreLogs([]*raft.Log{{Index: 11, Term: 9, Type: raft.LogCommand}}))
	must(t, s.Close())
	must(t, os.Rename(filepath.Join(dir, boltMigratedFile), filepath.Join(dir, boltFile)))

	s = openWALStore(t, dir)
	defer s.Close()
	if last, _ := s.LastIndex(); last != 11 {
		t.Errorf("last index %d, want 11 (the wal's own entry kept)", last)
	}
	if exists(filepath.Join(dir, boltFile)) || !exists(filepath.Join(dir, boltMigratedFile)) {
		t.Error("raft.db not set aside")
	}
}

// TestBoltRefusedAfterWAL: going back to bolt on a data dir with a wal is
// refused, naming the way out.
func TestBoltRefusedAfterWAL(t *testing.T) {
	dir := boltDataDir(t, 1, 10)
	must(t, openWALStore(t, dir).Close())
	_, _, err := openRaftStores(dir, RaftLogBolt, false, hclog.NewNullLogger())
	if err == nil || !strings.Contains(err.Error(), "-raft-log wal") {
		t.Fatalf("bolt on a wal data dir: err %v, want a refusal naming -raft-log wal", err)
	}
	if _, _, err := openRaftStores(dir, "lsm", false, hclog.NewNullLogger()); err == nil {
		t.Fatal("unknown raft-log accepted")
	}
}

// TestWALNoSync: with noSync the wal still stores and reads back entries.
func TestWALNoSync(t *testing.T) {
	dir := t.TempDir()
	s, _, err := openRaftStores(dir, RaftLogWAL, true, hclog.NewNullLogger())
	must(t, err)
	must(t, s.StoreLogs([]*raft.Log{{Index: 1, Term: 1, Data: []byte("a")}, {Index: 2, Term: 1, Data: []byte("b")}}))
	must(t, s.Close())
	s = openWALStore(t, dir)
	defer s.Close()
	var l raft.Log
	must(t, s.GetLog(2, &l))
	if string(l.Data) != "b" {
		t.Errorf("entry 2 = %q", l.Data)
	}
}

// TestConfigRaftLog: Validate accepts bolt, wal and "" (bolt) and names an
// unknown store.
func TestConfigRaftLog(t *testing.T) {
	for _, kind := range []string{"", RaftLogBolt, RaftLogWAL} {
		cfg := DefaultConfig()
		cfg.RaftLog = kind
		if err := cfg.Validate(); err != nil {
			t.Errorf("raft-log %q: %v", kind, err)
		}
	}
	cfg := DefaultConfig()
	cfg.RaftLog = "lsm"
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), `raft-log "lsm"`) {
		t.Errorf("raft-log lsm: %v, want an error naming it", err)
	}
}

// TestTimedLogStoreMonotonic: the timing wrapper reports the base store's
// raft.MonotonicLogStore answer, so raft clears a wal's log after
// installing a snapshot instead of leaving a gap raft-wal refuses.
func TestTimedLogStoreMonotonic(t *testing.T) {
	w := openWALStore(t, t.TempDir())
	defer w.Close()
	if !isMonotonic(w) || !(timedLogStore{LogStore: w, monotonic: isMonotonic(w)}).IsMonotonic() {
		t.Error("wal store not reported monotonic")
	}
	b, _, err := openRaftStores(t.TempDir(), RaftLogBolt, true, hclog.NewNullLogger())
	must(t, err)
	defer b.Close()
	if isMonotonic(b) {
		t.Error("bolt store reported monotonic")
	}
}

// TestWALTailTruncationSurvivesRestart: a follower whose log suffix is
// cleared (raft's DeleteRange of the tail on a conflicting append), which
// then appends again and restarts, reads its whole log. raft-wal v0.4.0
// marked the truncated tail segment sealed without writing its index
// block, so after a restart every read of it failed with "sealed segment
// has no index block" and the server could not start its raft (found by
// TestNemesisTLS: a killed follower never rejoined); v0.4.1 fixes it
// (hashicorp/raft-wal#31).
func TestWALTailTruncationSurvivesRestart(t *testing.T) {
	dir := t.TempDir()
	entry := func(i, term uint64) *raft.Log {
		return &raft.Log{Index: i, Term: term, Type: raft.LogCommand, Data: []byte(fmt.Sprint("entry ", i, " term ", term))}
	}
	s := openWALStore(t, dir)
	var logs []*raft.Log
	for i := uint64(1); i <= 10; i++ {
		logs = append(logs, entry(i, 1))
	}
	must(t, s.StoreLogs(logs))
	must(t, s.DeleteRange(8, 10)) // "clearing log suffix: from=8 to=10"
	logs = nil
	for i := uint64(8); i <= 12; i++ {
		logs = append(logs, entry(i, 2))
	}
	must(t, s.StoreLogs(logs))
	must(t, s.Close())

	s = openWALStore(t, dir)
	defer s.Close()
	_, got := dumpStore(t, s)
	if len(got) != 12 {
		t.Fatalf("after restart: %d entries, want 12", len(got))
	}
	for _, l := range got {
		want := uint64(1)
		if l.Index >= 8 {
			want = 2
		}
		if l.Term != want || string(l.Data) != fmt.Sprint("entry ", l.Index, " term ", want) {
			t.Errorf("entry %d: term %d %q, want term %d", l.Index, l.Term, l.Data, want)
		}
	}
}
