package proc

import (
	"errors"
	"testing"

	"github.com/chubby-dev/chubby/server/wire"
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
