package proc

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/chubby-dev/chubby/testing/cell"
	"github.com/chubby-dev/chubby/wire"
)

// RawConn is a wire-level connection to one chubbyd's RPC address, for what
// the client library never does: ask a particular server (not the master it
// would follow) who the master is and which servers it has, or send a call
// stamped with an old epoch to a server that was paused. Calls are stamped
// with Epoch and Session. It is not safe for concurrent use.
type RawConn struct {
	// Epoch and Session stamp every call; Hello and CreateSession set them.
	Epoch   uint64
	Session uint64
	// Secret is the session's secret, sent with Session (CreateSession
	// sets it; a test may change it to impersonate a session).
	Secret []byte

	addr   string
	nc     net.Conn
	br     *bufio.Reader
	nextID uint64
	stash  map[uint64]*wire.Response
}

// ErrNoReply: no reply arrived within the timeout (the connection stays
// usable; a late reply is kept for a later Await).
var ErrNoReply = errors.New("no reply")

// DialRaw connects to a server's RPC address.
func DialRaw(addr string, timeout time.Duration) (*RawConn, error) {
	nc, err := net.DialTimeout("tcp", addr, timeout)
	if err != nil {
		return nil, err
	}
	return &RawConn{addr: addr, nc: nc, br: bufio.NewReader(nc), stash: map[uint64]*wire.Response{}}, nil
}

// Close closes the connection.
func (r *RawConn) Close() error { return r.nc.Close() }

// Go sends a call of method m stamped with Epoch and Session and returns its
// id without waiting for the reply.
func (r *RawConn) Go(m wire.Method, args any) (uint64, error) {
	body, err := wire.Marshal(args)
	if err != nil {
		return 0, err
	}
	r.nextID++
	buf, err := wire.AppendFrame(nil, &wire.Request{ID: r.nextID, Method: m, Epoch: r.Epoch, Session: r.Session, Secret: r.Secret, Body: body})
	if err != nil {
		return 0, err
	}
	r.nc.SetWriteDeadline(time.Now().Add(5 * time.Second))
	if _, err := r.nc.Write(buf); err != nil {
		return 0, fmt.Errorf("send %s to %s: %w", m, r.addr, err)
	}
	return r.nextID, nil
}

// Await returns the response to call id, waiting up to timeout and keeping
// responses to other calls for their own Await. A response with id 0 (the
// server failing the whole connection) is returned to whoever waits.
func (r *RawConn) Await(id uint64, timeout time.Duration) (*wire.Response, error) {
	if resp, ok := r.stash[id]; ok {
		delete(r.stash, id)
		return resp, nil
	}
	r.nc.SetReadDeadline(time.Now().Add(timeout))
	defer r.nc.SetReadDeadline(time.Time{})
	for {
		frame, err := wire.ReadFrame(r.br)
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				// A frame cut by the deadline would desynchronise the
				// stream: the connection is of no further use.
				if r.br.Buffered() > 0 {
					r.nc.Close()
				}
				return nil, fmt.Errorf("%w from %s within %v", ErrNoReply, r.addr, timeout)
			}
			return nil, fmt.Errorf("read from %s: %w", r.addr, err)
		}
		resp, err := wire.DecodeResponse(frame)
		if err != nil {
			return nil, err
		}
		if resp.ID == id || resp.ID == 0 {
			return resp, nil
		}
		r.stash[resp.ID] = resp
	}
}

// Call sends a call, waits for its reply and decodes it into reply (if
// non-nil). A failed call returns the error rebuilt from the response code,
// so errors.Is works with the fs sentinels.
func (r *RawConn) Call(m wire.Method, args, reply any, timeout time.Duration) error {
	id, err := r.Go(m, args)
	if err != nil {
		return err
	}
	resp, err := r.Await(id, timeout)
	if err != nil {
		return err
	}
	return cell.DecodeResult(resp, reply)
}

// Hello asks the server about the cell and adopts the epoch it names.
func (r *RawConn) Hello(timeout time.Duration) (wire.HelloReply, error) {
	var rep wire.HelloReply
	err := r.Call(wire.MHello, wire.HelloArgs{}, &rep, timeout)
	if err == nil {
		r.Epoch = rep.Epoch
	}
	return rep, err
}

// CreateSession creates a session (the server must be the master) that
// sends no KeepAlive, and adopts it.
func (r *RawConn) CreateSession(ttl, timeout time.Duration) error {
	var rep wire.CreateSessionReply
	err := r.Call(wire.MCreateSession, wire.CreateSessionArgs{TTL: int64(ttl)}, &rep, timeout)
	if err == nil {
		r.Session, r.Secret = rep.Session, rep.Secret
	}
	return err
}

// Hello asks the server at addr, and only it, about the cell.
func Hello(addr string, timeout time.Duration) (wire.HelloReply, error) {
	r, err := DialRaw(addr, timeout)
	if err != nil {
		return wire.HelloReply{}, err
	}
	defer r.Close()
	return r.Hello(timeout)
}

// Members asks the server at addr, and only it, for the cell's servers as it
// sees them (any server answers; the master flag is its view of the raft
// leader).
func Members(addr string, timeout time.Duration) ([]wire.Member, error) {
	r, err := DialRaw(addr, timeout)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	var rep wire.MembersReply
	if err := r.Call(wire.MMembers, wire.Empty{}, &rep, timeout); err != nil {
		return nil, err
	}
	return rep.Members, nil
}
