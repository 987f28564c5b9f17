// Package tcptest gives tests a connected TCP pair on loopback.
package tcptest

import (
	"net"
	"testing"
)

// Pair returns both ends of a new loopback TCP connection: dialed (the
// client's end) and accepted (the server's). Both are closed when the test
// ends.
func Pair(t testing.TB) (dialed, accepted *net.TCPConn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	acc := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			close(acc)
			return
		}
		acc <- c
	}()
	d, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	a := <-acc
	if a == nil {
		d.Close()
		t.Fatal("tcptest: accept failed")
	}
	t.Cleanup(func() { d.Close(); a.Close() })
	return d.(*net.TCPConn), a.(*net.TCPConn)
}
