package main

import (
	"path"
	"strings"
)

// The interactive shell has a current directory. A PATH typed there is
// resolved before it is sent: relative to the current directory unless it
// starts with "/", then cleaned — "." and ".." components, repeated and
// trailing slashes are the shell's business, since the cell accepts only
// clean absolute paths (it rejects ".." outright). Scripts and one-shot
// commands send PATH exactly as given.

// resolvePath makes p absolute against cwd and cleans it. ".." never goes
// above "/".
func resolvePath(cwd, p string) string {
	if !strings.HasPrefix(p, "/") {
		p = cwd + "/" + p
	}
	return path.Clean(p)
}

// within reports whether p is root or below it.
func within(root, p string) bool {
	return p == root || strings.HasPrefix(p, root+"/")
}

// cellRoot is the namespace root of a cell: /ls/CELL.
func cellRoot(cell string) string { return "/ls/" + cell }
