package client

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/chubby-dev/chubby/fs"
	"github.com/chubby-dev/chubby/wire"
)

// errConnLost: the connection failed while a call was in flight; the call may
// or may not have been applied.
var errConnLost = errors.New("connection to the master lost")

// rpcConn multiplexes calls over one TCP connection: a reader goroutine
// matches responses to calls by id.
type rpcConn struct {
	addr    string
	nc      net.Conn
	wmu     sync.Mutex
	wbuf    []byte
	mu      sync.Mutex
	nextID  uint64
	pending map[uint64]chan *wire.Response
	err     error
	done    chan struct{}
}

func dialConn(ctx context.Context, addr string, tlsCfg *tls.Config) (*rpcConn, error) {
	var d net.Dialer
	nc, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	if tc, ok := nc.(*net.TCPConn); ok {
		tc.SetNoDelay(true)
		tc.SetKeepAlive(true)
		tc.SetKeepAlivePeriod(5 * time.Second)
	}
	if tlsCfg != nil {
		tc := tls.Client(nc, serverVerifying(tlsCfg))
		if err := tc.HandshakeContext(ctx); err != nil {
			nc.Close()
			return nil, fmt.Errorf("tls with %s: %w", addr, err)
		}
		nc = tc
	}
	c := &rpcConn{addr: addr, nc: nc, pending: map[uint64]chan *wire.Response{}, done: make(chan struct{})}
	go c.readLoop()
	return c, nil
}

// serverVerifying is cfg verifying the server as a cell's server: by its
// role name, not the address dialled (servers are reached by the
// addresses the cell advertises). With cfg.ServerName set it is the
// standard verification of that name.
func serverVerifying(cfg *tls.Config) *tls.Config {
	c := cfg.Clone()
	if c.MinVersion == 0 {
		c.MinVersion = tls.VersionTLS12
	}
	if c.ServerName != "" {
		return c
	}
	roots := c.RootCAs
	c.InsecureSkipVerify = true // verified below: the chain, then the role
	c.VerifyConnection = func(cs tls.ConnectionState) error {
		if len(cs.PeerCertificates) == 0 {
			return errors.New("the server sent no certificate")
		}
		inter := x509.NewCertPool()
		for _, ic := range cs.PeerCertificates[1:] {
			inter.AddCert(ic)
		}
		leaf := cs.PeerCertificates[0]
		if _, err := leaf.Verify(x509.VerifyOptions{Roots: roots, Intermediates: inter, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil {
			return err
		}
		for _, n := range leaf.DNSNames {
			if wire.IsServerName(n) {
				return nil
			}
		}
		return fmt.Errorf("the certificate of %q is not a chubby server's (no server.CELL.chubby name)", leaf.Subject.CommonName)
	}
	return c
}

func (c *rpcConn) readLoop() {
	br := bufio.NewReaderSize(c.nc, 16<<10)
	for {
		frame, err := wire.ReadFrame(br)
		if err != nil {
			c.fail(fmt.Errorf("%w: %v", errConnLost, err))
			return
		}
		resp, err := wire.DecodeResponse(frame)
		if err != nil {
			c.fail(fmt.Errorf("%w: %v", errConnLost, err))
			return
		}
		c.mu.Lock()
		ch, ok := c.pending[resp.ID]
		delete(c.pending, resp.ID)
		c.mu.Unlock()
		if ok {
			ch <- resp
		} else if resp.ID == 0 && resp.Code != "" {
			c.fail(fmt.Errorf("%w: server: %s", errConnLost, resp.Error))
			return
		}
	}
}

// fail closes the connection and fails every pending call.
func (c *rpcConn) fail(err error) {
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		return
	}
	c.err = err
	pending := c.pending
	c.pending = nil
	close(c.done)
	c.mu.Unlock()
	c.nc.Close()
	for _, ch := range pending {
		ch <- &wire.Response{Code: "conn", Error: err.Error()}
	}
}

func (c *rpcConn) close() { c.fail(errors.New("connection closed by client")) }

// call sends one request and waits for its response or ctx.
// sessionRef names the session a call is for (zero: none).
type sessionRef struct {
	id     uint64
	secret []byte // CreateSession's: the master refuses the session's calls without it
}

func (c *rpcConn) call(ctx context.Context, m wire.Method, epoch uint64, sess sessionRef, args, reply any) error {
	return c.callNumbered(ctx, m, epoch, sess, 0, 0, args, reply)
}

// callNumbered is call for a session's numbered (deduplicated) call.
func (c *rpcConn) callNumbered(ctx context.Context, m wire.Method, epoch uint64, sess sessionRef, callID, acked uint64, args, reply any) error {
	body, err := wire.Marshal(args)
	if err != nil {
		return err
	}
	ch := make(chan *wire.Response, 1)
	c.mu.Lock()
	if c.err != nil {
		err := c.err
		c.mu.Unlock()
		return err
	}
	c.nextID++
	id := c.nextID
	c.pending[id] = ch
	c.mu.Unlock()

	c.wmu.Lock()
	c.wbuf, err = wire.AppendFrame(c.wbuf[:0], &wire.Request{ID: id, Method: m, Epoch: epoch, Session: sess.id, Secret: sess.secret, Call: callID, Acked: acked, Body: body})
	if err == nil {
		c.nc.SetWriteDeadline(time.Now().Add(10 * time.Second))
		_, err = c.nc.Write(c.wbuf)
	}
	if cap(c.wbuf) > 64<<10 {
		c.wbuf = nil
	}
	c.wmu.Unlock()
	if err != nil {
		c.fail(fmt.Errorf("%w: %v", errConnLost, err))
	}
	select {
	case resp := <-ch:
		if resp.Code == "conn" {
			return fmt.Errorf("%w: %s", errConnLost, resp.Error)
		}
		if err := resp.Err(); err != nil {
			return err
		}
		if reply != nil && len(resp.Body) > 0 {
			if err := wire.Unmarshal(resp.Body, reply); err != nil {
				return fmt.Errorf("%w: decode %s reply: %v", fs.ErrBadRequest, m, err)
			}
		}
		return nil
	case <-ctx.Done():
		c.mu.Lock()
		if c.pending != nil {
			delete(c.pending, id)
		}
		c.mu.Unlock()
		return ctx.Err()
	}
}
