package fs

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// Limits on names and contents.
const (
	// MaxContents is the largest file contents the cell stores (256 KiB).
	MaxContents = 256 << 10
	// MaxPath is the longest path accepted, in bytes.
	MaxPath = 1024
	// MaxName is the longest path component accepted, in bytes.
	MaxName = 255
)

// Root returns the namespace root of a cell: /ls/<cell>.
func Root(cell string) string { return "/ls/" + cell }

// ValidCellName reports whether name can be a cell name: a non-empty path
// component of letters, digits, '-', '_' and '.'.
func ValidCellName(name string) bool {
	if name == "" || name == "." || name == ".." || len(name) > 64 {
		return false
	}
	for _, r := range name {
		if !(r == '-' || r == '_' || r == '.' || r < unicode.MaxASCII && (unicode.IsLetter(r) || unicode.IsDigit(r))) {
			return false
		}
	}
	return true
}

// CheckPath verifies that p is a clean absolute path inside the cell's
// namespace: it starts with /ls/<cell>, has no empty, "." or ".." components,
// no trailing slash, no whitespace, control characters or NUL bytes, is valid
// UTF-8 and is within MaxPath / MaxName. The root /ls/<cell> itself is valid.
func CheckPath(cell, p string) error {
	// Every call checks its path: no allocation here on the way to nil
	// (Root(cell)+"/" and strings.Split each allocated).
	rest, ok := strings.CutPrefix(p, "/ls/")
	if ok {
		rest, ok = strings.CutPrefix(rest, cell)
	}
	if ok && rest == "" { // the root itself
		return nil
	}
	if len(p) > MaxPath {
		return errf(ErrBadPath, "%d bytes is longer than the %d-byte limit", len(p), MaxPath)
	}
	if !ok || !strings.HasPrefix(rest, "/") {
		return errf(ErrBadPath, "%q is not under %s/", p, Root(cell))
	}
	if !utf8.ValidString(p) {
		return errf(ErrBadPath, "%q is not valid UTF-8", p)
	}
	for c := range strings.SplitSeq(rest[1:], "/") {
		switch {
		case c == "":
			return errf(ErrBadPath, "%q has an empty component", p)
		case c == "." || c == "..":
			return errf(ErrBadPath, "%q has a %q component", p, c)
		case len(c) > MaxName:
			return errf(ErrBadPath, "a component of %q is longer than %d bytes", p, MaxName)
		}
		for _, r := range c {
			if r == 0 || unicode.IsControl(r) || unicode.IsSpace(r) {
				return errf(ErrBadPath, "%q contains a control or space character", p)
			}
		}
	}
	return nil
}

// CheckNewPath is CheckPath for a path about to be created: its components
// must also be free of Unicode format characters (category Cf: the bidi
// overrides and isolates that make "abc\u202Etxt.exe" print as
// "abcexe.txt", zero-width spaces and joiners that make "ad\u200Bmin" look
// like "admin", soft hyphens, the byte-order mark). The rule applies to new
// names only, at the server's front door and in the client, never in Apply:
// a node created before it stays reachable, and the replicated log replays
// the same on every version.
func CheckNewPath(cell, p string) error {
	if err := CheckPath(cell, p); err != nil {
		return err
	}
	for i, r := range p {
		if unicode.Is(unicode.Cf, r) {
			return errf(ErrBadPath, "%q contains the invisible format character %U at byte %d", p, r, i)
		}
	}
	return nil
}

// Split returns the parent directory and the last component of a valid
// non-root path.
func Split(p string) (dir, name string) {
	i := strings.LastIndexByte(p, '/')
	return p[:i], p[i+1:]
}
