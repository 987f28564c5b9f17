package client_test

import (
	"testing"
	"time"

	"github.com/chubby-dev/chubby/client"
	"github.com/chubby-dev/chubby/testing/cell"
	"github.com/chubby-dev/chubby/testing/netproxy"
)

// TestRenewalsRideOutSlowLinks (issue 16): with 100 ms each way between
// client and master (a 200 ms round trip) and a TTL of 1 s, the session
// never enters jeopardy. The client sends its next KeepAlive a renewal
// interval (at most TTL/3) after the last even while that one is parked,
// and the master answers the parked one as soon as the next arrives, so the
// local lease, which runs from each send, is renewed at most two intervals
// and one round trip after it started: 667 + 200 ms < 1 s − drift. Waiting
// for each answer before sending the next left two holds and two round
// trips (up to 800 + 400 ms), so the same link put the session in jeopardy
// on every cycle.
//
// Real time (6 s): the property is about the schedule against a real link.
func TestRenewalsRideOutSlowLinks(t *testing.T) {
	c := cell.Start(t)
	link, err := netproxy.Listen("client→master", c.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { link.Close() })
	link.Delay(100 * time.Millisecond)
	const ttl = time.Second
	cl := c.Dial(t, client.Config{Servers: []string{link.Addr()}, FixedServers: true, SessionTTL: ttl})
	if got := cl.Session().TTL; got != ttl {
		t.Fatalf("granted TTL %v, want %v", got, ttl)
	}
	start := time.Now()
	deadline := time.After(6 * ttl)
	for {
		select {
		case ev := <-cl.Events():
			if ev.Type == client.EventJeopardy || ev.Type == client.EventExpired {
				t.Fatalf("%v after %v on a link with a 200 ms round trip (TTL %v)", ev.Type, ev.Time.Sub(start).Round(time.Millisecond), ttl)
			}
		case <-deadline:
			if st := cl.Session().State; st != client.SessionSafe {
				t.Fatalf("session %v at the end", st)
			}
			return
		}
	}
}
