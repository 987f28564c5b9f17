package cell

import (
	"bufio"
	"crypto/tls"
	"encoding/binary"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chubby-dev/chubby/testing/wait"
	"github.com/chubby-dev/chubby/wire"
)

// Proxy is a fault-injecting link between clients and the cell's server: it
// forwards TCP connections frame by frame, counts the calls that pass, can
// drop chosen requests or the replies to them, and can break every
// connection (and refuse new ones) until healed. Dial a client through it
// with c.Dial(t, client.Config{Servers: []string{p.Addr()}, FixedServers: true}).
type Proxy struct {
	ln     net.Listener
	target string
	// in and out, when set (ProxyTLS), make the proxy a TLS end on both
	// sides: it accepts TLS with in and dials the target with out, and
	// handles the frames in between as on a plain link.
	in, out *tls.Config

	mu     sync.Mutex
	down   bool
	silent atomic.Bool // Blackhole until Heal
	// held counts the pauses of the server behind the proxy (Cluster.Pause,
	// StallLeaseClock) holding the link: frames wait, in order, until the
	// last is released (unheld is closed then, or when the proxy closes).
	held   int
	unheld chan struct{}
	drop   func(*wire.Request) bool
	losses []*ReplyDrop                       // armed, not yet matched
	lose   map[net.Conn]map[uint64]*ReplyDrop // by client conn, then request id
	counts [wire.MethodCount + 1]int
	conns  map[net.Conn]struct{}
	// onReply observes the replies passed to clients (OnReply); sent has
	// the requests awaiting one, by client conn and request id.
	onReply func(req *wire.Request, sentAt time.Time, resp *wire.Response)
	sent    map[net.Conn]map[uint64]sentReq
	wg      sync.WaitGroup
	closed  bool
}

// NewProxy starts a proxy to the cell's RPC address; it is closed when the
// test ends.
func (c *Cell) NewProxy(t testing.TB) *Proxy {
	t.Helper()
	return ProxyTo(t, c.Addr())
}

// ProxyTo starts a proxy to the server at target (an RPC address); it is
// closed when the test ends.
func ProxyTo(t testing.TB, target string) *Proxy {
	t.Helper()
	return proxyTo(t, target, nil, nil)
}

// ProxyTLS is ProxyTo for a server with TLS: the proxy accepts TLS with in
// (the server's certificate, client certificates required) and dials the
// target with out (the client's certificate, so the server sees the
// client's principal), and faults the frames in between as ProxyTo's do.
// Every connection is TLS on both hops: the proxy stands where a network
// device that holds the client's key would.
func ProxyTLS(t testing.TB, target string, in, out *tls.Config) *Proxy {
	t.Helper()
	return proxyTo(t, target, in, out)
}

func proxyTo(t testing.TB, target string, in, out *tls.Config) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("cell: proxy listen: %v", err)
	}
	p := &Proxy{ln: ln, target: target, in: in, out: out, conns: map[net.Conn]struct{}{}, lose: map[net.Conn]map[uint64]*ReplyDrop{},
		sent: map[net.Conn]map[uint64]sentReq{}}
	p.wg.Add(1)
	go p.acceptLoop()
	t.Cleanup(p.Close)
	return p
}

// Target is the server address the proxy forwards to.
func (p *Proxy) Target() string { return p.target }

// ReplyLoss says what the proxy does once it has swallowed a reply armed by
// DropReply.
type ReplyLoss int

const (
	// LoseAndReset closes the connection that carried the call right after
	// its reply was swallowed, as a connection reset would: the client sees
	// the call fail with the connection, reconnects (through the proxy, which
	// stays up) and retries.
	LoseAndReset ReplyLoss = iota
	// LoseAndBreak swallows the reply and then breaks the proxy as Break
	// does (every connection closed, new ones refused until Heal): the
	// client has to find another way to the cell (another server, after a
	// failover) to retry.
	LoseAndBreak
	// LoseAndHang swallows the reply and leaves the connection open: the
	// client waits for a reply that never comes until the link fails (the
	// test breaks the proxy or kills the server).
	LoseAndHang
)

// ReplyDrop is one armed DropReply.
type ReplyDrop struct {
	match func(*wire.Request) bool
	loss  ReplyLoss
	done  chan struct{}
	req   *wire.Request
}

// Done is closed once the server's reply has been swallowed: the call was
// delivered and answered (for a mutating call, applied), and the client did
// not hear of it.
func (d *ReplyDrop) Done() <-chan struct{} { return d.done }

// Request is the request whose reply was swallowed (nil before Done).
func (d *ReplyDrop) Request() *wire.Request {
	if !wait.Closed(d.done) {
		return nil
	}
	return d.req
}

// DropReply arms a one-shot fault: the next request for which match returns
// true is forwarded to the server, but the server's reply to it is
// swallowed, and then the proxy does what loss says. This is the lost reply
// that makes a client retry a call the server has already applied.
// Several DropReply may be armed at once; each takes one request.
func (p *Proxy) DropReply(match func(*wire.Request) bool, loss ReplyLoss) *ReplyDrop {
	d := &ReplyDrop{match: match, loss: loss, done: make(chan struct{})}
	p.mu.Lock()
	p.losses = append(p.losses, d)
	p.mu.Unlock()
	return d
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

// Blackhole makes the link silent until Heal: connections stay open (and
// new ones are accepted) but no frame passes either way — what a client
// sees of a server that is paused (SIGSTOP: the kernel keeps its sockets
// up) or behind a partition that drops packets. Frames sent meanwhile are
// lost, not delivered at Heal.
func (p *Proxy) Blackhole() {
	p.silent.Store(true)
}

// Heal lets connections through again (after Break or Blackhole).
func (p *Proxy) Heal() {
	p.mu.Lock()
	p.down = false
	p.mu.Unlock()
	p.silent.Store(false)
}

// hold stops the link (on) or undoes one such stop (off), as the server
// behind it is paused and resumed: while held, frames either way wait —
// as they wait in the kernel's socket buffers of a stopped process — and
// pass in order once released. New connections are accepted meanwhile
// (the kernel of a stopped process accepts them too). Independent of
// Blackhole and Heal, so a test's own Blackhole and a pause compose.
func (p *Proxy) hold(on bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case on:
		if p.held == 0 {
			p.unheld = make(chan struct{})
		}
		p.held++
	case p.held > 0:
		p.held--
		if p.held == 0 {
			close(p.unheld)
		}
	}
}

// waitHeld blocks while the link is held (until released or closed).
func (p *Proxy) waitHeld() {
	p.mu.Lock()
	if p.held == 0 || p.closed {
		p.mu.Unlock()
		return
	}
	ch := p.unheld
	p.mu.Unlock()
	<-ch
}

type sentReq struct {
	req *wire.Request
	at  time.Time
}

// OnReply makes the proxy call f for every reply it passes to a client
// (not for replies it swallows), with the request it answers and when the
// proxy forwarded that request to the server; f runs on the proxy's
// goroutine right after the reply was written to the client, so it must
// not block. It sees requests forwarded after the call. nil stops it.
func (p *Proxy) OnReply(f func(req *wire.Request, sentAt time.Time, resp *wire.Response)) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.onReply = f
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
// (dropped ones are not counted). A request is counted before it is sent
// on, so a call that returned is counted.
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
	if p.held > 0 {
		p.held = 0
		close(p.unheld) // wake the frames waiting: they fail on the closed conns
	}
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
		if p.in != nil {
			// The handshakes run on the first reads (upstream, downstream).
			cc, sc = tls.Server(cc, p.in), tls.Client(sc, p.out)
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

// armLoss assigns the first armed DropReply that matches req to the call
// (before the request is forwarded, so its reply cannot slip by).
func (p *Proxy) armLoss(cc net.Conn, req *wire.Request) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i, d := range p.losses {
		if d.match(req) {
			p.losses = append(p.losses[:i], p.losses[i+1:]...)
			d.req = req
			m := p.lose[cc]
			if m == nil {
				m = map[uint64]*ReplyDrop{}
				p.lose[cc] = m
			}
			m[req.ID] = d
			return
		}
	}
}

// takeLoss returns the DropReply assigned to the reply of call id on cc.
func (p *Proxy) takeLoss(cc net.Conn, id uint64) *ReplyDrop {
	p.mu.Lock()
	defer p.mu.Unlock()
	d := p.lose[cc][id]
	if d != nil {
		delete(p.lose[cc], id)
	}
	return d
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
		p.waitHeld()
		p.mu.Lock()
		drop := p.silent.Load() || p.drop != nil && p.drop(req)
		p.mu.Unlock()
		if drop {
			continue
		}
		p.armLoss(cc, req)
		p.mu.Lock()
		if p.onReply != nil {
			m := p.sent[cc]
			if m == nil {
				m = map[uint64]sentReq{}
				p.sent[cc] = m
			}
			m[req.ID] = sentReq{req, time.Now()}
		}
		p.mu.Unlock()
		// Counted before it is forwarded: once the server answers, the
		// client (and a test reading Count after its call) sees it counted.
		m := req.Method
		if m >= wire.MethodCount {
			m = wire.MethodCount
		}
		p.mu.Lock()
		p.counts[m]++
		p.mu.Unlock()
		out := binary.BigEndian.AppendUint32(make([]byte, 0, 4+len(frame)), uint32(len(frame)))
		out = append(out, frame...)
		if _, err := sc.Write(out); err != nil {
			return
		}
	}
}

// downstream forwards server replies to the client frame by frame,
// swallowing those armed by DropReply.
func (p *Proxy) downstream(cc, sc net.Conn) {
	defer p.wg.Done()
	defer p.forget(cc, sc)
	defer func() {
		p.mu.Lock()
		delete(p.lose, cc)
		delete(p.sent, cc)
		p.mu.Unlock()
	}()
	br := bufio.NewReader(sc)
	for {
		frame, err := wire.ReadFrame(br)
		if err != nil {
			return
		}
		p.waitHeld()
		if p.silent.Load() {
			continue
		}
		resp, err := wire.DecodeResponse(frame)
		if err == nil && resp.ID != 0 {
			if d := p.takeLoss(cc, resp.ID); d != nil {
				switch d.loss {
				case LoseAndBreak:
					p.Break()
					close(d.done)
					return
				case LoseAndReset:
					close(d.done)
					return
				default:
					close(d.done)
					continue
				}
			}
		}
		out := binary.BigEndian.AppendUint32(make([]byte, 0, 4+len(frame)), uint32(len(frame)))
		out = append(out, frame...)
		if _, err := cc.Write(out); err != nil {
			return
		}
		if err == nil && resp.ID != 0 {
			p.observe(cc, resp)
		}
	}
}

// observe passes a forwarded reply to the OnReply observer.
func (p *Proxy) observe(cc net.Conn, resp *wire.Response) {
	p.mu.Lock()
	f := p.onReply
	s, ok := p.sent[cc][resp.ID]
	if ok {
		delete(p.sent[cc], resp.ID)
	}
	p.mu.Unlock()
	if f != nil && ok {
		f(s.req, s.at, resp)
	}
}
