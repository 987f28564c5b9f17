package procnemesis

import (
	"strings"
	"testing"
	"time"

	"github.com/chubby-dev/chubby/testing/netproxy"
)

func TestCheckDurable(t *testing.T) {
	acked := []Durable{{"/a", "1"}, {"/b", "2"}, {"/c", "3"}}
	bad := CheckDurable(acked, map[string]string{"/a": "1", "/b": "x", "/d": "unacked but there"})
	if len(bad) != 2 || !strings.Contains(bad[0], "/b") || !strings.Contains(bad[1], "/c") {
		t.Fatalf("violations %q", bad)
	}
}

// TestNetComposes: overlapping faults on one link combine (the most severe
// cut, the longest delay) and withdrawing one leaves the others.
func TestNetComposes(t *testing.T) {
	nt, err := NewNet(3)
	if err != nil {
		t.Fatal(err)
	}
	defer nt.Close()
	l := nt.Raft[0][1]
	state := func() (netproxy.Mode, time.Duration) { return l.State() }
	want := func(m netproxy.Mode, d time.Duration) {
		t.Helper()
		if gm, gd := state(); gm != m || gd != d {
			t.Fatalf("link %s: %v %v, want %v %v", l.Name(), gm, gd, m, d)
		}
	}
	stall := nt.Contribute(nt.RaftLinksOf(0), netproxy.Stall, 0)
	want(netproxy.Stall, 0)
	delay := nt.Contribute(nt.AllRaft(), netproxy.Pass, 30*time.Millisecond)
	want(netproxy.Stall, 30*time.Millisecond)
	refuse := nt.Contribute([]*netproxy.Link{l}, netproxy.Refuse, 10*time.Millisecond)
	want(netproxy.Refuse, 30*time.Millisecond)
	if m, _ := nt.Raft[2][0].State(); m != netproxy.Stall {
		t.Fatalf("another link of n1: %v", m)
	}
	if m, d := nt.Raft[1][2].State(); m != netproxy.Pass || d != 30*time.Millisecond {
		t.Fatalf("a link not of n1: %v %v", m, d)
	}
	nt.Withdraw(refuse)
	want(netproxy.Stall, 30*time.Millisecond)
	nt.Withdraw(stall)
	want(netproxy.Pass, 30*time.Millisecond)
	nt.Withdraw(delay)
	want(netproxy.Pass, 0)
	nt.Contribute(nt.AllRaft(), netproxy.Blackhole, 0)
	nt.HealAll()
	for _, l := range nt.AllRaft() {
		if m, d := l.State(); m != netproxy.Pass || d != 0 {
			t.Fatalf("after HealAll %s: %v %v", l.Name(), m, d)
		}
	}
}
