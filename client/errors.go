package client

import (
	"errors"

	"github.com/chubby-dev/chubby/fs"
	"github.com/chubby-dev/chubby/wire"
)

// Sentinel errors, shared with the server through package fs so errors.Is
// works on errors that crossed the wire.
var (
	// ErrNoSuchNode: Open without create, Get*, Delete of a missing path.
	ErrNoSuchNode = fs.ErrNoSuchNode
	// ErrExists: Open with Exclusive of an existing path.
	ErrExists = fs.ErrExists
	// ErrNotDir, ErrIsDir: the node is of the other kind.
	ErrNotDir = fs.ErrNotDir
	ErrIsDir  = fs.ErrIsDir
	// ErrNotEmpty: Delete of a directory with children.
	ErrNotEmpty = fs.ErrNotEmpty
	// ErrBadPath: not a clean path under /ls/<cell>/.
	ErrBadPath = fs.ErrBadPath
	// ErrTooLarge: contents over 256 KiB, or a reply that cannot fit a
	// frame (1 MiB).
	ErrTooLarge = fs.ErrTooLarge
	// ErrStaleHandle: the handle's node was deleted (and maybe recreated).
	ErrStaleHandle = fs.ErrStaleHandle
	// ErrSessionExpired: the session ended; every handle and lock is invalid.
	ErrSessionExpired = fs.ErrSessionExpired
	// ErrLockHeld: TryAcquire of a lock held by another session.
	ErrLockHeld = fs.ErrLockHeld
	// ErrLockDelay: TryAcquire of a free lock in its lock-delay.
	ErrLockDelay = fs.ErrLockDelay
	// ErrNotHeld: Release or Sequencer of a lock this handle does not hold.
	ErrNotHeld = fs.ErrNotHeld
	// ErrCASMismatch: SetContentsIf with a stale content generation.
	ErrCASMismatch = fs.ErrCASMismatch
	// ErrBadSequencer: a fenced write whose sequencer is no longer valid, or
	// a sequencer string that does not parse.
	ErrBadSequencer = fs.ErrBadSequencer
	// ErrBadRequest: a call the server cannot act on as asked (an option
	// that does not apply, a value out of range).
	ErrBadRequest = fs.ErrBadRequest
	// ErrPermission: the node's ACLs do not grant this session's principal
	// the permission the call needs (read, write or change-ACL; the error
	// names the principal, the permission and the path), an operator call
	// from a principal that is not an admin, another principal's session,
	// or an operation no node allows (deleting the root).
	ErrPermission = fs.ErrPermission
	// ErrUnavailable: no master could be reached in time.
	ErrUnavailable = wire.ErrUnavailable
	// ErrResourceExhausted: the server is at a limit (connections,
	// sessions) and refused the call.
	ErrResourceExhausted = wire.ErrResourceExhausted
	// ErrClosed: the Client or Handle was closed.
	ErrClosed = errors.New("client closed")
)

// Stat is a node's metadata.
type Stat = fs.Stat

// ACL is a node's three ACL names: Read, Write and Change (change-ACL).
// Each names a file in /ls/<cell>/acl/ listing, one a line, the principals
// it grants ("*": every authenticated principal); a missing file grants
// nothing. Read permission covers contents, stat, listing, events and
// CheckSequencer; write covers writes, deletion, creating children and
// acquiring the lock in either mode; change-ACL covers SetACL. A cell's
// admins may do everything.
type ACL = fs.ACL

// Sequencer is a fencing token of a held lock.
type Sequencer = fs.Sequencer

// Mode is a lock mode.
type Mode = fs.Mode

// The lock modes.
const (
	Exclusive = fs.Exclusive
	Shared    = fs.Shared
)

// ParseSequencer reads a sequencer printed by Sequencer.String.
func ParseSequencer(s string) (Sequencer, error) { return fs.ParseSequencer(s) }
