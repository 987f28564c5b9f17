package proc

import (
	"errors"
	"strings"
	"testing"

	"github.com/chubby-dev/chubby/wire"
)

func TestAgreedMaster(t *testing.T) {
	a, b, c := &Server{NodeID: "n1"}, &Server{NodeID: "n2"}, &Server{NodeID: "n3"}
	names := func(master string) []wire.Member {
		return []wire.Member{{Name: "n1", Master: master == "n1"}, {Name: "n2", Master: master == "n2"}, {Name: "n3", Master: master == "n3"}}
	}
	for _, tc := range []struct {
		name  string
		views []MasterView
		want  *Server
	}{
		{"agreed", []MasterView{{Server: a, Status: true, Members: names("n1")}, {Server: b, Members: names("n1")}, {Server: c, Members: names("n1")}}, a},
		{"none serves", []MasterView{{Server: a, Members: names("n1")}, {Server: b, Members: names("n1")}}, nil},
		{"two serve", []MasterView{{Server: a, Status: true, Members: names("n1")}, {Server: b, Status: true, Members: names("n1")}}, nil},
		{"a follower names another", []MasterView{{Server: a, Status: true, Members: names("n1")}, {Server: b, Members: names("n3")}}, nil},
		{"a follower names none", []MasterView{{Server: a, Status: true, Members: names("n1")}, {Server: b, Members: names("")}}, nil},
		{"a server does not answer", []MasterView{{Server: a, Status: true, Members: names("n1")}, {Server: b, Err: errors.New("refused")}}, nil},
		{"two flagged in one list", []MasterView{{Server: a, Status: true, Members: append(names("n1"), wire.Member{Name: "n4", Master: true})}}, nil},
	} {
		got, why := agreedMaster(tc.views)
		if got != tc.want {
			t.Errorf("%s: agreedMaster = %v (%s), want %v", tc.name, got, why, tc.want)
		}
		if got == nil && why == "" {
			t.Errorf("%s: no master and no reason", tc.name)
		}
	}
}

// TestServerArgsAndLaunch: CellOptions.ServerArgs adds flags at every start
// (the first and a Launch after a SIGKILL), given the cell's servers with
// their ports; Launch returns a server that listens and, the cell being
// whole, becomes its master again.
func TestServerArgsAndLaunch(t *testing.T) {
	calls := 0
	c := StartCell(t, 1, CellOptions{LogLevel: "info", ServerArgs: func(s *Server, all []*Server) []string {
		calls++
		if len(all) != 1 || all[0] != s || s.RaftAddr == "" {
			t.Errorf("ServerArgs(%v, %v): want the one server with its ports picked", s, all)
		}
		return []string{"-trailing-logs", "77"}
	}})
	s := c.Servers()[0]
	if calls != 1 {
		t.Fatalf("ServerArgs called %d times for one start", calls)
	}
	if args := strings.Join(s.Args(), " "); !strings.HasSuffix(args, "-trailing-logs 77") {
		t.Fatalf("args %q lack the added flags", args)
	}
	calls = 0
	s.Kill(t)
	s.Launch(t)
	if calls != 1 {
		t.Fatalf("ServerArgs called %d times for a Launch", calls)
	}
	if !s.Running(t) {
		t.Fatalf("not running after Launch")
	}
	if m := c.Master(t); m != s {
		t.Fatalf("master %v after Launch", m)
	}
	if !strings.Contains(s.lastStart(), "-trailing-logs 77") {
		t.Fatalf("the relaunched process did not get the flags:\n%s", tail(s.lastStart(), 5))
	}
}
