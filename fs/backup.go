package fs

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// A backup file is one header line and a snapshot of the state (the
// encoding of Snapshot):
//
//	chubby-backup 1 CELL SIZE SHA256\n
//	SIZE bytes of snapshot
//
// The header lets a restore refuse a truncated, padded or corrupted file
// before it decodes anything.
const (
	backupMagic   = "chubby-backup"
	backupVersion = 1
	// BackupCounterGap is added to the cell-wide counter when a cell is
	// restored from a backup. Every instance number, content and lock
	// generation comes from that counter, so a new lock's generation is
	// greater than that of any sequencer the old cell issued — before the
	// backup, and after it for fewer than 2^40 changes.
	BackupCounterGap = 1 << 40
)

// ErrBadBackup is returned for a file that is not a complete, intact backup.
var ErrBadBackup = errors.New("not a valid chubby backup")

// WriteBackup writes the whole state to w as a backup file.
func (s *State) WriteBackup(w io.Writer) error {
	var body bytes.Buffer
	if err := s.Snapshot(&body); err != nil {
		return err
	}
	sum := sha256.Sum256(body.Bytes())
	if _, err := fmt.Fprintf(w, "%s %d %s %d %s\n", backupMagic, backupVersion, s.cell, body.Len(), hex.EncodeToString(sum[:])); err != nil {
		return err
	}
	_, err := w.Write(body.Bytes())
	return err
}

// ReadBackup reads a backup file and returns the state a new cell starts
// from: every permanent node with its contents, stat, ACL names and
// generation (and so the parsed ACL files);
// no sessions, so no ephemeral nodes, lock holders, waiters or lock-delays
// (their holders are gone with the old cell); the counter moved on by
// BackupCounterGap so that no sequencer of the old cell can be valid again;
// session ids continue after the old cell's. A file that is truncated,
// has bytes after its end, fails its checksum or does not decode is
// refused with ErrBadBackup.
func ReadBackup(r io.Reader) (*State, error) {
	br := bufio.NewReader(r)
	line, err := br.ReadString('\n')
	if err != nil {
		return nil, fmt.Errorf("%w: no header line", ErrBadBackup)
	}
	f := strings.Fields(line)
	if len(f) != 5 || f[0] != backupMagic {
		return nil, fmt.Errorf("%w: the header is %q", ErrBadBackup, strings.TrimSpace(line))
	}
	if v, err := strconv.Atoi(f[1]); err != nil || v != backupVersion {
		return nil, fmt.Errorf("%w: version %s, this build reads %d", ErrBadBackup, f[1], backupVersion)
	}
	cell := f[2]
	if !ValidCellName(cell) {
		return nil, fmt.Errorf("%w: cell name %q", ErrBadBackup, cell)
	}
	size, err := strconv.ParseInt(f[3], 10, 64)
	if err != nil || size < 0 {
		return nil, fmt.Errorf("%w: size %q", ErrBadBackup, f[3])
	}
	want, err := hex.DecodeString(f[4])
	if err != nil || len(want) != sha256.Size {
		return nil, fmt.Errorf("%w: checksum %q", ErrBadBackup, f[4])
	}
	var body bytes.Buffer
	n, err := io.Copy(&body, io.LimitReader(br, size))
	if err != nil {
		return nil, fmt.Errorf("read backup: %w", err)
	}
	if n < size {
		return nil, fmt.Errorf("%w: truncated: %d of %d bytes", ErrBadBackup, n, size)
	}
	if extra, _ := br.Read(make([]byte, 1)); extra > 0 {
		return nil, fmt.Errorf("%w: bytes after the end of the snapshot", ErrBadBackup)
	}
	if sum := sha256.Sum256(body.Bytes()); !bytes.Equal(sum[:], want) {
		return nil, fmt.Errorf("%w: checksum mismatch (the file is corrupted)", ErrBadBackup)
	}
	s := New(cell)
	if err := s.Restore(&body); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadBackup, err)
	}
	s.forNewCell()
	return s, nil
}

// forNewCell drops what belonged to the old cell's sessions and moves the
// counter on (see ReadBackup).
func (s *State) forNewCell() {
	for p, n := range s.nodes {
		if n.Stat.Ephemeral {
			delete(s.nodes, p)
			dir, name := Split(p)
			if parent, ok := s.nodes[dir]; ok {
				delete(parent.children, name)
			}
			continue
		}
		n.Holders, n.Waiters, n.LockMode, n.DelayUntil = nil, nil, 0, 0
	}
	s.sessions = map[uint64]*sessionRec{}
	s.nonces = map[uint64]uint64{}
	s.removed = nil
	s.counter += BackupCounterGap
	s.applied = 0
	s.rebuildACLs() // an ephemeral ACL file went with its session
}

// SetApplied records the raft index the state stands at (a restore writes
// it as the snapshot a new cell starts from).
func (s *State) SetApplied(index uint64) { s.applied = index }
