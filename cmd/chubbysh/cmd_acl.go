package main

import (
	"context"
	"fmt"

	"github.com/chubby-dev/chubby/client"
)

// The ACL commands: acl get, acl set, and the -read/-write/-change flags
// of mkdir and create.

// aclFlags are the flags that name ACLs.
var aclFlags = []string{"read", "write", "change"}

// aclOf reads -read, -write and -change; those not given stay empty.
func aclOf(a *cmdArgs) client.ACL {
	return client.ACL{Read: a.flags["read"], Write: a.flags["write"], Change: a.flags["change"]}
}

func (sh *shell) cmdACL(a *cmdArgs) error {
	const usage = "acl get PATH | acl set PATH [-read NAME] [-write NAME] [-change NAME]"
	switch {
	case a.pos[0] == "get" && len(a.pos) == 2:
		if acl := aclOf(a); !acl.IsZero() {
			return &usageError{"acl get takes no -read, -write or -change; usage: " + usage}
		}
		return sh.aclGet(a.pos[1])
	case a.pos[0] == "set" && len(a.pos) == 2:
		acl := aclOf(a)
		if acl.IsZero() {
			return &usageError{"acl set needs at least one of -read, -write, -change; usage: " + usage}
		}
		return sh.aclSet(a.pos[1], acl)
	case a.pos[0] != "get" && a.pos[0] != "set":
		return &usageError{fmt.Sprintf("unknown acl command %q; usage: %s", a.pos[0], usage)}
	}
	return &usageError{"usage: " + usage}
}

func (sh *shell) aclGet(path string) error {
	type got struct {
		acl client.ACL
		st  client.Stat
	}
	g, err := atPath(sh, path, func(h *client.Handle, ctx context.Context) (got, error) {
		acl, st, err := h.ACL(ctx)
		return got{acl, st}, err
	})
	if err != nil {
		return err
	}
	sh.out(map[string]any{"path": path, "read": g.acl.Read, "write": g.acl.Write, "change": g.acl.Change, "acl_gen": g.st.ACLGen},
		fmt.Sprintf("read    %s\nwrite   %s\nchange  %s\nacl_gen %d\n", orNone(g.acl.Read), orNone(g.acl.Write), orNone(g.acl.Change), g.st.ACLGen))
	return nil
}

func (sh *shell) aclSet(path string, acl client.ACL) error {
	st, err := atPath(sh, path, func(h *client.Handle, ctx context.Context) (client.Stat, error) {
		return h.SetACL(ctx, acl)
	})
	if err != nil {
		return err
	}
	sh.out(map[string]any{"acl_gen": st.ACLGen}, "")
	return nil
}

// orNone prints an empty ACL name (a dev cell's nodes have none: there
// every caller is an admin).
func orNone(name string) string {
	if name == "" {
		return "(none)"
	}
	return name
}
