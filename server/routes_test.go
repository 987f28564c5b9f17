package server

import (
	"bytes"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

// syncBuffer is a bytes.Buffer safe for the transport's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestRaftRoutesNameSelf: with -raft-route, raft stamps every RPC header
// it sends with this server's own address through the route table
// (EncodePeer). The table answers for this server with its advertised
// address — not a warning per heartbeat, as it did when it knew only the
// other servers — and routes the others as configured.
func TestRaftRoutesNameSelf(t *testing.T) {
	if routes(nil, "n1", "127.0.0.1:1") != nil {
		t.Fatalf("no routes: want no provider (advertised addresses)")
	}
	var logs syncBuffer
	log := hclog.New(&hclog.LoggerOptions{Output: &logs, Level: hclog.Debug})
	trans, err := raft.NewTCPTransportWithConfig("127.0.0.1:0", nil, &raft.NetworkTransportConfig{
		ServerAddressProvider: nil, Logger: log, MaxPool: 1, Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	self := string(trans.LocalAddr())
	trans.Close()
	// A route for self is ignored: headers name where this server listens.
	prov := routes(map[string]string{"n2": "127.0.0.1:2002", "n3": "127.0.0.1:2003", "n1": "127.0.0.1:9"}, "n1", self)
	trans, err = raft.NewTCPTransportWithConfig(self, nil, &raft.NetworkTransportConfig{
		ServerAddressProvider: prov, Logger: log, MaxPool: 1, Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer trans.Close()
	for range 3 { // as for three heartbeats
		if got := string(trans.EncodePeer("n1", raft.ServerAddress(self))); got != self {
			t.Fatalf("EncodePeer(self) = %q, want the advertised address %q", got, self)
		}
	}
	if strings.Contains(logs.String(), "unable to get address") {
		t.Fatalf("raft warned about this server's own address:\n%s", logs.String())
	}
	for id, want := range map[raft.ServerID]string{"n2": "127.0.0.1:2002", "n3": "127.0.0.1:2003"} {
		if got, err := prov.ServerAddr(id); err != nil || string(got) != want {
			t.Errorf("route of %s: %q, %v; want %q", id, got, err, want)
		}
	}
	if _, err := prov.ServerAddr("n4"); err == nil {
		t.Errorf("a server with no route: want an error (raft then dials its advertised address)")
	}
}
