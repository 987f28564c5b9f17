package server

import (
	"fmt"

	"github.com/chubby-dev/chubby/fs"
	"github.com/chubby-dev/chubby/wire"
)

// call is one request being served.
type call struct {
	s   *Server
	c   *conn
	req *wire.Request
}

// callSpec is an entry of the RPC dispatch table.
type callSpec struct {
	// inline calls run on the connection's reader goroutine and must not
	// block; the others get a goroutine for their duration.
	inline bool
	// needSession: the call must name a live session of this master.
	needSession bool
	// read: answered from the local state after the master confirmed its
	// leadership with a quorum (linearizable reads).
	read bool
	// handle returns the reply body, or errDeferred when it will reply later.
	handle func(*call) (any, error)
}

// errDeferred tells dispatch that the handler replies by itself later.
var errDeferred = fmt.Errorf("deferred")

// calls is the one dispatch table of the RPC service.
var calls [wire.MethodCount]callSpec

func init() {
	calls = [wire.MethodCount]callSpec{
		wire.MHello:          {inline: true, handle: (*call).hello},
		wire.MCreateSession:  {handle: (*call).createSession},
		wire.MKeepAlive:      {inline: true, needSession: true, handle: (*call).keepAlive},
		wire.MCloseSession:   {needSession: true, handle: (*call).closeSession},
		wire.MOpen:           {needSession: true, handle: (*call).open},
		wire.MGetContents:    {read: true, needSession: true, handle: (*call).getContents},
		wire.MGetStat:        {read: true, needSession: true, handle: (*call).getStat},
		wire.MReadDir:        {read: true, needSession: true, handle: (*call).readDir},
		wire.MSetContents:    {needSession: true, handle: (*call).setContents},
		wire.MDelete:         {needSession: true, handle: (*call).delete},
		wire.MAcquire:        {needSession: true, handle: (*call).acquire},
		wire.MCancelAcquire:  {needSession: true, handle: (*call).cancelAcquire},
		wire.MRelease:        {needSession: true, handle: (*call).release},
		wire.MSequencer:      {read: true, needSession: true, handle: (*call).sequencer},
		wire.MCheckSequencer: {read: true, handle: (*call).checkSequencer},
		wire.MMembers:        {handle: (*call).members},
		wire.MRemoveServer:   {handle: (*call).removeServer},
		wire.MUnwatch:        {inline: true, needSession: true, handle: (*call).unwatch},
	}
}

// known reports whether m is a call of the dispatch table.
func known(m wire.Method) bool {
	return m != wire.MInvalid && m < wire.MethodCount && calls[m].handle != nil
}

// dispatch checks the epoch and session of a call and runs its handler.
func (s *Server) dispatch(c *conn, req *wire.Request) {
	spec := calls[req.Method]
	s.metrics.calls.WithLabelValues(req.Method.String()).Inc()
	run := func() {
		body, err := s.precheck(req, spec)
		if err == nil {
			body, err = spec.handle(&call{s: s, c: c, req: req})
		}
		if err == errDeferred {
			return
		}
		c.reply(req.ID, body, err)
	}
	if spec.inline {
		run()
		return
	}
	go run()
}

func (s *Server) precheck(req *wire.Request, spec callSpec) (any, error) {
	if req.Method == wire.MHello || req.Method == wire.MMembers {
		return nil, nil // any server answers these, master or not
	}
	epoch := s.epoch.Load()
	if epoch == 0 {
		return nil, fmt.Errorf("%w: %s is not serving as master", wire.ErrNotMaster, s.cfg.NodeID)
	}
	if req.Epoch != epoch {
		return nil, fmt.Errorf("%w: call has epoch %d, the master's is %d", wire.ErrWrongEpoch, req.Epoch, epoch)
	}
	if spec.needSession {
		if err := s.leases.check(req.Session); err != nil {
			return nil, err
		}
	}
	if spec.read || (req.Method == wire.MOpen && !isCreate(req)) {
		if err := s.verifier.verify(); err != nil {
			return nil, err
		}
	}
	return nil, nil
}

// isCreate reports whether an Open call may create (a write, not a read).
func isCreate(req *wire.Request) bool {
	var a wire.OpenArgs
	return wire.Unmarshal(req.Body, &a) == nil && a.Create
}

func (c *call) decode(v any) error {
	if err := wire.Unmarshal(c.req.Body, v); err != nil {
		return errBadRequest("%s arguments: %v", c.req.Method, err)
	}
	return nil
}

// apply proposes a command on behalf of the call's session, deduplicated
// by the call's number.
func (c *call) apply(cmd *fs.Command) (*fs.Result, error) {
	cmd.Session = c.req.Session
	cmd.CallID, cmd.Acked = c.req.Call, c.req.Acked
	res, err := c.s.proposeWrite(cmd)
	if err != nil {
		return nil, err
	}
	return res, res.Err
}

func (c *call) checkPath(p string) error { return fs.CheckPath(c.s.cfg.Cell, p) }
