package fs

import (
	"fmt"
	"io"
	"sort"

	"github.com/vmihailenco/msgpack/v5"
)

// snapshotVersion is bumped when the snapshot encoding changes.
const snapshotVersion = 1

type snapshot struct {
	Version     int              `msgpack:"v"`
	Cell        string           `msgpack:"cell"`
	Counter     uint64           `msgpack:"ctr"`
	NextSession uint64           `msgpack:"ns"`
	Epoch       uint64           `msgpack:"ep"`
	Applied     uint64           `msgpack:"ap"`
	Paths       []string         `msgpack:"paths"`
	Nodes       []*node          `msgpack:"nodes"`
	Sessions    []*sessionRec    `msgpack:"sessions"`
	Removed     map[string]int64 `msgpack:"removed,omitempty"`
}

// Snapshot writes the whole state to w, each node with its ACL names.
// Derived indexes (children, a session's locks, waits and ephemerals, the
// parsed ACL files) are rebuilt by Restore.
func (s *State) Snapshot(w io.Writer) error {
	snap := snapshot{Version: snapshotVersion, Cell: s.cell, Counter: s.counter,
		NextSession: s.nextSession, Epoch: s.epoch, Applied: s.applied, Removed: s.removed}
	snap.Paths = make([]string, 0, len(s.nodes))
	for p := range s.nodes {
		snap.Paths = append(snap.Paths, p)
	}
	sort.Strings(snap.Paths) // parents before children
	for _, p := range snap.Paths {
		snap.Nodes = append(snap.Nodes, s.nodes[p])
	}
	for _, si := range s.Sessions() {
		snap.Sessions = append(snap.Sessions, s.sessions[si.ID])
	}
	enc := msgpack.NewEncoder(w)
	return enc.Encode(&snap)
}

// Restore replaces the state with one written by Snapshot.
func (s *State) Restore(r io.Reader) error {
	var snap snapshot
	if err := msgpack.NewDecoder(r).Decode(&snap); err != nil {
		return fmt.Errorf("decode snapshot: %w", err)
	}
	if snap.Version != snapshotVersion {
		return fmt.Errorf("snapshot version %d, this server reads %d", snap.Version, snapshotVersion)
	}
	if snap.Cell != s.cell {
		return fmt.Errorf("snapshot is of cell %q, this server serves %q", snap.Cell, s.cell)
	}
	if len(snap.Paths) != len(snap.Nodes) {
		return fmt.Errorf("snapshot has %d paths and %d nodes", len(snap.Paths), len(snap.Nodes))
	}
	s.counter, s.nextSession, s.epoch, s.applied = snap.Counter, snap.NextSession, snap.Epoch, snap.Applied
	s.removed = snap.Removed
	s.nodes = make(map[string]*node, len(snap.Nodes))
	s.sessions = make(map[uint64]*sessionRec, len(snap.Sessions))
	s.nonces = map[uint64]uint64{}
	for _, rec := range snap.Sessions {
		rec.init()
		s.sessions[rec.ID] = rec
		if rec.Nonce != 0 {
			s.nonces[rec.Nonce] = rec.ID
		}
	}
	for i, p := range snap.Paths {
		n := snap.Nodes[i]
		if n.Stat.IsDir {
			n.children = map[string]struct{}{}
		}
		s.nodes[p] = n
		if p != s.root {
			dir, name := Split(p)
			parent, ok := s.nodes[dir]
			if !ok || !parent.Stat.IsDir {
				return fmt.Errorf("snapshot: %s has no parent directory", p)
			}
			parent.children[name] = struct{}{}
		}
		for id := range n.Holders {
			if rec, ok := s.sessions[id]; ok {
				rec.locks[p] = struct{}{}
			}
		}
		for _, w := range n.Waiters {
			if rec, ok := s.sessions[w.Session]; ok {
				rec.waits[p] = struct{}{}
			}
		}
		if n.Stat.Ephemeral {
			if rec, ok := s.sessions[n.Stat.Owner]; ok {
				rec.ephemerals[p] = struct{}{}
			}
		}
	}
	if _, ok := s.nodes[s.root]; !ok {
		return fmt.Errorf("snapshot has no root %s", s.root)
	}
	s.rebuildACLs()
	return nil
}
