package server_test

// ACLs through the Go client (issue 11, Chubby §2.3): WithACL on a
// creating Open, Handle.ACL and SetACL, ErrPermission across the wire, a
// revocation seen by a session's very next call, events refused to a
// principal that may not read; and a dev cell, where every caller is an
// admin, stores and reports ACL names without enforcing them.

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/chubby-dev/chubby/client"
	"github.com/chubby-dev/chubby/server"
	"github.com/chubby-dev/chubby/testing/cell"
)

func TestACLsClient(t *testing.T) {
	files, clients := cell.DevTLS(t, "admin", "alice", "bob")
	c := cell.Start(t, cell.WithServerConfig(func(_ int, cfg *server.Config) { cfg.TLS = files }))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	admin := c.Dial(t, client.Config{TLS: clients["admin"]})
	alice := c.Dial(t, client.Config{TLS: clients["alice"]})
	bob := c.Dial(t, client.Config{TLS: clients["bob"]})
	denied := func(err error, who, verb, path string) {
		t.Helper()
		want := `principal "` + who + `" may not ` + verb + " " + path
		if !errors.Is(err, client.ErrPermission) || !strings.Contains(err.Error(), want) {
			t.Fatalf("%v, want ErrPermission: %s", err, want)
		}
	}

	// A fresh secure cell is its admins'.
	_, err := alice.Open(ctx, c.Path("team"), client.CreateDir())
	denied(err, "alice", "write", c.Root())
	rootH, err := admin.Open(ctx, c.Root())
	if err != nil {
		t.Fatal(err)
	}
	if acl, _, err := rootH.ACL(ctx); err != nil || acl != (client.ACL{Read: "admin", Write: "admin", Change: "admin"}) {
		t.Fatalf("root ACL %+v, %v", acl, err)
	}

	// admin grants: rw (alice) and ro (alice, bob) govern /team.
	for name, data := range map[string]string{"rw": "alice\n", "ro": "alice\nbob\n"} {
		if _, err := admin.WriteFile(ctx, c.Path("acl", name), []byte(data)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := admin.Open(ctx, c.Path("team"), client.CreateDir(), client.WithACL(client.ACL{Read: "ro", Write: "rw", Change: "rw"})); err != nil {
		t.Fatal(err)
	}
	f, err := alice.Open(ctx, c.Path("team", "f"), client.Create(), client.InitialContents([]byte("v1")))
	if err != nil {
		t.Fatal(err)
	}
	acl, st, err := f.ACL(ctx)
	if err != nil || acl != (client.ACL{Read: "ro", Write: "rw", Change: "rw"}) {
		t.Fatalf("a new file's ACL %+v, %v: want its parent's", acl, err)
	}
	if _, err := alice.Open(ctx, c.Path("team", "g"), client.WithACL(client.ACL{Read: "rw"})); !errors.Is(err, client.ErrBadRequest) {
		t.Fatalf("WithACL on an Open that does not create: %v", err)
	}

	// bob reads; he may not write, lock or change the ACL.
	bf, err := bob.Open(ctx, c.Path("team", "f"), client.NoCache())
	if err != nil {
		t.Fatal(err)
	}
	if data, _, err := bf.GetContentsAndStat(ctx); err != nil || string(data) != "v1" {
		t.Fatalf("bob reads %q, %v", data, err)
	}
	_, err = bf.SetContents(ctx, []byte("bob"))
	denied(err, "bob", "write", c.Path("team", "f"))
	denied(bf.TryAcquire(ctx, client.Shared), "bob", "write", c.Path("team", "f"))
	_, err = bf.SetACL(ctx, client.ACL{Write: "ro"})
	denied(err, "bob", "change the ACL of", c.Path("team", "f"))

	// alice changes the write ACL: acl_gen moves on; bob may write now.
	st2, err := f.SetACL(ctx, client.ACL{Write: "ro"})
	if err != nil || st2.ACLGen <= st.ACLGen || st2.ContentGen != st.ContentGen {
		t.Fatalf("SetACL: %+v → %+v, %v", st, st2, err)
	}
	if _, err := bf.SetContents(ctx, []byte("bob")); err != nil {
		t.Fatalf("bob's write once ro may write: %v", err)
	}

	// bob caches the file (and the stat of a file nobody touches).
	bc, err := bob.Open(ctx, c.Path("team", "f"))
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := bc.GetContentsAndStat(ctx); err != nil {
		t.Fatal(err)
	}
	hits := bob.CacheStats().Hits
	if _, _, err := bc.GetContentsAndStat(ctx); err != nil || bob.CacheStats().Hits != hits+1 {
		t.Fatalf("bob's second read: %v, hits %d → %d: want a cache hit", err, hits, bob.CacheStats().Hits)
	}

	// Revoked: bob's session goes on, its next call is refused, and what
	// it cached was invalidated before the edit committed.
	if _, err := admin.WriteFile(ctx, c.Path("acl", "ro"), []byte("alice\n")); err != nil {
		t.Fatal(err)
	}
	_, _, err = bc.GetContentsAndStat(ctx)
	denied(err, "bob", "read", c.Path("team", "f"))
	_, err = bf.SetContents(ctx, []byte("bob again"))
	denied(err, "bob", "write", c.Path("team", "f"))
	_, _, err = bf.GetContentsAndStat(ctx) // NoCache: asks the master
	denied(err, "bob", "read", c.Path("team", "f"))
	// Events are a read.
	_, err = bob.Open(ctx, c.Path("team", "f"), client.WithEvents())
	denied(err, "bob", "read", c.Path("team", "f"))
	// A stale handle after re-creation still fails as stale, not as allowed.
	if err := f.Delete(ctx); err != nil {
		t.Fatal(err)
	}
	if _, _, err := bf.ACL(ctx); err == nil {
		t.Fatal("ACL through a handle on a deleted node succeeded")
	}
}

// A dev cell: anonymous is an admin; ACL names are stored and reported,
// nothing is refused.
func TestACLsDevCell(t *testing.T) {
	c := cell.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl := c.Dial(t, client.Config{})
	rootH, err := cl.Open(ctx, c.Root())
	if err != nil {
		t.Fatal(err)
	}
	if acl, _, err := rootH.ACL(ctx); err != nil || !acl.IsZero() {
		t.Fatalf("a dev cell's root ACL %+v, %v: want none", acl, err)
	}
	h, err := cl.Open(ctx, c.Path("d"), client.CreateDir(), client.WithACL(client.ACL{Read: "nosuch", Write: "nosuch", Change: "nosuch"}))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cl.WriteFile(ctx, c.Path("d", "f"), []byte("x")); err != nil {
		t.Fatalf("anonymous writing under an ACL naming a missing file: %v", err)
	}
	st, err := h.SetACL(ctx, client.ACL{Read: "r"})
	if err != nil {
		t.Fatal(err)
	}
	if acl, st2, err := h.ACL(ctx); err != nil || acl != (client.ACL{Read: "r", Write: "nosuch", Change: "nosuch"}) || st2.ACLGen != st.ACLGen {
		t.Fatalf("after SetACL: %+v %+v, %v", acl, st2, err)
	}
	kids, err := rootH.ReadDir(ctx)
	if err != nil || len(kids) != 1 || kids[0] != "d" {
		t.Fatalf("a dev cell's root lists %v, %v: no acl directory is made", kids, err)
	}
}
