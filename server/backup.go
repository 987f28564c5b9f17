package server

import (
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"

	"github.com/chubby-dev/chubby/fs"
	"github.com/chubby-dev/chubby/session"
	"github.com/chubby-dev/chubby/wire"
)

// backupHold is how long the master keeps a backup it wrote for a client
// that fetches it page by page; the last page frees it at once.
const backupHold = time.Minute

// maxHeldBackups bounds the backups held at once (each is a copy of the
// state): a client asking for more gets resource_exhausted.
const maxHeldBackups = 4

// backups are the backup files the master holds for clients fetching them.
type backups struct {
	clock session.Clock
	mu    sync.Mutex
	m     map[uint64]*heldBackup
}

type heldBackup struct {
	data  []byte
	timer session.Timer
}

func newBackups(clock session.Clock) *backups {
	return &backups{clock: clock, m: map[uint64]*heldBackup{}}
}

// hold keeps data under a new id until it is fetched or backupHold passes.
func (b *backups) hold(data []byte) (uint64, error) {
	var raw [8]byte
	rand.Read(raw[:])
	id := binary.LittleEndian.Uint64(raw[:]) | 1
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.m) >= maxHeldBackups {
		return 0, fmt.Errorf("%w: %d backups are being fetched already", wire.ErrResourceExhausted, len(b.m))
	}
	b.m[id] = &heldBackup{data: data, timer: b.clock.AfterFunc(backupHold, func() { b.drop(id) })}
	return id, nil
}

func (b *backups) drop(id uint64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if h, ok := b.m[id]; ok {
		h.timer.Stop()
		delete(b.m, id)
	}
}

// page returns the page of backup id at off; the last page drops it.
func (b *backups) page(id uint64, off int64) (wire.BackupReply, error) {
	b.mu.Lock()
	h, ok := b.m[id]
	b.mu.Unlock()
	if !ok {
		return wire.BackupReply{}, fmt.Errorf("%w: backup %d is unknown or was dropped after %v; start again", fs.ErrNoSuchNode, id, backupHold)
	}
	total := int64(len(h.data))
	if off < 0 || off > total {
		return wire.BackupReply{}, errBadRequest("backup offset %d outside [0, %d]", off, total)
	}
	end := min(off+wire.BackupPageBytes, total)
	if end == total {
		b.drop(id)
	}
	return wire.BackupReply{ID: id, Total: total, Data: h.data[off:end]}, nil
}

// backup serves MBackup: the first call writes a backup of the state as of
// now (the call is a read: the master has confirmed its leadership, so the
// state holds every acknowledged write) and returns its first page.
//
// There are no identities yet (issue 11): any session may take a backup.
func (s *Server) backup(c *call, a *wire.BackupArgs) (any, error) {
	if err := s.requireAdmin(c.c.principal, "take a backup"); err != nil {
		return nil, err
	}
	if a.ID != 0 {
		return s.backups.page(a.ID, a.Offset)
	}
	var buf bytes.Buffer
	var err error
	s.fsm.read(func(st *fs.State) { err = st.WriteBackup(&buf) })
	if err != nil {
		return nil, err
	}
	id, err := s.backups.hold(buf.Bytes())
	if err != nil {
		return nil, err
	}
	s.log.Info("backup written for a client", "session", c.req.Session, "bytes", buf.Len())
	return s.backups.page(id, 0)
}

// RestoreDataDir prepares dataDir, which must hold no raft state, so that
// a server started on it with the same node id and raft address is a cell
// of one holding st (from fs.ReadBackup): its raft log begins with a
// snapshot of st whose configuration names this server alone. Other
// servers join it as they would join any running cell.
func RestoreDataDir(dataDir, nodeID, raftAddr string, st *fs.State) error {
	if err := os.MkdirAll(dataDir, 0o755); err != nil {
		return err
	}
	store, snaps, err := openRaftStores(dataDir, RaftLogBolt, false, hclog.NewNullLogger())
	if err != nil {
		return err
	}
	defer store.Close()
	existing, err := raft.HasExistingState(store, store, snaps)
	if err != nil {
		return err
	}
	if existing {
		return fmt.Errorf("%s already holds a cell's state; restore into an empty data directory", dataDir)
	}
	const index, term = 1, 1
	st.SetApplied(index)
	var body bytes.Buffer
	if err := st.Snapshot(&body); err != nil {
		return err
	}
	conf := raft.Configuration{Servers: []raft.Server{{Suffrage: raft.Voter, ID: raft.ServerID(nodeID), Address: raft.ServerAddress(raftAddr)}}}
	_, trans := raft.NewInmemTransport(raft.ServerAddress(raftAddr)) // only for the snapshot's legacy peer list
	sink, err := snaps.Create(raft.SnapshotVersionMax, index, term, conf, index, trans)
	if err != nil {
		return err
	}
	if _, err := sink.Write(body.Bytes()); err != nil {
		sink.Cancel()
		return err
	}
	if err := sink.Close(); err != nil {
		return err
	}
	// The term the snapshot was taken in: raft starts above it.
	return store.SetUint64([]byte("CurrentTerm"), term)
}
