package server

// Unit tests of the reply-size rules (issue 17, finding 2): a reply that
// cannot fit a frame becomes an error the caller sees, a listing comes in
// pages, and a KeepAlive's events and invalidations are split over replies
// without losing or reordering any.

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/chubby-dev/chubby/fs"
	"github.com/chubby-dev/chubby/internal/edgeread"
	"github.com/chubby-dev/chubby/session"
	"github.com/chubby-dev/chubby/wire"
)

func TestListPage(t *testing.T) {
	names := []string{"a", "b", "c", "d", "e"}
	for _, c := range []struct {
		after  string
		budget int
		want   []string
		more   bool
	}{
		{"", 1 << 20, names, false},
		{"", 12, []string{"a", "b"}, true}, // 6 bytes a name
		{"b", 12, []string{"c", "d"}, true},
		{"d", 12, []string{"e"}, false},
		{"bb", 12, []string{"c", "d"}, true}, // After need not be a name
		{"e", 12, nil, false},
		{"", 1, []string{"a"}, true}, // one name at least: progress
	} {
		got, more := listPage(names, c.after, c.budget)
		if !slices.Equal(got, c.want) || more != c.more {
			t.Errorf("listPage(after %q, budget %d) = %v, %v; want %v, %v", c.after, c.budget, got, more, c.want, c.more)
		}
	}
}

// TestReplyTooLargeIsAnError: the caller of a call whose reply would not
// fit a frame gets ErrTooLarge, and the connection goes on serving.
func TestReplyTooLargeIsAnError(t *testing.T) {
	server, client := net.Pipe()
	defer client.Close()
	c := &conn{log: hclog.NewNullLogger(), nc: server, er: edgeread.New(server), w: wire.NewFrameWriter(server, 10*time.Second), closed: make(chan struct{})}
	defer c.close()

	got := make(chan *wire.Response, 2)
	go func() {
		br := bufio.NewReader(client)
		for range 2 {
			b, err := wire.ReadFrame(br)
			if err != nil {
				close(got)
				return
			}
			var resp wire.Response
			if err := wire.Unmarshal(b, &resp); err != nil {
				close(got)
				return
			}
			got <- &resp
		}
	}()
	next := func() *wire.Response {
		select {
		case r := <-got:
			return r
		case <-time.After(10 * time.Second): // a bound on a hang, not a wait
			t.Fatal("no answer within 10 s: the reply was dropped")
			return nil
		}
	}
	go c.reply(7, wire.ContentsReply{Data: make([]byte, wire.MaxFrame)}, nil)
	resp := next()
	if resp == nil || resp.ID != 7 {
		t.Fatalf("no answer to call 7: %+v", resp)
	}
	if err := resp.Err(); !errors.Is(err, fs.ErrTooLarge) || !strings.Contains(err.Error(), "reply of") {
		t.Fatalf("call 7 answered %v; want ErrTooLarge naming the reply", err)
	}
	go c.reply(8, wire.StatReply{}, nil)
	if resp := next(); resp == nil || resp.ID != 8 || resp.Err() != nil {
		t.Fatalf("the next call is not answered normally: %+v", resp)
	}
}

// TestKeepAliveRepliesSplit: with more events and invalidations queued than
// one reply holds, each reply stays within wire.KeepAliveBytes (plus one
// item), the next KeepAlive is answered at once, and the events arrive
// complete and in order; InvalSeq never acknowledges an invalidation whose
// paths were not sent.
func TestKeepAliveRepliesSplit(t *testing.T) {
	clk := session.NewManualClock(unitStart)
	lt := newUnitLeases(t, clk, &fakeStall{})
	lt.add(clk.Now(), 1, unitTTL, nil, "")

	long := strings.Repeat("x", 900)
	var want []wire.Event
	for i := range maxQueuedEvents {
		want = append(want, wire.Event{Type: wire.EventContentsModified, Path: fmt.Sprintf("/ls/local/%s/%d", long, i)})
	}
	lt.pushEvents(1, want)
	var invalPaths []string
	for i := range 400 {
		p := fmt.Sprintf("/ls/local/inv/%s/%d", long, i)
		invalPaths = append(invalPaths, p)
		if _, _, ok := lt.invalidate(1, []string{p, p}); !ok { // a path twice: sent once
			t.Fatal("no lease for session 1")
		}
	}

	r := &replies{}
	var gotEvents []wire.Event
	var gotInval []string
	var ack uint64
	for call := uint64(1); len(gotEvents) < len(want) || ack < 400; call++ {
		if call > 50 {
			t.Fatalf("after 50 KeepAlives: %d of %d events, invalidations acknowledged to %d of 400", len(gotEvents), len(want), ack)
		}
		if err := lt.keepAlive(r, call, 1, false, ack, false); err != nil {
			t.Fatal(err)
		}
		all := r.all()
		last := all[len(all)-1]
		if last.id != call {
			t.Fatalf("KeepAlive %d was parked with %d events and %d acknowledgements still due", call, len(want)-len(gotEvents), 400-ack)
		}
		rep := last.body.(wire.KeepAliveReply)
		size := 0
		for _, p := range rep.Invalidations {
			size += len(p)
		}
		for _, e := range rep.Events {
			size += len(e.Path)
		}
		if size > wire.KeepAliveBytes+1000 {
			t.Fatalf("reply %d carries %d bytes of paths (budget %d)", call, size, wire.KeepAliveBytes)
		}
		gotEvents = append(gotEvents, rep.Events...)
		gotInval = append(gotInval, rep.Invalidations...)
		if rep.InvalSeq > uint64(len(gotInval)) {
			t.Fatalf("reply %d acknowledges invalidation %d after only %d paths", call, rep.InvalSeq, len(gotInval))
		}
		ack = rep.InvalSeq
	}
	if !slices.Equal(gotEvents, want) {
		t.Fatalf("events arrived out of order or changed (%d of %d)", len(gotEvents), len(want))
	}
	if !slices.Equal(gotInval, invalPaths) {
		t.Fatalf("invalidations: got %d paths, want %d, each once, in order", len(gotInval), len(invalPaths))
	}
	clk.Advance(time.Second) // nothing queued now: the next KeepAlive is parked
	n := len(r.all())
	if err := lt.keepAlive(r, 999, 1, false, ack, false); err != nil {
		t.Fatal(err)
	}
	if len(r.all()) != n {
		t.Fatal("a KeepAlive with nothing to deliver was answered at once")
	}
}
