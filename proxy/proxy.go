// Package proxy is chubbyproxy's core (Chubby §3.1): it takes clients'
// connections, speaking to them the protocol a master speaks, and carries
// their calls to the cell's master over one connection. Every call is
// forwarded as its client made it — session, secret, epoch, call number —
// so the master checks, applies and deduplicates it as if the client had
// made it directly, and the clients' sessions are the master's: a client
// whose proxy dies goes on through another proxy (or the cell) with its
// session, locks and cache. What the proxy saves the master is the
// KeepAlives: it renews all its clients' sessions with one KeepAliveMany
// per hold, where they would each keep a KeepAlive parked.
//
// The proxy answers Hello as the master would, with the master's epoch and
// itself as the master's address, and lists Peers (by default itself) as
// the servers to try, so a client that learns servers from Hello stays
// with the proxies.
package proxy

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/chubby-dev/chubby/client"
	"github.com/chubby-dev/chubby/session"
	"github.com/chubby-dev/chubby/wire"
)

// Config configures a Proxy.
type Config struct {
	// Cell are RPC addresses of the cell's servers.
	Cell []string
	// Listen is the address clients connect to ("127.0.0.1:0": any port).
	Listen string
	// Name is the proxy's name in its Hello answers (default: its address).
	Name string
	// Peers are the addresses of the proxies a client may use, this one
	// among them, given to clients as the servers to try (default: this
	// proxy's address).
	Peers []string
	// Backoff paces finding the master again.
	Backoff client.Backoff
	Logger  hclog.Logger
	// NoCache: forward every read to the master instead of answering
	// clients' uncached reads from the proxy's own cache (cache.go).
	NoCache bool
	// Clock measures the leases the proxy vouches for (RealClock if nil).
	Clock session.Clock
}

// maxInFlight bounds the calls of one client connection being forwarded
// at once; past it the proxy stops reading the connection.
const maxInFlight = 256

// helloTimeout bounds how long a Hello waits for the proxy to find the
// master. Long enough for an election: after a master failover every
// client of the proxy asks it (client.rehello) and should not give up and
// search every proxy while the proxy is still finding the new master. A
// client searching for the master waits 2 s on a proxy's answer and asks
// the other proxies meanwhile.
const helloTimeout = 5 * time.Second

// Proxy is a running chubbyproxy.
type Proxy struct {
	cfg Config
	log hclog.Logger
	ln  net.Listener
	up  *client.Upstream
	rc  *readCache // nil with NoCache

	closing atomic.Bool
	mu      sync.Mutex
	conns   map[net.Conn]struct{}
	wg      sync.WaitGroup
}

// Start finds the cell's master and listens for clients.
func Start(ctx context.Context, cfg Config) (*Proxy, error) {
	if len(cfg.Cell) == 0 {
		return nil, errors.New("proxy: no cell servers")
	}
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	up, err := client.DialUpstream(ctx, client.Config{Servers: cfg.Cell, Backoff: cfg.Backoff, Logger: cfg.Logger})
	if err != nil {
		return nil, fmt.Errorf("proxy: %w", err)
	}
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		up.Close()
		return nil, fmt.Errorf("proxy: %w", err)
	}
	if cfg.Name == "" {
		cfg.Name = ln.Addr().String()
	}
	if len(cfg.Peers) == 0 {
		cfg.Peers = []string{ln.Addr().String()}
	}
	if cfg.Clock == nil {
		cfg.Clock = session.RealClock{}
	}
	p := &Proxy{cfg: cfg, log: cfg.Logger.Named("proxy"), ln: ln, up: up, conns: map[net.Conn]struct{}{}}
	if !cfg.NoCache {
		p.rc = newReadCache(ctx, client.Config{Servers: cfg.Cell, Backoff: cfg.Backoff, Logger: cfg.Logger.Named("cache"), Clock: cfg.Clock}, cfg.Clock)
	}
	p.wg.Add(1)
	go p.acceptLoop()
	return p, nil
}

// Addr is the address clients connect to.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Close stops accepting, closes every client connection and the
// connection to the cell.
func (p *Proxy) Close() error {
	if p.closing.Swap(true) {
		return nil
	}
	p.ln.Close()
	p.mu.Lock()
	for nc := range p.conns {
		nc.Close()
	}
	p.mu.Unlock()
	// Closing the upstream answers the calls in flight (a parked
	// KeepAlive would otherwise hold its connection's goroutine for a
	// hold, or for good if the master is gone).
	if p.rc != nil {
		p.rc.close()
	}
	err := p.up.Close()
	p.wg.Wait()
	return err
}

func (p *Proxy) acceptLoop() {
	defer p.wg.Done()
	for {
		nc, err := p.ln.Accept()
		if err != nil {
			if p.closing.Load() {
				return
			}
			p.log.Warn("accept", "err", err)
			time.Sleep(50 * time.Millisecond)
			continue
		}
		if tc, ok := nc.(*net.TCPConn); ok {
			tc.SetNoDelay(true)
		}
		p.mu.Lock()
		if p.closing.Load() {
			p.mu.Unlock()
			nc.Close()
			return
		}
		p.conns[nc] = struct{}{}
		p.mu.Unlock()
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			p.serve(nc)
			p.mu.Lock()
			delete(p.conns, nc)
			p.mu.Unlock()
		}()
	}
}

// serve reads a client's calls until its connection ends: Hello is the
// proxy's to answer, KeepAlive joins the next KeepAliveMany, every other
// call is forwarded to the master.
func (p *Proxy) serve(nc net.Conn) {
	defer nc.Close()
	ctx, cancel := context.WithCancel(context.Background())
	w := wire.NewFrameWriter(nc, 10*time.Second)
	reply := func(id uint64, body []byte, err error) {
		resp := wire.Response{ID: id, Body: body}
		if err != nil {
			resp = wire.Response{ID: id, Code: wire.Code(err), Error: err.Error()}
		}
		fb := wire.GetFrameBuf()
		frame, ferr := fb.Encode(&resp)
		if ferr == nil {
			ferr = w.Write(frame)
		}
		fb.Free()
		if ferr != nil {
			nc.Close()
		}
	}
	slots := make(chan struct{}, maxInFlight)
	var calls sync.WaitGroup
	defer func() {
		cancel() // the connection is gone: so are its calls
		calls.Wait()
	}()
	br := bufio.NewReaderSize(nc, 16<<10)
	for {
		frame, err := wire.ReadFrame(br)
		if err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) {
				p.log.Debug("client connection ends", "remote", nc.RemoteAddr(), "err", err)
			}
			return
		}
		req, err := wire.DecodeRequest(frame)
		if err != nil {
			reply(0, nil, wire.FromCode("bad_request", "bad request: "+err.Error()))
			return
		}
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
			return
		}
		calls.Add(1)
		done := func() { <-slots; calls.Done() }
		switch req.Method {
		case wire.MHello:
			go func() {
				defer done()
				body, err := p.hello(ctx)
				reply(req.ID, body, err)
			}()
		case wire.MKeepAlive:
			var a wire.KeepAliveArgs
			if err := wire.Unmarshal(req.Body, &a); err != nil {
				done()
				reply(req.ID, nil, wire.FromCode("bad_request", "bad request: KeepAlive arguments: "+err.Error()))
				continue
			}
			// On its own goroutine: while the proxy finds the master
			// again, the call waits there, not the connection's reader.
			sentAt := p.cfg.Clock.Now()
			go p.up.KeepAlive(ctx, req.Epoch, req.Session, req.Secret, a, func(rep wire.KeepAliveReply, err error) {
				defer done()
				p.renewed(req.Session, req.Secret, sentAt, rep, err)
				var body []byte
				if err == nil {
					body, err = wire.Marshal(rep)
				}
				reply(req.ID, body, err)
			})
		case wire.MKeepAliveMany:
			var a wire.KeepAliveManyArgs
			if err := wire.Unmarshal(req.Body, &a); err != nil || len(a.Sessions) == 0 || len(a.Sessions) > wire.MaxKeepAliveMany {
				done()
				reply(req.ID, nil, wire.FromCode("bad_request", fmt.Sprintf("bad request: KeepAliveMany of %d sessions (1 to %d), %v", len(a.Sessions), wire.MaxKeepAliveMany, err)))
				continue
			}
			go p.keepAliveMany(ctx, req, a.Sessions, func(body []byte, err error) {
				defer done()
				reply(req.ID, body, err)
			})
		default:
			if req.Method == wire.MCloseSession && p.rc != nil {
				p.rc.forget(req.Session)
			}
			go func() {
				defer done()
				if (req.Method == wire.MGetContents || req.Method == wire.MGetStat) && p.rc != nil {
					if body, ok := p.rc.answer(ctx, req); ok {
						reply(req.ID, body, nil)
						return
					}
				}
				sentAt := p.cfg.Clock.Now()
				body, err := p.up.Forward(ctx, req)
				if req.Method == wire.MCreateSession && err == nil && p.rc != nil {
					p.rc.created(sentAt, body)
				}
				reply(req.ID, body, err)
			}()
		}
	}
}

// keepAliveMany renews the sessions of a client's KeepAliveMany (a client
// with a Pool, or a proxy in front of this one) in the proxy's own
// KeepAliveMany calls, beside its other clients' sessions, and answers
// once every one of them is answered.
func (p *Proxy) keepAliveMany(ctx context.Context, req *wire.Request, es []wire.KeepAliveEntry, answer func([]byte, error)) {
	var mu sync.Mutex
	rep := wire.KeepAliveManyReply{Sessions: make([]wire.KeepAliveResult, 0, len(es))}
	left := len(es)
	sentAt := p.cfg.Clock.Now()
	for _, e := range es {
		args := wire.KeepAliveArgs{Urgent: e.Urgent, AckInval: e.AckInval}
		p.up.KeepAlive(ctx, req.Epoch, e.Session, e.Secret, args, func(r wire.KeepAliveReply, err error) {
			p.renewed(e.Session, e.Secret, sentAt, r, err)
			res := wire.KeepAliveResult{Session: e.Session, Reply: r}
			if err != nil {
				res = wire.KeepAliveResult{Session: e.Session, Code: wire.Code(err), Error: err.Error()}
			}
			mu.Lock()
			rep.Sessions = append(rep.Sessions, res)
			left--
			last := left == 0
			mu.Unlock()
			if last {
				answer(wire.Marshal(rep))
			}
		})
	}
}

// renewed tells the proxy's cache of a client's renewal.
func (p *Proxy) renewed(id uint64, secret []byte, sentAt time.Time, rep wire.KeepAliveReply, err error) {
	if p.rc != nil {
		p.rc.renewed(id, secret, sentAt, rep, err)
	}
}

// CacheStats counts the uncached reads of clients the proxy answered from
// its own cache (Hits) and those it forwarded to the master.
type CacheStats struct{ Hits, Forwarded uint64 }

// CacheStats returns the counts of the proxy's cache.
func (p *Proxy) CacheStats() CacheStats {
	if p.rc == nil {
		return CacheStats{}
	}
	return CacheStats{Hits: p.rc.hits.Load(), Forwarded: p.rc.forwarded.Load()}
}

// hello answers Hello as the master would, naming this proxy as the
// master and the proxies as the servers.
func (p *Proxy) hello(ctx context.Context) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, helloTimeout)
	defer cancel()
	h, err := p.up.Master(ctx)
	if err != nil {
		return nil, err
	}
	return wire.Marshal(wire.HelloReply{Cell: h.Cell, Node: p.cfg.Name, IsMaster: true, Master: p.Addr(), Epoch: h.Epoch, Servers: p.cfg.Peers})
}
