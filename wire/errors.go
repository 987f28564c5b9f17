package wire

import (
	"errors"

	"github.com/chubby-dev/chubby/fs"
)

// Errors of the RPC layer itself (the state machine's own sentinels live in
// fs). Each is returned by any call a server cannot serve as asked.
var (
	// ErrWrongEpoch: a call stamped with another master epoch; the client
	// re-handshakes with the current master (Chubby §2.9).
	ErrWrongEpoch = errors.New("wrong master epoch")
	// ErrNotMaster: the server is not the master; the client looks for it.
	ErrNotMaster = errors.New("not the master")
	// ErrUnavailable: the cell cannot serve now (no quorum, shutting down,
	// an expiry in flight); the call may be retried.
	ErrUnavailable = errors.New("cell unavailable")
)

// rpcCodes names the RPC layer's sentinels on the wire; fs.Code names the
// state machine's.
var rpcCodes = []struct {
	code string
	err  error
}{
	{"wrong_epoch", ErrWrongEpoch},
	{"not_master", ErrNotMaster},
	{"unavailable", ErrUnavailable},
}

// Code returns the wire code of the sentinel err wraps, or "internal".
func Code(err error) string {
	for _, c := range rpcCodes {
		if errors.Is(err, c.err) {
			return c.code
		}
	}
	if c := fs.Code(err); c != "" {
		return c
	}
	return "internal"
}

// FromCode rebuilds an error received on the wire: it wraps the sentinel
// named by code (if any) and carries msg as its text.
func FromCode(code, msg string) error {
	for _, c := range rpcCodes {
		if c.code == code {
			return &rpcError{msg: msg, err: c.err}
		}
	}
	return fs.FromCode(code, msg)
}

type rpcError struct {
	msg string
	err error
}

func (e *rpcError) Error() string { return e.msg }
func (e *rpcError) Unwrap() error { return e.err }
