package fs

import (
	"bytes"
	"testing"
)

// TestSessionSecretKept: the secret a CreateSession carries is the
// session's: returned by its apply and by a retry with the same nonce,
// listed by Sessions (a new master's leases), kept through the log's
// encoding and a snapshot.
func TestSessionSecretKept(t *testing.T) {
	secret := []byte("0123456789abcdef")
	cmd := NewCommand(&CreateSession{TTL: 12e9, Nonce: 5, Secret: secret})
	enc, err := cmd.Encode()
	if err != nil {
		t.Fatal(err)
	}
	dec, err := DecodeCommand(enc)
	if err != nil {
		t.Fatal(err)
	}
	s := New("local")
	r := s.Apply(1, dec)
	if r.Err != nil || !bytes.Equal(r.Secret, secret) {
		t.Fatalf("create: session %d secret %q, %v", r.Session, r.Secret, r.Err)
	}
	again := s.Apply(2, NewCommand(&CreateSession{TTL: 12e9, Nonce: 5, Secret: []byte("another secret!!")}))
	if again.Session != r.Session || !bytes.Equal(again.Secret, secret) {
		t.Fatalf("retry with the nonce: session %d secret %q, want %d %q", again.Session, again.Secret, r.Session, secret)
	}
	var buf bytes.Buffer
	if err := s.Snapshot(&buf); err != nil {
		t.Fatal(err)
	}
	restored := New("local")
	if err := restored.Restore(&buf); err != nil {
		t.Fatal(err)
	}
	ss := restored.Sessions()
	if len(ss) != 1 || ss[0].ID != r.Session || !bytes.Equal(ss[0].Secret, secret) {
		t.Fatalf("restored sessions %+v, want %d with its secret", ss, r.Session)
	}
}
