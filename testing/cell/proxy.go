package cell

import (
	"bufio"
	"encoding/binary"
	"io"
	"net"
	"sync"
	"testing"

	"github.com/chubby-dev/chubby/server/wire"
)

// Proxy is a fault-injecting link between clients and the cell's server: it
// forwards TCP connections frame by frame, counts the calls that pass, can
// drop chosen requests, and can break every connection (and refuse new ones)
// until healed. Dial a client through it with
// c.Dial(t, client.Config{Servers: []string{p.Addr()}, FixedServers: true}).
type Proxy struct {
	ln     net.Listener
	target string

	mu     sync.Mutex
	down   bool
	drop   func(*wire.Request) bool
	counts [wire.MethodCount + 1]int
	conns  map[net.Conn]struct{}
	wg     sync.WaitGroup
	closed bool
}

// NewProxy starts a proxy to the cell's RPC address; it is closed when the
// test ends.
func (c *Cell) NewProxy(t testing.TB) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("cell: proxy listen: %v", err)
	}
	p := &Proxy{ln: ln, target: c.Addr(), conns: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.acceptLoop()
	t.Cleanup(p.Close)
	return p
}

// Addr is the proxy's address, to give to clients as their server.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Break closes every connection through the proxy; until Heal, new
// connections are accepted and closed at once (the client sees the link
// fail, not hang).
func (p *Proxy) Break() {
	p.mu.Lock()
	p.down = true
	conns := p.conns
	p.conns = map[net.Conn]struct{}{}
	p.mu.Unlock()
	for c := range conns {
		c.Close()
	}
}

// Heal lets connections through again.
func (p *Proxy) Heal() {
	p.mu.Lock()
	p.down = false
	p.mu.Unlock()
}

// DropRequests makes the proxy silently discard client requests for which
// drop returns true (nil: forward everything). A dropped call gets no reply:
// for the client it is a request lost in the network.
func (p *Proxy) DropRequests(drop func(*wire.Request) bool) {
	p.mu.Lock()
	p.drop = drop
	p.mu.Unlock()
}

// Count is how many requests of method m have been forwarded to the server
// (dropped ones are not counted).
func (p *Proxy) Count(m wire.Method) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if m >= wire.MethodCount {
		m = wire.MethodCount
	}
	return p.counts[m]
}

// Conns is how many client connections are open through the proxy.
func (p *Proxy) Conns() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.conns) / 2
}

// Close stops the proxy and closes its connections.
func (p *Proxy) Close() {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return
	}
	p.closed = true
	p.mu.Unlock()
	p.ln.Close()
	p.Break()
	p.wg.Wait()
}

func (p *Proxy) acceptLoop() {
	defer p.wg.Done()
	for {
		cc, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		if p.down || p.closed {
			p.mu.Unlock()
			cc.Close()
			continue
		}
		p.mu.Unlock()
		sc, err := net.Dial("tcp", p.target)
		if err != nil {
			cc.Close()
			continue
		}
		p.mu.Lock()
		if p.down || p.closed {
			p.mu.Unlock()
			cc.Close()
			sc.Close()
			continue
		}
		p.conns[cc] = struct{}{}
		p.conns[sc] = struct{}{}
		p.wg.Add(2)
		p.mu.Unlock()
		go p.upstream(cc, sc)
		go p.downstream(cc, sc)
	}
}

func (p *Proxy) forget(cc, sc net.Conn) {
	cc.Close()
	sc.Close()
	p.mu.Lock()
	delete(p.conns, cc)
	delete(p.conns, sc)
	p.mu.Unlock()
}

// upstream forwards client frames to the server, counting and dropping.
func (p *Proxy) upstream(cc, sc net.Conn) {
	defer p.wg.Done()
	defer p.forget(cc, sc)
	br := bufio.NewReader(cc)
	for {
		frame, err := wire.ReadFrame(br)
		if err != nil {
			return
		}
		req, err := wire.DecodeRequest(frame)
		if err != nil {
			return
		}
		p.mu.Lock()
		drop := p.drop != nil && p.drop(req)
		p.mu.Unlock()
		if drop {
			continue
		}
		out := binary.BigEndian.AppendUint32(make([]byte, 0, 4+len(frame)), uint32(len(frame)))
		out = append(out, frame...)
		if _, err := sc.Write(out); err != nil {
			return
		}
		m := req.Method
		if m >= wire.MethodCount {
			m = wire.MethodCount
		}
		p.mu.Lock()
		p.counts[m]++
		p.mu.Unlock()
	}
}

// downstream copies server replies back to the client.
func (p *Proxy) downstream(cc, sc net.Conn) {
	defer p.wg.Done()
	defer p.forget(cc, sc)
	io.Copy(cc, sc)
}
