package client

import (
	"context"
	"errors"
	"net"
	"testing"

	"github.com/chubby-dev/chubby/wire"
)

// TestCallOnClosedConnectionIsRetryable: a call made on a connection the
// client has just closed fails with errConnLost, as the calls in flight at
// the close do, so that callers retry it on a connection found afresh
// (SessionGroup.Create racing its renewal loop's drop of the connection
// gave up with a plain error and left its session on the master).
func TestCallOnClosedConnectionIsRetryable(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		if c, err := ln.Accept(); err == nil {
			defer c.Close()
			buf := make([]byte, 1024)
			for {
				if _, err := c.Read(buf); err != nil {
					return
				}
			}
		}
	}()
	tr, err := dialTransport(context.Background(), ln.Addr().String(), nil)
	if err != nil {
		t.Fatal(err)
	}
	tr.close()
	var rep wire.HelloReply
	err = tr.view().call(context.Background(), wire.MHello, 0, sessionRef{}, wire.HelloArgs{}, &rep)
	if !errors.Is(err, errConnLost) || !retryable(err) {
		t.Fatalf("a call after the client closed the connection: %v; want errConnLost (retryable)", err)
	}
}
