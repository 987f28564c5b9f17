package wire

import (
	"errors"
	"fmt"
	"testing"

	"github.com/chubby-dev/chubby/fs"
)

// Every sentinel survives the wire: Code names it, FromCode rebuilds an error
// that errors.Is the same sentinel and carries the message.
func TestCodesRoundTrip(t *testing.T) {
	sentinels := []error{fs.ErrNoSuchNode, fs.ErrExists, fs.ErrNotDir, fs.ErrIsDir, fs.ErrNotEmpty, fs.ErrBadPath, fs.ErrTooLarge,
		fs.ErrStaleHandle, fs.ErrSessionExpired, fs.ErrLockHeld, fs.ErrLockDelay, fs.ErrNotHeld, fs.ErrCASMismatch, fs.ErrBadSequencer,
		fs.ErrPermission, fs.ErrBadRequest, ErrWrongEpoch, ErrNotMaster, ErrUnavailable, ErrResourceExhausted}
	if len(sentinels) != len(codes) {
		t.Errorf("%d sentinels in the test, %d in the code table", len(sentinels), len(codes))
	}
	seen := map[string]bool{}
	for _, sentinel := range sentinels {
		code := Code(sentinel)
		if code == "internal" || seen[code] {
			t.Errorf("%v: code %q is missing or not unique", sentinel, code)
		}
		seen[code] = true
		wrapped := fmt.Errorf("context: %w", fmt.Errorf("%w: detail %d", sentinel, 7))
		if Code(wrapped) != code {
			t.Errorf("%v: wrapped error has code %q, want %q", sentinel, Code(wrapped), code)
		}
		back := FromCode(code, wrapped.Error())
		if !errors.Is(back, sentinel) {
			t.Errorf("FromCode(%q) does not wrap %v", code, sentinel)
		}
		for _, other := range sentinels {
			if other != sentinel && errors.Is(back, other) {
				t.Errorf("FromCode(%q) also matches %v", code, other)
			}
		}
		if back.Error() != wrapped.Error() || Code(back) != code {
			t.Errorf("FromCode(%q): %q code %q", code, back.Error(), Code(back))
		}
	}
	unknown := FromCode("no_such_code", "boom")
	if unknown.Error() != "boom" || Code(unknown) != "internal" {
		t.Errorf("unknown code: %v %q", unknown, Code(unknown))
	}
	if Code(errors.New("plain")) != "internal" {
		t.Error("a plain error has a sentinel code")
	}
}
