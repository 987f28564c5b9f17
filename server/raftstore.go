package server

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	wal "github.com/hashicorp/raft-wal"
	walfs "github.com/hashicorp/raft-wal/fs"
	"github.com/hashicorp/raft-wal/metadb"
	"github.com/hashicorp/raft-wal/segment"
	waltypes "github.com/hashicorp/raft-wal/types"
)

// The raft log stores a data directory may hold (Config.RaftLog, chubbyd
// -raft-log).
const (
	// RaftLogBolt keeps the raft log and stable store in one bbolt file,
	// DATA/raft.db (raft-boltdb): every appended batch is a bbolt
	// transaction, fsynced at commit.
	RaftLogBolt = "bolt"
	// RaftLogWAL keeps them in DATA/wal/ (hashicorp/raft-wal): log entries
	// appended to segment files, fsynced once per appended batch; the
	// stable store and the segment list in a small bbolt file beside them.
	RaftLogWAL = "wal"
)

// Names inside a data directory.
const (
	boltFile         = "raft.db"
	boltMigratedFile = "raft.db.migrated" // raft.db after its entries moved to wal/
	walDir           = "wal"
	walTempDir       = "wal.migrating" // a migration in progress; removed at start
)

// raftStore is a raft log store and stable store in one (both raft-boltdb
// and raft-wal are).
type raftStore interface {
	raft.LogStore
	raft.StableStore
	io.Closer
}

// stableKeys are the raft stable-store keys hashicorp/raft writes
// (raft.go: keyCurrentTerm, keyLastVoteTerm with SetUint64, keyLastVoteCand
// with Set). The two stores encode uint64s differently (bolt big-endian,
// wal little-endian), so a migration copies them by value, not as bytes.
var (
	stableUint64Keys = []string{"CurrentTerm", "LastVoteTerm"}
	stableBytesKeys  = []string{"LastVoteCand"}
)

// openRaftStores opens a data directory's raft stores: the log and stable
// store of kind (RaftLogWAL or RaftLogBolt; "" is wal, the default) and the snapshot
// store (two snapshots kept). The server and RestoreDataDir share it, so
// both agree on the layout.
//
// With wal, a directory that holds only a bolt log is migrated first (see
// migrateBoltToWAL). With bolt, a directory that holds a wal log is refused:
// its entries are newer than any raft.db beside it.
func openRaftStores(dataDir, kind string, noSync bool, log hclog.Logger) (raftStore, *raft.FileSnapshotStore, error) {
	var (
		store raftStore
		err   error
	)
	switch kind {
	case RaftLogBolt:
		store, err = openBolt(dataDir, noSync)
	case "", RaftLogWAL:
		store, err = openWALMigrating(dataDir, noSync, log)
	default:
		err = fmt.Errorf("raft-log %q: want %q or %q", kind, RaftLogBolt, RaftLogWAL)
	}
	if err != nil {
		return nil, nil, err
	}
	snaps, err := raft.NewFileSnapshotStoreWithLogger(dataDir, 2, log)
	if err != nil {
		store.Close()
		return nil, nil, fmt.Errorf("snapshot store in %s: %w", dataDir, err)
	}
	return store, snaps, nil
}

// openBolt opens DATA/raft.db, refusing a directory that holds a wal log.
func openBolt(dataDir string, noSync bool) (*raftboltdb.BoltStore, error) {
	if exists(filepath.Join(dataDir, walDir)) {
		return nil, fmt.Errorf("raft-log bolt: %s holds a raft-wal log (%s), which is newer than any bolt log there; start with -raft-log wal (going back to bolt is not supported)",
			dataDir, filepath.Join(dataDir, walDir))
	}
	store, err := raftboltdb.New(raftboltdb.Options{Path: filepath.Join(dataDir, boltFile), NoSync: noSync})
	if err != nil {
		return nil, fmt.Errorf("open raft log in %s: %w", dataDir, err)
	}
	return store, nil
}

// openWALMigrating opens DATA/wal, migrating DATA/raft.db into it first
// when there is no wal yet. Every step leaves a directory a restart can go
// on from:
//
//	wal.migrating/ left over  a migration was cut short: removed, done again
//	wal/ and raft.db          the wal is complete (renamed into place only
//	                          after its last fsync): raft.db is set aside
//	raft.db only              migrate
//	neither                   a new server: an empty wal
func openWALMigrating(dataDir string, noSync bool, log hclog.Logger) (*walStore, error) {
	tmp := filepath.Join(dataDir, walTempDir)
	if exists(tmp) {
		log.Warn("removing a raft log migration that did not finish; migrating again", "dir", tmp)
		if err := os.RemoveAll(tmp); err != nil {
			return nil, fmt.Errorf("remove unfinished migration %s: %w", tmp, err)
		}
	}
	dst, bolt := filepath.Join(dataDir, walDir), filepath.Join(dataDir, boltFile)
	if !exists(dst) && exists(bolt) {
		if err := migrateBoltToWAL(dataDir, log); err != nil {
			return nil, fmt.Errorf("migrate the raft log in %s from bolt to wal: %w", dataDir, err)
		}
	}
	if exists(bolt) {
		if err := setBoltAside(dataDir); err != nil {
			return nil, err
		}
	}
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return nil, err
	}
	return openWAL(dst, noSync, log)
}

// walSegmentSize is the size of the raft log's segment files (raft-wal's
// default; tests make it smaller).
var walSegmentSize = wal.DefaultSegmentSize

// openWAL opens (or creates) the raft-wal log in dir. Each appended batch
// is synced (fdatasync of segment files written full of zeros before use:
// walfile.go) unless noSync (tests): then segment files are raft-wal's
// own, preallocated and never synced; the segment list and stable store
// (bbolt, written at segment rotation and elections) still are.
func openWAL(dir string, noSync bool, log hclog.Logger) (*walStore, error) {
	meta := &metadb.BoltMetaDB{}
	var (
		segs  *segmentFS
		filer *segment.Filer
	)
	if noSync {
		filer = segment.NewFiler(dir, noSyncFS{walfs.New()})
	} else {
		var err error
		if segs, err = newSegmentFS(dir); err != nil {
			return nil, fmt.Errorf("open raft log %s: %w", dir, err)
		}
		filer = segment.NewFiler(dir, segs)
	}
	w, err := wal.Open(dir, wal.WithLogger(log.Named("wal")), wal.WithMetaStore(meta), wal.WithSegmentFiler(filer),
		wal.WithSegmentSize(walSegmentSize))
	if err != nil {
		meta.Close()
		if segs != nil {
			segs.close()
		}
		return nil, fmt.Errorf("open raft log %s: %w", dir, err)
	}
	return &walStore{WAL: w, meta: meta, segs: segs}, nil
}

// walStore is a raft-wal log whose Close also closes its metadata bbolt
// file: WAL.Close (v0.4.0, v0.4.1) leaves it open, and its file lock would make the
// next open in the same process (a restart in a test, a migration then the
// open) wait forever.
type walStore struct {
	*wal.WAL
	meta *metadb.BoltMetaDB
	segs *segmentFS // nil with noSync
}

func (s *walStore) Close() error {
	err := s.WAL.Close()
	if s.segs != nil {
		s.segs.close() // waits for a segment file being written
	}
	if merr := s.meta.Close(); err == nil {
		err = merr
	}
	return err
}

// migrateBoltToWAL copies DATA/raft.db's stable keys and every log entry,
// FirstIndex to LastIndex, into a new wal in DATA/wal.migrating, closes it
// (its segments and metadata fsynced), renames it to DATA/wal and fsyncs
// the directory. raft.db is left in place; the caller sets it aside.
func migrateBoltToWAL(dataDir string, log hclog.Logger) error {
	src, err := raftboltdb.New(raftboltdb.Options{Path: filepath.Join(dataDir, boltFile)})
	if err != nil {
		return err
	}
	defer src.Close()
	tmp := filepath.Join(dataDir, walTempDir)
	if err := os.Mkdir(tmp, 0o755); err != nil {
		return err
	}
	dst, err := openWAL(tmp, false, log)
	if err != nil {
		return err
	}
	first, last, n, err := copyRaftStore(dst, src)
	if cerr := dst.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	if err := migrateHook(); err != nil {
		return err
	}
	if err := os.Rename(tmp, filepath.Join(dataDir, walDir)); err != nil {
		return err
	}
	if err := syncDir(dataDir); err != nil {
		return err
	}
	log.Info("migrated the raft log from bolt to wal", "entries", n, "first_index", first, "last_index", last,
		"from", filepath.Join(dataDir, boltFile), "to", filepath.Join(dataDir, walDir))
	return nil
}

// migrateHook runs between the copy and the rename (tests: a crash there).
var migrateHook = func() error { return nil }

// copyRaftStore copies src's raft stable keys and log entries into dst,
// which must be empty, in batches of at most 1 MiB or 4096 entries. It
// returns the index range and the number of entries copied.
func copyRaftStore(dst, src raftStore) (first, last uint64, n int, err error) {
	for _, k := range stableUint64Keys {
		v, err := src.GetUint64([]byte(k))
		if isNotFound(err) {
			continue
		}
		if err != nil {
			return 0, 0, 0, fmt.Errorf("read stable key %s: %w", k, err)
		}
		if err := dst.SetUint64([]byte(k), v); err != nil {
			return 0, 0, 0, fmt.Errorf("write stable key %s: %w", k, err)
		}
	}
	for _, k := range stableBytesKeys {
		v, err := src.Get([]byte(k))
		if isNotFound(err) || (err == nil && len(v) == 0) {
			continue
		}
		if err != nil {
			return 0, 0, 0, fmt.Errorf("read stable key %s: %w", k, err)
		}
		if err := dst.Set([]byte(k), v); err != nil {
			return 0, 0, 0, fmt.Errorf("write stable key %s: %w", k, err)
		}
	}
	if first, err = src.FirstIndex(); err != nil {
		return 0, 0, 0, err
	}
	if last, err = src.LastIndex(); err != nil {
		return 0, 0, 0, err
	}
	if last == 0 {
		return 0, 0, 0, nil // no entries: a fresh or just-restored server
	}
	const maxBatchBytes, maxBatch = 1 << 20, 4096
	var (
		batch []*raft.Log
		bytes int
	)
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		if err := dst.StoreLogs(batch); err != nil {
			return fmt.Errorf("write log entries %d-%d: %w", batch[0].Index, batch[len(batch)-1].Index, err)
		}
		batch, bytes = batch[:0], 0
		return nil
	}
	for i := first; i <= last; i++ {
		l := new(raft.Log)
		if err := src.GetLog(i, l); err != nil {
			return 0, 0, 0, fmt.Errorf("read log entry %d of %d-%d: %w", i, first, last, err)
		}
		batch = append(batch, l)
		bytes += len(l.Data) + len(l.Extensions)
		n++
		if bytes >= maxBatchBytes || len(batch) >= maxBatch {
			if err := flush(); err != nil {
				return 0, 0, 0, err
			}
		}
	}
	if err := flush(); err != nil {
		return 0, 0, 0, err
	}
	return first, last, n, nil
}

// isNotFound reports raft-boltdb's missing-key error (raft checks it the
// same way, by its text).
func isNotFound(err error) bool {
	return err != nil && (errors.Is(err, raftboltdb.ErrKeyNotFound) || err.Error() == "not found")
}

// setBoltAside renames raft.db to raft.db.migrated once a complete wal is
// in place: kept for an operator to inspect, never read again.
func setBoltAside(dataDir string) error {
	from, to := filepath.Join(dataDir, boltFile), filepath.Join(dataDir, boltMigratedFile)
	if err := os.Rename(from, to); err != nil {
		return fmt.Errorf("set the migrated bolt log aside: %w", err)
	}
	return syncDir(dataDir)
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

func syncDir(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Sync()
}

// noSyncFS is raft-wal's file system with Sync a no-op on segment files
// (Config.NoSync: tests that measure something else).
type noSyncFS struct{ *walfs.FS }

func (f noSyncFS) Create(dir, name string, size uint64) (waltypes.WritableFile, error) {
	w, err := f.FS.Create(dir, name, size)
	if err != nil {
		return nil, err
	}
	return noSyncFile{w}, nil
}

func (f noSyncFS) OpenWriter(dir, name string) (waltypes.WritableFile, error) {
	w, err := f.FS.OpenWriter(dir, name)
	if err != nil {
		return nil, err
	}
	return noSyncFile{w}, nil
}

type noSyncFile struct{ waltypes.WritableFile }

func (noSyncFile) Sync() error { return nil }
