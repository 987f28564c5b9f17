package server

import (
	"fmt"

	"github.com/chubby-dev/chubby/fs"
	"github.com/chubby-dev/chubby/wire"
)

// call is one request being served.
type call struct {
	c   *conn
	req *wire.Request
	// callID is the number the call's command carries so the replicated
	// state answers a retry from memory (exactly-once): the request's
	// number for a numbered entry, 0 otherwise.
	callID uint64
	// park tells the connection's queue that the call now waits for
	// something that may take long (a lock grant) and no longer counts
	// among its running calls. Safe to call more than once.
	park func()
}

// callSpec is an entry of the RPC dispatch table: what a call needs before
// its handler runs. dispatch and precheck read only these flags; no method
// is named outside the table.
type callSpec struct {
	// inline calls run on the connection's reader goroutine and must not
	// block; the others get a goroutine for their duration.
	inline bool
	// master: only the serving master answers, and only calls stamped with
	// its epoch. Without it any server answers (Hello, Members).
	master bool
	// session: the call must name a live session of this master.
	session bool
	// read: answered from the local state after the master confirmed its
	// leadership with a quorum (linearizable reads).
	read bool
	// numbered: a write made exactly-once by the call's number, which its
	// command carries into the replicated state.
	numbered bool
	// run decodes the arguments, runs the checks they need and the
	// handler; it returns the reply body, or errDeferred when the handler
	// replies by itself later. Set by handle.
	run func(*Server, *call) (any, error)
}

// argChecks are what an entry checks of its decoded arguments A.
type argChecks[A any] struct {
	// path returns the node the call names; it must be a path of the cell.
	path func(*A) string
	// read makes the call a read when it says so of the arguments (an
	// Open that does not create), as callSpec.read does for every call.
	read func(*A) bool
	// creates says the call may create the node: its path must then pass
	// fs.CheckNewPath (no invisible format characters).
	creates func(*A) bool
}

// noArgs is the argument type of calls that take none: the body is not
// decoded.
type noArgs struct{}

// handle returns spec with its run: decode the body into an A, then fn.
func handle[A any](spec callSpec, fn func(*Server, *call, *A) (any, error)) callSpec {
	return handleChecked(spec, argChecks[A]{}, fn)
}

// handleChecked is handle with checks of the decoded arguments: leadership
// confirmed when chk.read says the call is a read, chk.path a path of the
// cell.
func handleChecked[A any](spec callSpec, chk argChecks[A], fn func(*Server, *call, *A) (any, error)) callSpec {
	spec.run = func(s *Server, c *call) (any, error) {
		a := new(A)
		if _, none := any(a).(*noArgs); !none {
			if err := wire.Unmarshal(c.req.Body, a); err != nil {
				return nil, errBadRequest("%s arguments: %v", c.req.Method, err)
			}
		}
		if chk.read != nil && chk.read(a) {
			if err := s.verifier.verify(); err != nil {
				return nil, err
			}
		}
		if chk.path != nil {
			check := fs.CheckPath
			if chk.creates != nil && chk.creates(a) {
				check = fs.CheckNewPath
			}
			if err := check(s.cfg.Cell, chk.path(a)); err != nil {
				return nil, err
			}
		}
		return fn(s, c, a)
	}
	return spec
}

// errDeferred tells dispatch that the handler replies by itself later.
var errDeferred = fmt.Errorf("deferred")

// calls is the one dispatch table of the RPC service.
var calls [wire.MethodCount]callSpec

func init() {
	var (
		anyServer = callSpec{}
		master    = callSpec{master: true}
		session   = callSpec{master: true, session: true}
		read      = callSpec{master: true, session: true, read: true}
		write     = callSpec{master: true, session: true, numbered: true}
		inline    = func(spec callSpec) callSpec { spec.inline = true; return spec }
	)
	calls = [wire.MethodCount]callSpec{
		wire.MHello:          handle(inline(anyServer), (*Server).hello),
		wire.MMembers:        handle(anyServer, (*Server).listMembers),
		wire.MCreateSession:  handle(master, (*Server).createSession),
		wire.MRemoveServer:   handle(session, (*Server).removeServer),
		wire.MKeepAlive:      handle(inline(session), (*Server).keepAlive),
		wire.MKeepAliveMany:  handle(inline(master), (*Server).keepAliveMany),
		wire.MCloseSession:   handle(write, (*Server).closeSession),
		wire.MUnwatch:        handle(inline(session), (*Server).unwatch),
		wire.MGetContents:    handle(read, (*Server).getContents),
		wire.MGetStat:        handle(read, (*Server).getStat),
		wire.MReadDir:        handle(read, (*Server).readDir),
		wire.MBackup:         handle(read, (*Server).backup),
		wire.MSequencer:      handle(read, (*Server).sequencer),
		wire.MCheckSequencer: handle(callSpec{master: true, read: true}, (*Server).checkSequencer),
		wire.MOpen: handleChecked(write, argChecks[wire.OpenArgs]{
			path:    func(a *wire.OpenArgs) string { return a.Path },
			read:    func(a *wire.OpenArgs) bool { return !a.Create },
			creates: func(a *wire.OpenArgs) bool { return a.Create },
		}, (*Server).open),
		wire.MSetContents: handleChecked(write, argChecks[wire.SetContentsArgs]{
			path:    func(a *wire.SetContentsArgs) string { return a.Path },
			creates: func(a *wire.SetContentsArgs) bool { return a.Create },
		}, (*Server).setContents),
		wire.MDelete: handleChecked(write, argChecks[wire.DeleteArgs]{
			path: func(a *wire.DeleteArgs) string { return a.Path }}, (*Server).delete),
		wire.MAcquire: handleChecked(write, argChecks[wire.AcquireArgs]{
			path: func(a *wire.AcquireArgs) string { return a.Path }}, (*Server).acquire),
		wire.MCancelAcquire: handleChecked(write, argChecks[wire.CancelAcquireArgs]{
			path: func(a *wire.CancelAcquireArgs) string { return a.Path }}, (*Server).cancelAcquire),
		wire.MRelease: handleChecked(write, argChecks[wire.ReleaseArgs]{
			path: func(a *wire.ReleaseArgs) string { return a.Path }}, (*Server).release),
		wire.MGetACL: handleChecked(read, argChecks[wire.NodeArgs]{
			path: func(a *wire.NodeArgs) string { return a.Path }}, (*Server).getACL),
		wire.MSetACL: handleChecked(write, argChecks[wire.SetACLArgs]{
			path: func(a *wire.SetACLArgs) string { return a.Path }}, (*Server).setACL),
	}
}

// known reports whether m is a call of the dispatch table.
func known(m wire.Method) bool {
	return m != wire.MInvalid && m < wire.MethodCount && calls[m].run != nil
}

// dispatch runs a call through its table entry: the entry's checks, then
// its handler, then the reply.
func (s *Server) dispatch(c *conn, req *wire.Request) {
	spec := &calls[req.Method]
	s.metrics.calls.WithLabelValues(req.Method.String()).Inc()
	run := func(park func(), leave func()) {
		var body any
		err := s.precheck(c, req, spec)
		if err == nil {
			cl := &call{c: c, req: req, park: func() { leave(); park() }}
			if spec.numbered {
				cl.callID = req.Call
			}
			body, err = spec.run(s, cl)
		}
		leave() // before the reply: the client's next call may come at once
		if err == errDeferred {
			return
		}
		if err != nil {
			s.metrics.countDenied(wire.Code(err))
		}
		c.reply(req.ID, body, err)
	}
	if spec.inline {
		run(func() {}, func() {})
		return
	}
	c.spawn(func(park func()) { run(park, s.load.enter()) })
}

// precheck refuses a call this server may not answer: not the master, a
// call of another epoch, a session without a lease here, or a read while
// leadership cannot be confirmed.
func (s *Server) precheck(c *conn, req *wire.Request, spec *callSpec) error {
	if !spec.master {
		return nil
	}
	epoch := s.epoch.Load()
	if epoch == 0 {
		return fmt.Errorf("%w: %s is not serving as master", wire.ErrNotMaster, s.cfg.NodeID)
	}
	if req.Epoch != epoch {
		return fmt.Errorf("%w: call has epoch %d, the master's is %d", wire.ErrWrongEpoch, req.Epoch, epoch)
	}
	if spec.session {
		if err := s.leases.checkCaller(req.Session, req.Secret, c.principal); err != nil {
			return err
		}
	}
	if spec.read {
		return s.verifier.verify()
	}
	return nil
}

// apply proposes a command on behalf of the call's session, numbered with
// the call's number and carrying the caller (principal, admin) whose ACL
// permissions the state machine checks as it applies, after the
// invalidation protocol, in the queue of the call's connection; a command
// the state machine refused returns its error.
func (s *Server) apply(c *call, cmd *fs.Command) (*fs.Result, error) {
	cmd.Session = c.req.Session
	cmd.Caller, cmd.Admin = c.c.principal, s.isAdmin(c.c.principal)
	cmd.CallID, cmd.Acked = c.callID, c.req.Acked
	res, err := s.proposeWriteIn(c.c.proposals(), cmd)
	if err != nil {
		return nil, err
	}
	return res, res.Err
}

// access refuses the call's principal p on path unless the ACLs that
// govern path grant it; admins are not checked. A read runs it inside the
// fsm.read that answers it (readAs), so the check and the answer see one
// state (a write's check is the state machine's, as it applies).
func (s *Server) access(st *fs.State, c *call, path string, p fs.Perm) error {
	return s.accessAs(st, c.c.principal, path, p)
}

// accessAs is access for principal: admins pass, others as the ACLs say.
func (s *Server) accessAs(st *fs.State, principal, path string, p fs.Perm) error {
	if s.isAdmin(principal) {
		return nil
	}
	return st.Access(path, p, principal)
}

// readAs answers a read of path with fn, in one fsm.read after the call's
// principal was found to have read permission on path; a refusal is the
// error and fn does not run.
func (s *Server) readAs(c *call, path string, fn func(st *fs.State) error) error {
	var err error
	s.fsm.read(func(st *fs.State) {
		if err = s.access(st, c, path, fs.PermRead); err == nil {
			err = fn(st)
		}
	})
	return err
}
