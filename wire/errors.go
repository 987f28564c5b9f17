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
	// ErrResourceExhausted: the server is at a limit (connections,
	// sessions); the call is refused rather than queued.
	ErrResourceExhausted = errors.New("resource exhausted")
)

// codes names every sentinel on the wire: the state machine's and the RPC
// layer's.
var codes = append(fs.Codes[:len(fs.Codes):len(fs.Codes)],
	fs.ErrorCode{Code: "wrong_epoch", Err: ErrWrongEpoch},
	fs.ErrorCode{Code: "not_master", Err: ErrNotMaster},
	fs.ErrorCode{Code: "unavailable", Err: ErrUnavailable},
	fs.ErrorCode{Code: "resource_exhausted", Err: ErrResourceExhausted},
)

// Code returns the wire code of the sentinel err wraps, or "internal".
func Code(err error) string {
	if c := codes.Code(err); c != "" {
		return c
	}
	return "internal"
}

// FromCode rebuilds an error received on the wire: it wraps the sentinel
// named by code (if any) and carries msg as its text.
func FromCode(code, msg string) error { return codes.FromCode(code, msg) }
