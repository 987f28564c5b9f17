package fs

import (
	"errors"
	"fmt"
)

// Sentinel errors of the state machine. Every error Apply returns wraps
// exactly one of them, so callers test with errors.Is; package wire maps each
// to a code on the wire and back to the same sentinel.
var (
	// ErrNoSuchNode: the path names no node (Stat, Get, Delete, Open without create).
	ErrNoSuchNode = errors.New("no such node")
	// ErrExists: Create of a path that exists.
	ErrExists = errors.New("node exists")
	// ErrNotDir: the parent of a new node, or the target of ReadDir, is a file.
	ErrNotDir = errors.New("not a directory")
	// ErrIsDir: contents were set or read on a directory.
	ErrIsDir = errors.New("is a directory")
	// ErrNotEmpty: Delete of a directory with children.
	ErrNotEmpty = errors.New("directory not empty")
	// ErrBadPath: the path is not a clean path under /ls/<cell>/.
	ErrBadPath = errors.New("bad path")
	// ErrTooLarge: contents over MaxContents.
	ErrTooLarge = errors.New("contents too large")
	// ErrStaleHandle: a handle's node was deleted (and maybe recreated).
	ErrStaleHandle = errors.New("stale handle")
	// ErrSessionExpired: the session does not exist (any more).
	ErrSessionExpired = errors.New("session expired")
	// ErrLockHeld: TryAcquire of a lock held in a conflicting mode.
	ErrLockHeld = errors.New("lock held")
	// ErrLockDelay: TryAcquire of a free lock inside its lock-delay.
	ErrLockDelay = errors.New("lock in lock-delay")
	// ErrNotHeld: Release or Sequencer of a lock the session does not hold
	// (at that generation).
	ErrNotHeld = errors.New("lock not held")
	// ErrCASMismatch: SetContentsIf whose generation is not the current one.
	ErrCASMismatch = errors.New("content generation mismatch")
	// ErrBadSequencer: a fenced call whose sequencer is not valid now, or a
	// sequencer string that does not parse.
	ErrBadSequencer = errors.New("invalid sequencer")
	// ErrPermission: an operation the node does not allow (the root).
	ErrPermission = errors.New("permission denied")
	// ErrBadRequest: a malformed command or call.
	ErrBadRequest = errors.New("bad request")
)

// ErrorCode names a sentinel error by a stable string, for remembered call
// results (kept in snapshots) and on the wire.
type ErrorCode struct {
	Code string
	Err  error
}

// ErrorCodes is a table of sentinels and their names.
type ErrorCodes []ErrorCode

// Codes names the state machine's sentinels; package wire extends it with the
// RPC layer's own.
var Codes = ErrorCodes{
	{"no_such_node", ErrNoSuchNode},
	{"exists", ErrExists},
	{"not_dir", ErrNotDir},
	{"is_dir", ErrIsDir},
	{"not_empty", ErrNotEmpty},
	{"bad_path", ErrBadPath},
	{"too_large", ErrTooLarge},
	{"stale_handle", ErrStaleHandle},
	{"session_expired", ErrSessionExpired},
	{"lock_held", ErrLockHeld},
	{"lock_delay", ErrLockDelay},
	{"not_held", ErrNotHeld},
	{"cas_mismatch", ErrCASMismatch},
	{"bad_sequencer", ErrBadSequencer},
	{"permission_denied", ErrPermission},
	{"bad_request", ErrBadRequest},
}

// Code returns the name of the sentinel in t that err wraps, or "".
func (t ErrorCodes) Code(err error) string {
	for _, c := range t {
		if errors.Is(err, c.Err) {
			return c.Code
		}
	}
	return ""
}

// FromCode rebuilds an error from Code's result and its text: it wraps the
// sentinel named by code, or is a plain error if t names none.
func (t ErrorCodes) FromCode(code, msg string) error {
	for _, c := range t {
		if c.Code == code {
			return &codedError{msg: msg, err: c.Err}
		}
	}
	return errors.New(msg)
}

type codedError struct {
	msg string
	err error
}

func (e *codedError) Error() string { return e.msg }
func (e *codedError) Unwrap() error { return e.err }

func errf(sentinel error, format string, args ...any) error {
	return fmt.Errorf("%w: %s", sentinel, fmt.Sprintf(format, args...))
}
