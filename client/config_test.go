package client_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/chubby-dev/chubby/client"
	"github.com/chubby-dev/chubby/session"
)

// The client's defaults and bounds are the cell's (DESIGN.md).
func TestDefaultsAgreeWithSession(t *testing.T) {
	if client.DefaultLockDelay != session.DefaultLockDelay || client.MaxLockDelay != session.MaxLockDelay || client.DefaultGrace != session.DefaultGrace {
		t.Fatalf("client defaults %v/%v/%v, session's %v/%v/%v", client.DefaultLockDelay, client.MaxLockDelay, client.DefaultGrace,
			session.DefaultLockDelay, session.MaxLockDelay, session.DefaultGrace)
	}
	cfg := client.DefaultConfig()
	cfg.Servers = []string{"127.0.0.1:1"}
	if err := cfg.Validate(); err != nil {
		t.Fatalf("DefaultConfig with a server does not validate: %v", err)
	}
	if cfg.Grace != client.DefaultGrace || cfg.LockDelay != client.DefaultLockDelay || cfg.Backoff != client.DefaultBackoff || cfg.Clock == nil || cfg.Logger == nil {
		t.Fatalf("DefaultConfig = %+v", cfg)
	}
}

// TestValidate: each bad setting is refused with a message naming it and
// its value; zero values and NoLockDelay are valid.
func TestValidate(t *testing.T) {
	srv := []string{"127.0.0.1:1"}
	for _, c := range []struct {
		cfg  client.Config
		want string // "" valid
	}{
		{client.Config{Servers: srv}, ""},
		{client.Config{Servers: srv, LockDelay: client.NoLockDelay}, ""},
		{client.Config{Servers: srv, LockDelay: client.MaxLockDelay}, ""},
		{client.Config{}, "Config.Servers is empty"},
		{client.Config{Servers: []string{"a:1", ""}}, "Config.Servers[1] is empty"},
		{client.Config{Servers: srv, SessionTTL: -time.Second}, "Config.SessionTTL -1s"},
		{client.Config{Servers: srv, Grace: -time.Second}, "Config.Grace -1s"},
		{client.Config{Servers: srv, LockDelay: 61 * time.Second}, "Config.LockDelay 1m1s exceeds the maximum 1m0s"},
		{client.Config{Servers: srv, LockDelay: -time.Second}, "Config.LockDelay -1s is negative"},
		{client.Config{Servers: srv, EventBuffer: -1}, "Config.EventBuffer -1"},
		{client.Config{Servers: srv, Cache: client.CacheConfig{MaxBytes: -5}}, "Config.Cache.MaxBytes -5"},
		{client.Config{Servers: srv, Backoff: client.Backoff{Base: 0, Max: time.Second}}, "Config.Backoff.Base 0s"},
		{client.Config{Servers: srv, Backoff: client.Backoff{Base: time.Second, Max: time.Millisecond}}, "Config.Backoff.Max 1ms is below Backoff.Base 1s"},
	} {
		err := c.cfg.Validate()
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%+v: %v, want valid", c.cfg, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%+v: %v, want an error containing %q", c.cfg, err, c.want)
		}
	}
	// Dial refuses what Validate refuses, without trying the servers.
	if _, err := client.Dial(context.Background(), client.Config{Servers: srv, LockDelay: time.Hour}); err == nil || !strings.Contains(err.Error(), "LockDelay 1h0m0s") {
		t.Fatalf("Dial with a bad LockDelay: %v", err)
	}
}

// SessionState names its values as events and chubbysh show them.
func TestSessionStateNames(t *testing.T) {
	if client.SessionSafe.String() != "safe" || client.SessionJeopardy.String() != "jeopardy" || client.SessionExpired.String() != "expired" {
		t.Error("SessionState names")
	}
	if got := client.SessionState(9).String(); got != "SessionState(9)" {
		t.Errorf("SessionState(9) = %q", got)
	}
}
