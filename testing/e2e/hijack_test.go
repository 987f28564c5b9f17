package e2e

// Sessions belong to whoever created them, from outside and in dev mode (no
// TLS): another process that names a session's number without its secret
// cannot renew it, release its lock, act in its name or end it.

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/chubby-dev/chubby/client"
	"github.com/chubby-dev/chubby/fs"
	"github.com/chubby-dev/chubby/testing/proc"
	"github.com/chubby-dev/chubby/wire"
)

func TestSessionHijackRefusedDevMode(t *testing.T) {
	t.Parallel()
	s := proc.StartServer(t, proc.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	victim, err := client.Dial(ctx, client.Config{Servers: []string{s.RPCAddr}})
	if err != nil {
		t.Fatal(err)
	}
	defer victim.Close()
	l := p("hijack")
	h, err := victim.Open(ctx, l, client.Create())
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Acquire(ctx, client.Exclusive); err != nil {
		t.Fatal(err)
	}
	seq, _ := h.Sequencer()

	attacker, err := proc.DialRaw(s.RPCAddr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer attacker.Close()
	if _, err := attacker.Hello(5 * time.Second); err != nil {
		t.Fatal(err)
	}
	attacker.Session = victim.Session().ID
	for _, secret := range [][]byte{nil, []byte("0123456789abcdef")} {
		attacker.Secret = secret
		for _, c := range []struct {
			m    wire.Method
			args any
		}{
			{wire.MRelease, wire.ReleaseArgs{Path: l, Gen: seq.Gen}},
			{wire.MKeepAlive, wire.KeepAliveArgs{Urgent: true}},
			{wire.MSetContents, wire.SetContentsArgs{Path: l, Data: []byte("hijacked"), Seq: &seq}},
			{wire.MCloseSession, wire.Empty{}},
		} {
			if err := attacker.Call(c.m, c.args, nil, 5*time.Second); !errors.Is(err, fs.ErrPermission) {
				t.Errorf("%s in the victim's name (secret %x): %v, want permission_denied", c.m, secret, err)
			}
		}
	}
	wantOK(t, s.Sh(t, "checkseq", seq.String()))
	if got := wantOK(t, s.Sh(t, "cat", l)); got != "" {
		t.Errorf("the lock file holds %q: written in the victim's name", got)
	}
	if st := victim.State(); st != client.SessionSafe {
		t.Errorf("victim session %v", st)
	}
	if err := h.Release(ctx); err != nil {
		t.Fatalf("the victim's own Release: %v", err)
	}
}
