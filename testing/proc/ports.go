package proc

import (
	"fmt"
	"net"
	"sync"
)

// handedOut remembers every port freePort returned in this test binary, so
// two servers of parallel tests never get the same one from the kernel.
var handedOut struct {
	mu    sync.Mutex
	ports map[int]bool
}

// freePort returns a loopback TCP port that was free a moment ago: it
// listens on 127.0.0.1:0 and closes. Another process may still take it
// before chubbyd binds; StartServer retries with new ports when a bind fails.
func freePort() (int, error) {
	handedOut.mu.Lock()
	defer handedOut.mu.Unlock()
	if handedOut.ports == nil {
		handedOut.ports = map[int]bool{}
	}
	for range 100 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0, err
		}
		port := ln.Addr().(*net.TCPAddr).Port
		ln.Close()
		if !handedOut.ports[port] {
			handedOut.ports[port] = true
			return port, nil
		}
	}
	return 0, fmt.Errorf("no fresh loopback port after 100 tries")
}

// FreeAddr returns "127.0.0.1:PORT" for a port that is free now. Nothing
// listens there after it returns, so it also serves as a closed port.
func FreeAddr() (string, error) {
	p, err := freePort()
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("127.0.0.1:%d", p), nil
}
