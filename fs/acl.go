package fs

import (
	"bytes"
	"fmt"
	"sort"
	"strings"
)

// ACLDirName is the directory under the cell's root that holds the ACL
// files: the ACL name N refers to the file /ls/<cell>/acl/N.
const ACLDirName = "acl"

// AdminACL is the ACL name a secure cell starts with on its root (see
// InitACLs): the file /ls/<cell>/acl/admin lists the cell's admins.
const AdminACL = "admin"

// AnyPrincipal, as a line of an ACL file, grants every authenticated
// principal.
const AnyPrincipal = "*"

// ACL is a node's three ACL names (Chubby §2.3). Each names a file in
// /ls/<cell>/acl/ whose lines are the principals it grants. An empty name
// means the node has none of its own for that permission: it takes its
// nearest ancestor's (see doc.go, "ACLs").
type ACL struct {
	Read   string `msgpack:"r,omitempty" json:"read"`
	Write  string `msgpack:"w,omitempty" json:"write"`
	Change string `msgpack:"c,omitempty" json:"change"`
}

// IsZero reports whether none of the three names is set.
func (a ACL) IsZero() bool { return a == ACL{} }

// name returns the name that governs p.
func (a ACL) name(p Perm) string {
	switch p {
	case PermRead:
		return a.Read
	case PermWrite:
		return a.Write
	case PermChangeACL:
		return a.Change
	}
	return ""
}

// over returns a with its empty names taken from base.
func (a ACL) over(base ACL) ACL {
	if a.Read == "" {
		a.Read = base.Read
	}
	if a.Write == "" {
		a.Write = base.Write
	}
	if a.Change == "" {
		a.Change = base.Change
	}
	return a
}

// check verifies that every name set is a valid ACL name.
func (a ACL) check(cell string) error {
	for _, n := range []string{a.Read, a.Write, a.Change} {
		if n != "" && !ValidACLName(cell, n) {
			return errf(ErrBadRequest, "ACL name %q is not a file name (one path component)", n)
		}
	}
	return nil
}

// ValidACLName reports whether name can name an ACL file of cell: one
// path component that CheckPath accepts under /ls/<cell>/acl/.
func ValidACLName(cell, name string) bool {
	return name != "" && !strings.Contains(name, "/") && CheckPath(cell, Root(cell)+"/"+ACLDirName+"/"+name) == nil
}

// Perm is one of the three permissions a node's ACL names grant.
type Perm uint8

// The permissions. Read: contents, stat, listing, events, CheckSequencer.
// Write: contents, CAS, delete, creating a child (checked on the parent),
// acquiring the lock in either mode. ChangeACL: setting the node's names.
const (
	PermRead Perm = iota + 1
	PermWrite
	PermChangeACL
)

var permVerbs = [...]string{PermRead: "read", PermWrite: "write", PermChangeACL: "change the ACL of"}
var permNames = [...]string{PermRead: "read", PermWrite: "write", PermChangeACL: "change"}

// ACLFile is a parsed ACL file: the set of principals it grants.
type ACLFile struct {
	any   bool
	names map[string]struct{}
}

// ParseACLFile reads an ACL file's contents: one principal a line,
// surrounding spaces, tabs and a carriage return trimmed; empty lines and
// lines starting with '#' are skipped; a line "*" grants every
// authenticated principal. It accepts any bytes: a line is a principal's
// name as it is, so a malformed line grants only a principal of exactly
// that name.
func ParseACLFile(data []byte) *ACLFile {
	f := &ACLFile{names: map[string]struct{}{}}
	for len(data) > 0 {
		line := data
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			line, data = data[:i], data[i+1:]
		} else {
			data = nil
		}
		line = bytes.Trim(line, " \t\r")
		switch {
		case len(line) == 0 || line[0] == '#':
		case string(line) == AnyPrincipal:
			f.any = true
		default:
			f.names[string(line)] = struct{}{}
		}
	}
	return f
}

// Allows reports whether the file grants principal (a nil file, a missing
// one, grants nothing).
func (f *ACLFile) Allows(principal string) bool {
	if f == nil || principal == "" {
		return false
	}
	if f.any {
		return true
	}
	_, ok := f.names[principal]
	return ok
}

// Principals lists what the file grants, sorted, "*" first if present.
func (f *ACLFile) Principals() []string {
	if f == nil {
		return nil
	}
	out := make([]string, 0, len(f.names)+1)
	for n := range f.names {
		out = append(out, n)
	}
	sort.Strings(out)
	if f.any {
		out = append([]string{AnyPrincipal}, out...)
	}
	return out
}

// aclDir is the directory of the cell's ACL files.
func (s *State) aclDir() string { return s.root + "/" + ACLDirName }

// aclFileChanged re-reads the parsed ACL file for path if path is one
// (a direct child of the ACL directory): called whenever a node is
// created, its contents set, or deleted, so a check is a map lookup and an
// edit governs the very next command.
func (s *State) aclFileChanged(path string) {
	dir, name := Split(path)
	if dir != s.aclDir() {
		return
	}
	if n, ok := s.nodes[path]; ok && !n.Stat.IsDir {
		s.acls[name] = ParseACLFile(n.Data)
		return
	}
	delete(s.acls, name)
}

// rebuildACLs parses every ACL file again (after a restore).
func (s *State) rebuildACLs() {
	s.acls = map[string]*ACLFile{}
	dir, ok := s.nodes[s.aclDir()]
	if !ok || !dir.Stat.IsDir {
		return
	}
	for name := range dir.children {
		s.aclFileChanged(s.aclDir() + "/" + name)
	}
}

// effectiveACL is the names that govern path: its own, each empty one
// taken from the nearest ancestor that has it. path need not exist (a node
// about to be created is governed by its parent's).
func (s *State) effectiveACL(path string) ACL {
	var a ACL
	for {
		if n, ok := s.nodes[path]; ok {
			a = a.over(n.ACL)
			if a.Read != "" && a.Write != "" && a.Change != "" {
				return a
			}
		}
		if path == s.root || !strings.HasPrefix(path, s.root+"/") {
			return a
		}
		path, _ = Split(path)
	}
}

// ACL returns the names that govern path's node: its own, with any it
// lacks (a node created before ACLs) from its nearest ancestor.
func (s *State) ACL(path string) (ACL, error) {
	if _, err := s.lookup(path, 0); err != nil {
		return ACL{}, err
	}
	return s.effectiveACL(path), nil
}

// ACLFile returns the parsed ACL file name, nil if there is none.
func (s *State) ACLFile(name string) *ACLFile { return s.acls[name] }

// Access refuses principal p on path unless the ACL names that govern
// path grant it: the error wraps ErrPermission and names the principal,
// the permission, the path and the ACL. Admins are not checked here: the
// caller skips the check for them. A name whose file is missing grants
// nothing. Cost: a map lookup per ancestor walked (one for a node with
// its own names), one for the file, one in it.
func (s *State) Access(path string, p Perm, principal string) error {
	name := s.effectiveACL(path).name(p)
	if s.acls[name].Allows(principal) {
		return nil
	}
	why := fmt.Sprintf("%s ACL %q", permNames[p], name)
	if name == "" {
		why = fmt.Sprintf("no %s ACL", permNames[p])
	} else if s.acls[name] == nil {
		why += fmt.Sprintf(", and %s/%s does not exist", s.aclDir(), name)
	}
	return errf(ErrPermission, "principal %q may not %s %s (%s)", principal, permVerbs[p], path, why)
}

// authorize checks a command's caller (Command.Caller) for p on path. A
// command without a caller is the master's own (expiry, lock-delay, a new
// epoch) or was logged by a build before ACLs; neither is checked, so old
// logs replay to the same state. An admin is not checked either.
func (s *State) authorize(c *Command, path string, p Perm) error {
	if c.Caller == "" || c.Admin {
		return nil
	}
	return s.Access(path, p, c.Caller)
}

// authorizeCreate checks the command's caller for creating path: a write
// of its parent directory (the root has none; creating it fails later).
func (s *State) authorizeCreate(c *Command, path string) error {
	if path == s.root {
		return nil
	}
	dir, _ := Split(path)
	return s.authorize(c, dir, PermWrite)
}

func (s *State) applySetACL(c *Command, _ *sessionRec, b *SetACL, r *Result) {
	n, err := s.lookup(b.Path, b.Instance)
	if err != nil {
		r.Err = err
		return
	}
	if err := s.authorize(c, b.Path, PermChangeACL); err != nil {
		r.Err = err
		return
	}
	if err := b.ACL.check(s.cell); err != nil {
		r.Err = err
		return
	}
	n.ACL = b.ACL.over(s.effectiveACL(b.Path))
	n.Stat.ACLGen = s.next()
	n.Stat.Mtime = c.Now
	r.Stat = n.Stat
}

func (s *State) applyInitACLs(c *Command, _ *sessionRec, b *InitACLs, r *Result) {
	root := s.nodes[s.root]
	if !root.ACL.IsZero() {
		return // done before: the cell's ACLs are its admins' now
	}
	if len(b.Admins) == 0 {
		r.Err = errf(ErrBadRequest, "a cell's first ACLs need at least one admin")
		return
	}
	root.ACL = ACL{Read: AdminACL, Write: AdminACL, Change: AdminACL}
	root.Stat.ACLGen = s.next()
	r.Stat = root.Stat
	dir := s.aclDir()
	if d, ok := s.nodes[dir]; !ok {
		s.addNode(dir, true, false, 0, nil, c.Now, ACL{}) // the root is a directory: cannot fail
		r.change(dir, Created)
	} else if !d.Stat.IsDir {
		return // a file named acl (a dev cell made secure): only admins until it is replaced
	}
	file := dir + "/" + AdminACL
	data := []byte(strings.Join(b.Admins, "\n") + "\n")
	switch n, ok := s.nodes[file]; {
	case !ok:
		s.addNode(file, false, false, 0, data, c.Now, ACL{}) // its parent is a directory: cannot fail
		r.change(file, Created)
	case !n.Stat.IsDir:
		// A file of that name from before (a dev cell made secure): its
		// contents are the admins' now, not whoever could write it then.
		s.setData(n, data, c.Now)
		s.aclFileChanged(file)
		r.change(file, Modified)
	}
}
