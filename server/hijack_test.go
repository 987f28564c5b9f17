package server_test

// Sessions belong to whoever created them (issue 11, "no session
// hijacking", dev mode included): a call that names another client's
// session without its secret — none, or a wrong one — is refused with
// permission_denied, and the session, its lock and its ephemeral file are
// untouched.

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/chubby-dev/chubby/client"
	"github.com/chubby-dev/chubby/fs"
	"github.com/chubby-dev/chubby/testing/cell"
	"github.com/chubby-dev/chubby/wire"
)

func TestSessionHijackRefused(t *testing.T) {
	c := cell.Start(t)
	victim := c.Dial(t, client.Config{})
	lock := c.Path("lock")
	h := open(t, victim, lock, client.Create())
	if err := h.Acquire(ctxT(t), client.Exclusive); err != nil {
		t.Fatal(err)
	}
	seq, _ := h.Sequencer()
	eph := c.Path("victim-eph")
	open(t, victim, eph, client.Ephemeral())
	id := victim.Session().ID

	attacker := c.DialRaw(t)
	if _, err := attacker.Hello(); err != nil {
		t.Fatal(err)
	}
	attacker.Session = id
	calls := []struct {
		m    wire.Method
		args any
	}{
		{wire.MKeepAlive, wire.KeepAliveArgs{Urgent: true}},
		{wire.MRelease, wire.ReleaseArgs{Path: lock, Gen: seq.Gen}},
		{wire.MDelete, wire.DeleteArgs{Path: eph}},
		{wire.MAcquire, wire.AcquireArgs{Path: lock, Mode: fs.Exclusive}},
		{wire.MSetContents, wire.SetContentsArgs{Path: c.Path("as-victim"), Data: []byte("x"), Create: true}},
		{wire.MGetStat, wire.NodeArgs{Path: lock}},
		{wire.MCloseSession, wire.Empty{}},
	}
	for _, secret := range [][]byte{nil, bytes.Repeat([]byte{7}, 16), []byte("short")} {
		attacker.Secret = secret
		for _, call := range calls {
			if err := attacker.Call(call.m, call.args, nil); !errors.Is(err, fs.ErrPermission) {
				t.Errorf("%s naming session %d with secret %x: %v, want permission_denied", call.m, id, secret, err)
			}
		}
	}

	// Untouched: the session lives, holds its lock, owns its file; nothing
	// was written in its name.
	if st := victim.State(); st != client.SessionSafe {
		t.Fatalf("victim session %v after the attempts", st)
	}
	checker := c.Dial(t, client.Config{})
	if ok, err := checker.CheckSequencer(ctxT(t), seq); err != nil || !ok {
		t.Fatalf("victim's lock after the attempts: %v %v", ok, err)
	}
	if _, err := checker.Open(ctxT(t), eph); err != nil {
		t.Fatalf("victim's ephemeral file after the attempts: %v", err)
	}
	if _, err := checker.Open(ctxT(t), c.Path("as-victim")); !errors.Is(err, client.ErrNoSuchNode) {
		t.Fatalf("a write in the victim's name happened: %v", err)
	}
	// A new master (a restart: the sessions come back from the log) knows
	// the secrets too.
	c.Restart(t)
	again := c.DialRaw(t)
	if _, err := again.Hello(); err != nil {
		t.Fatal(err)
	}
	again.Session = id
	if err := again.Call(wire.MGetStat, wire.NodeArgs{Path: lock}, nil); !errors.Is(err, fs.ErrPermission) {
		t.Fatalf("after a restart, a call naming session %d without its secret: %v, want permission_denied", id, err)
	}
	// The victim's own calls still work; the secret is what made them so.
	if err := h.Release(ctxT(t)); err != nil {
		t.Fatal(err)
	}
}

// TestCreateSessionRetryKeepsSecret: a CreateSession retried with the same
// nonce (its reply lost) returns the same session and the same secret;
// another nonce gets another session and secret.
func TestCreateSessionRetryKeepsSecret(t *testing.T) {
	c := cell.Start(t)
	r := c.DialRaw(t)
	if _, err := r.Hello(); err != nil {
		t.Fatal(err)
	}
	var a, b, other wire.CreateSessionReply
	if err := r.Call(wire.MCreateSession, wire.CreateSessionArgs{TTL: int64(12 * time.Second), Nonce: 99}, &a); err != nil {
		t.Fatal(err)
	}
	if err := r.Call(wire.MCreateSession, wire.CreateSessionArgs{TTL: int64(12 * time.Second), Nonce: 99}, &b); err != nil {
		t.Fatal(err)
	}
	if err := r.Call(wire.MCreateSession, wire.CreateSessionArgs{TTL: int64(12 * time.Second), Nonce: 100}, &other); err != nil {
		t.Fatal(err)
	}
	if len(a.Secret) != 16 || a.Session != b.Session || !bytes.Equal(a.Secret, b.Secret) {
		t.Fatalf("retry: session %d secret %x, then %d %x", a.Session, a.Secret, b.Session, b.Secret)
	}
	if other.Session == a.Session || bytes.Equal(other.Secret, a.Secret) {
		t.Fatalf("two sessions share a number or secret: %d %x, %d %x", a.Session, a.Secret, other.Session, other.Secret)
	}
}
