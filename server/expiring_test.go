package server_test

import (
	"errors"
	"testing"
	"time"

	"github.com/chubby-dev/chubby/fs"
	"github.com/chubby-dev/chubby/server"
	"github.com/chubby-dev/chubby/testing/cell"
	"github.com/chubby-dev/chubby/wire"
)

// TestExpiryInFlightIsNotExpired: while the master's expiry of a session is
// in flight it may still be abandoned (leadership not confirmed, the
// proposal failed, the master finds it stalled) and the session lives on.
// Until the expiry commits, calls and KeepAlives of the session are told to
// retry (ErrUnavailable), never that the session expired: a client told
// "expired" gives up a session whose locks the cell still holds for it.
func TestExpiryInFlightIsNotExpired(t *testing.T) {
	c := cell.Start(t, cell.WithManualClock())
	r := c.NewRawSession(t, 12*time.Second)
	lock := c.Path("held")
	rawCall(t, r, wire.MOpen, wire.OpenArgs{Path: lock, Create: true}, nil)
	seq := rawAcquire(t, r, lock, time.Second)

	if !server.SetExpiring(c.Server(), r.Session, true) {
		t.Fatal("the master has no lease for the session")
	}
	for _, call := range []struct {
		name string
		m    wire.Method
		args any
	}{
		{"GetStat", wire.MGetStat, wire.NodeArgs{Path: c.Root()}},
		{"KeepAlive", wire.MKeepAlive, wire.KeepAliveArgs{Urgent: true}},
	} {
		err := r.Call(call.m, call.args, nil)
		if errors.Is(err, fs.ErrSessionExpired) || !errors.Is(err, wire.ErrUnavailable) {
			t.Fatalf("%s while the session's expiry is in flight: %v; want a retryable ErrUnavailable, not expired", call.name, err)
		}
	}

	// The expiry is abandoned: the session, and its lock, live on.
	server.SetExpiring(c.Server(), r.Session, false)
	rawCall(t, r, wire.MGetStat, wire.NodeArgs{Path: c.Root()}, nil)
	var rep wire.CheckSequencerReply
	rawCall(t, r, wire.MCheckSequencer, wire.CheckSequencerArgs{Seq: seq}, &rep)
	if !rep.Valid {
		t.Fatalf("sequencer %s invalid after the expiry was abandoned", seq)
	}
}
