package server_test

import (
	"context"
	"crypto/tls"
	"net"
	"testing"
	"time"

	"github.com/chubby-dev/chubby/client"
	"github.com/chubby-dev/chubby/server"
	"github.com/chubby-dev/chubby/testing/cell"
	"github.com/chubby-dev/chubby/wire"
)

// FuzzTLSGarbage (issue 11): bytes sent to a TLS cell's RPC port in place
// of a handshake, and bytes sent after a good handshake in place of frames,
// never stop the server serving a client that behaves. `go test` runs the
// seeds; `go test ./server -run '^$' -fuzz FuzzTLSGarbage -fuzztime 5m`
// fuzzes.
func FuzzTLSGarbage(f *testing.F) {
	files, clients := cell.DevTLS(f, "fuzzer")
	c := cell.Start(f, cell.WithServerConfig(func(_ int, cfg *server.Config) {
		cfg.TLS = files
		cfg.Admins = []string{"fuzzer"} // the root's ACLs are the admins'
	}))
	tc := clients["fuzzer"]
	good := c.Dial(f, client.Config{TLS: tc})
	if _, err := good.Open(context.Background(), c.Path("probe"), client.Create()); err != nil {
		f.Fatal(err)
	}
	h, err := good.Open(context.Background(), c.Path("probe"), client.NoCache()) // each probe a call to the server
	if err != nil {
		f.Fatal(err)
	}
	hello, _ := wire.AppendFrame(nil, &wire.Request{ID: 1, Method: wire.MHello, Body: []byte{0x80}})
	f.Add([]byte{}, []byte{})
	f.Add([]byte{0x16, 0x03, 0x01, 0x00, 0x05, 1, 2, 3}, hello)                                    // a truncated TLS record; a valid frame after
	f.Add([]byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n"), []byte{0, 0, 0, 4, 0xc1, 0xc1, 0xc1, 0xc1}) // plaintext HTTP; a garbage frame
	f.Add(hello, []byte{0xff, 0xff, 0xff, 0xff})                                                   // a plaintext call; an oversize length
	f.Fuzz(func(t *testing.T, before, after []byte) {
		if nc, err := net.DialTimeout("tcp", c.Addr(), time.Second); err == nil {
			nc.SetDeadline(time.Now().Add(50 * time.Millisecond))
			nc.Write(before)
			nc.Read(make([]byte, 64))
			nc.Close()
		}
		if tconn, err := tls.DialWithDialer(&net.Dialer{Timeout: time.Second}, "tcp", c.Addr(), tlsFor(tc)); err == nil {
			tconn.SetDeadline(time.Now().Add(50 * time.Millisecond))
			tconn.Write(after)
			tconn.Read(make([]byte, 64))
			tconn.Close()
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if _, err := h.GetStat(ctx); err != nil {
			t.Fatalf("the server stopped serving after before=%x after=%x: %v", before, after, err)
		}
	})
}

// tlsFor is tc verifying the server by its role name (the fuzzer dials the
// address, not a name).
func tlsFor(tc *tls.Config) *tls.Config {
	c := tc.Clone()
	c.ServerName = "server.local.chubby"
	return c
}
