package server

import (
	"crypto/rand"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/hashicorp/raft"

	"github.com/chubby-dev/chubby/fs"
	"github.com/chubby-dev/chubby/session"
	"github.com/chubby-dev/chubby/wire"
)

// The RPC handlers. Each is a table entry of dispatch.go: by the time it
// runs, its arguments are decoded, the master, epoch, session and (for
// reads) leadership checks of its entry have passed, and the path it names
// is a path of the cell. A handler that writes builds its command and
// proposes it with apply.

func (s *Server) hello(c *call, _ *noArgs) (any, error) {
	rep := wire.HelloReply{Cell: s.cfg.Cell, Node: s.cfg.NodeID}
	for _, info := range s.members.snapshot() {
		if info.RPCAddr != "" {
			rep.Servers = append(rep.Servers, info.RPCAddr)
		}
	}
	sort.Strings(rep.Servers)
	if e := s.epoch.Load(); e != 0 {
		rep.IsMaster, rep.Master, rep.Epoch = true, s.RPCAddr(), e
	} else if _, id := s.raft.LeaderWithID(); id != "" && string(id) != s.cfg.NodeID {
		rep.Master = s.members.rpcAddr(string(id))
	}
	return rep, nil
}

func (s *Server) listMembers(c *call, _ *noArgs) (any, error) {
	cf := s.raft.GetConfiguration()
	if err := s.awaitRaft(cf); err != nil {
		return nil, fmt.Errorf("%w: %v", wire.ErrUnavailable, err)
	}
	_, leader := s.raft.LeaderWithID()
	book := s.members.snapshot()
	var rep wire.MembersReply
	for _, srv := range cf.Configuration().Servers {
		id := string(srv.ID)
		m := wire.Member{Name: id, Voter: srv.Suffrage == raft.Voter, Master: srv.ID == leader, State: "unknown"}
		if info, ok := book[id]; ok {
			m.RPCAddr = info.RPCAddr
			if info.State != "" {
				m.State = info.State
			}
		}
		if id == s.cfg.NodeID {
			m.State = "alive"
		}
		rep.Members = append(rep.Members, m)
	}
	sort.Slice(rep.Members, func(i, j int) bool { return rep.Members[i].Name < rep.Members[j].Name })
	return rep, nil
}

func (s *Server) removeServer(c *call, a *wire.RemoveServerArgs) (any, error) {
	if err := s.requireAdmin(c.c.principal, "remove a server"); err != nil {
		return nil, err
	}
	cf := s.raft.GetConfiguration()
	if err := s.awaitRaft(cf); err != nil {
		return nil, fmt.Errorf("%w: %v", wire.ErrUnavailable, err)
	}
	found, voter, voters := false, false, 0
	for _, srv := range cf.Configuration().Servers {
		if srv.Suffrage == raft.Voter {
			voters++
		}
		if string(srv.ID) == a.Name {
			found, voter = true, srv.Suffrage == raft.Voter
		}
	}
	if !found {
		return nil, fmt.Errorf("%w: no server named %q in the cell", fs.ErrNoSuchNode, a.Name)
	}
	// Nothing is done, or logged as done, before these checks pass.
	if left, quorum := voters-1, voters/2+1; voter && left == 0 {
		return nil, errBadRequest("%s is the cell's only voter: a cell cannot remove its last server", a.Name)
	} else if voter && left < quorum && !a.Force {
		return nil, errBadRequest("removing %s would leave %d voters of %d, fewer than a quorum (%d) of the current configuration; force it to remove anyway", a.Name, left, voters, quorum)
	}
	// Tombstone first, so the master does not add it back from gossip.
	if _, err := s.proposer.propose(fs.NewCommand(&fs.RemoveServer{ServerID: a.Name})); err != nil {
		return nil, err
	}
	s.log.Info("removing server for good", "node", a.Name)
	if err := s.raft.RemoveServer(raft.ServerID(a.Name), 0, 10*time.Second).Error(); err != nil {
		return nil, fmt.Errorf("%w: remove %s: %v", wire.ErrUnavailable, a.Name, err)
	}
	return wire.Empty{}, nil
}

// sessionSecretBytes is the length of a session's secret: 128 random bits.
const sessionSecretBytes = 16

func (s *Server) createSession(c *call, a *wire.CreateSessionArgs) (any, error) {
	if n := s.leases.count(); n >= s.cfg.MaxSessions {
		s.metrics.rejected.WithLabelValues("sessions").Inc()
		return nil, fmt.Errorf("%w: %d sessions live (limit %d)", wire.ErrResourceExhausted, n, s.cfg.MaxSessions)
	}
	if s.tls != nil { // without TLS everybody is the one anonymous principal
		if n := s.leases.owned(c.c.principal); n >= s.cfg.MaxSessionsPerPrincipal {
			s.metrics.rejected.WithLabelValues("principal_sessions").Inc()
			return nil, fmt.Errorf("%w: %s holds %d sessions (limit %d per principal)", wire.ErrResourceExhausted, c.c.principal, n, s.cfg.MaxSessionsPerPrincipal)
		}
	}
	if !s.createRate.take(time.Now()) {
		s.metrics.rejected.WithLabelValues("create_rate").Inc()
		return nil, fmt.Errorf("%w: more than %d CreateSessions a second; try again shortly", wire.ErrResourceExhausted, s.cfg.CreateSessionRate)
	}
	ttl := session.NegotiateTTL(time.Duration(a.TTL))
	if a.TTL == 0 {
		ttl = s.cfg.DefaultTTL
	}
	secret := make([]byte, sessionSecretBytes)
	if _, err := rand.Read(secret); err != nil {
		return nil, err
	}
	res, err := s.proposer.proposeIn(c.c.proposals(), fs.NewCommand(&fs.CreateSession{TTL: int64(ttl), Nonce: a.Nonce, Secret: secret, Principal: c.c.principal, NoCache: a.NoCache}))
	if err != nil {
		return nil, err
	}
	if res.Err != nil {
		return nil, res.Err
	}
	s.leases.add(s.clock.Now(), res.Session, ttl, res.Secret, c.c.principal)
	if a.NoCache {
		s.leases.setNoCache(res.Session)
	}
	s.metrics.created.Inc()
	return wire.CreateSessionReply{Session: res.Session, TTL: int64(ttl), Secret: res.Secret, Principal: c.c.principal}, nil
}

func (s *Server) keepAlive(c *call, a *wire.KeepAliveArgs) (any, error) {
	if err := s.leases.keepAlive(c.c, c.req.ID, c.req.Session, a.Urgent, a.AckInval, a.Stream); err != nil {
		return nil, err
	}
	return nil, errDeferred
}

func (s *Server) keepAliveMany(c *call, a *wire.KeepAliveManyArgs) (any, error) {
	if n := len(a.Sessions); n == 0 || n > wire.MaxKeepAliveMany {
		return nil, errBadRequest("KeepAliveMany names %d sessions (1 to %d)", n, wire.MaxKeepAliveMany)
	}
	s.leases.keepAliveMany(c.c, c.req.ID, c.c.principal, a.Sessions)
	return nil, errDeferred
}

func (s *Server) closeSession(c *call, _ *noArgs) (any, error) {
	_, err := s.apply(c, fs.NewCommand(&fs.EndSession{}))
	return wire.Empty{}, err
}

func (s *Server) open(c *call, a *wire.OpenArgs) (any, error) {
	if a.Events != 0 && !s.watches.canWatch(c.req.Session, a.Path, s.cfg.MaxWatchesPerSession) {
		s.metrics.rejected.WithLabelValues("watches").Inc()
		return nil, fmt.Errorf("%w: session %d watches %d nodes (limit %d)", wire.ErrResourceExhausted, c.req.Session, s.cfg.MaxWatchesPerSession, s.cfg.MaxWatchesPerSession)
	}
	// Subscribe only once the node is known to exist (or was created), and
	// only a principal that may read it (events are a read).
	watch := func() error {
		if a.Events == 0 {
			return nil
		}
		if err := s.readAs(c, a.Path, func(*fs.State) error { return nil }); err != nil {
			return err
		}
		s.watches.watch(c.req.Session, a.Path, a.Events&(wire.EvAll|wire.EvContents))
		return nil
	}
	if !a.Create {
		if a.Data != nil || a.Seq != nil || !a.ACL.IsZero() {
			return nil, errBadRequest("initial contents, ACL names and a fencing sequencer are for an Open that creates")
		}
		var rep wire.StatReply
		rep.Cacheable = s.admit(c, a.Cache, a.Path)
		err := s.readAs(c, a.Path, func(st *fs.State) (err error) {
			rep.Stat, err = st.Stat(a.Path)
			return err
		})
		if a.Cache && errors.Is(err, fs.ErrNoSuchNode) {
			rep.Absent, err = true, nil
		}
		if err == nil && !rep.Absent {
			err = watch()
		}
		return rep, err
	}
	if len(a.Data) > fs.MaxContents {
		return nil, fmt.Errorf("%w: %d bytes (limit %d)", fs.ErrTooLarge, len(a.Data), fs.MaxContents)
	}
	if len(a.Data) > 0 && a.IsDir {
		return nil, errBadRequest("a directory has no contents")
	}
	res, err := s.apply(c, fs.NewCommand(&fs.Create{Path: a.Path, IsDir: a.IsDir, Ephemeral: a.Ephemeral, Exclusive: a.Exclusive,
		Data: a.Data, Seq: a.Seq, ACL: a.ACL}))
	if err != nil {
		return nil, err
	}
	if err := watch(); err != nil {
		return nil, fmt.Errorf("%w (the node was created, its events not subscribed)", err)
	}
	return wire.StatReply{Stat: res.Stat}, nil
}

func (s *Server) unwatch(c *call, a *wire.UnwatchArgs) (any, error) {
	s.watches.watch(c.req.Session, a.Path, 0)
	return wire.Empty{}, nil
}

// The reads check read permission in the same fsm.read that answers
// them. A session is recorded as a cacher (admit) before the read, as
// before ACLs, so no write slips between; a refused read is then at worst
// one cacher too many for the node, invalidated like any other.

func (s *Server) getContents(c *call, a *wire.NodeArgs) (any, error) {
	var rep wire.ContentsReply
	rep.Cacheable = s.admit(c, a.Cache, a.Path)
	err := s.readAs(c, a.Path, func(st *fs.State) (err error) {
		rep.Data, rep.Stat, err = st.Get(a.Path, a.Instance)
		return err
	})
	return rep, err
}

func (s *Server) getStat(c *call, a *wire.NodeArgs) (any, error) {
	var rep wire.StatReply
	rep.Cacheable = s.admit(c, a.Cache, a.Path)
	err := s.readAs(c, a.Path, func(st *fs.State) (err error) {
		rep.Stat, err = st.StatInstance(a.Path, a.Instance)
		return err
	})
	return rep, err
}

func (s *Server) readDir(c *call, a *wire.NodeArgs) (any, error) {
	var rep wire.ReadDirReply
	rep.Cacheable = s.admit(c, a.Cache, a.Path)
	var all []string
	err := s.readAs(c, a.Path, func(st *fs.State) (err error) {
		if all, err = st.Children(a.Path, a.Instance); err == nil {
			rep.Stat, err = st.StatInstance(a.Path, a.Instance)
		}
		return err
	})
	rep.Children, rep.More = listPage(all, a.After, wire.ListPageBytes)
	return rep, err
}

// listPage is the page of the sorted names that starts after after and
// holds at most budget bytes of names (at least one name), and whether
// names remain after it.
func listPage(names []string, after string, budget int) (page []string, more bool) {
	if after != "" {
		names = names[sort.SearchStrings(names, after):]
		if len(names) > 0 && names[0] == after {
			names = names[1:]
		}
	}
	size := 0
	for i, n := range names {
		size += len(n) + 5 // a msgpack string header
		if size > budget && i > 0 {
			return names[:i], true
		}
	}
	return names, false
}

func (s *Server) setContents(c *call, a *wire.SetContentsArgs) (any, error) {
	if len(a.Data) > fs.MaxContents {
		return nil, fmt.Errorf("%w: %d bytes (limit %d)", fs.ErrTooLarge, len(a.Data), fs.MaxContents)
	}
	res, err := s.apply(c, fs.NewCommand(&fs.SetContents{Path: a.Path, Instance: a.Instance, Data: a.Data,
		Create: a.Create, CAS: a.CAS, ContentGen: a.Gen, Seq: a.Seq}))
	if err != nil {
		return nil, err
	}
	return wire.StatReply{Stat: res.Stat}, nil
}

func (s *Server) delete(c *call, a *wire.DeleteArgs) (any, error) {
	_, err := s.apply(c, fs.NewCommand(&fs.Delete{Path: a.Path, Instance: a.Instance, Seq: a.Seq}))
	return wire.Empty{}, err
}

func (s *Server) acquire(c *call, a *wire.AcquireArgs) (any, error) {
	delay, err := session.ValidateLockDelay(time.Duration(a.LockDelay))
	if err != nil {
		return nil, fmt.Errorf("%w: %v", fs.ErrBadRequest, err)
	}
	if a.Wait && a.WaitID == 0 {
		return nil, errBadRequest("a blocking Acquire needs a wait id")
	}
	cmd := fs.NewCommand(&fs.Acquire{Path: a.Path, Instance: a.Instance, Mode: a.Mode,
		Wait: a.Wait, WaitID: a.WaitID, LockDelay: int64(delay)})
	if !a.Wait {
		res, err := s.apply(c, cmd)
		if errors.Is(err, fs.ErrLockDelay) {
			s.metrics.delayBlocks.Inc()
		}
		if err != nil {
			return nil, err
		}
		return wire.SeqReply{Seq: res.Seq}, nil
	}
	// A blocking Acquire is made idempotent by its wait id, not by the call
	// number: its retry must find the wait (or the grant) as it is now.
	c.callID = 0
	// Register before proposing: the grant may come in the very apply that
	// queues us, or in any later one.
	k := waitKey{c.req.Session, a.WaitID}
	if n := s.waits.count(k); n >= s.cfg.MaxWaitsPerSession {
		s.metrics.rejected.WithLabelValues("waits").Inc()
		return nil, fmt.Errorf("%w: session %d has %d blocked Acquires waiting (limit %d)", wire.ErrResourceExhausted, k.session, n, s.cfg.MaxWaitsPerSession)
	}
	ch, unregister, ok := s.waits.register(k)
	if !ok {
		return nil, fmt.Errorf("%w: wait %d on %s was cancelled before it arrived", fs.ErrBadRequest, a.WaitID, a.Path)
	}
	res, err := s.apply(c, cmd)
	if err != nil {
		unregister()
		return nil, err
	}
	if s.waits.cancelRequested(k) {
		// Its cancel was proposed before this Acquire was applied and found
		// nothing: cancel again, now that the wait (or grant) exists.
		unregister()
		if _, err := s.apply(c, fs.NewCommand(&fs.CancelWait{Path: a.Path, WaitID: a.WaitID})); err != nil {
			return nil, err
		}
		return nil, fmt.Errorf("%w: wait %d on %s was cancelled", fs.ErrBadRequest, a.WaitID, a.Path)
	}
	if !res.Queued {
		unregister()
		return wire.SeqReply{Seq: res.Seq}, nil
	}
	if len(res.Delayed) > 0 { // queued on a free lock: its lock-delay holds it back
		s.metrics.delayBlocks.Inc()
	}
	c.park() // a wait for a grant does not hold up the connection's other calls
	select {
	case r := <-ch:
		if r.err != nil {
			return nil, r.err
		}
		return wire.SeqReply{Seq: r.seq}, nil
	case <-c.c.closed:
		// The client went away; its wait stays queued (a reconnecting client
		// re-issues the same wait id; an ended session leaves the queue).
		unregister()
		return nil, errDeferred
	case <-s.shutdown:
		// The wait stays queued in the replicated state: tell the client to
		// find the next master and re-issue the same wait id there, as
		// revokeMaster does (unavailable would make it give up a wait the
		// cell may still grant).
		unregister()
		return nil, fmt.Errorf("%w: %s is shutting down", wire.ErrNotMaster, s.cfg.NodeID)
	}
}

func (s *Server) cancelAcquire(c *call, a *wire.CancelAcquireArgs) (any, error) {
	s.waits.cancel(waitKey{c.req.Session, a.WaitID}, time.Now())
	_, err := s.apply(c, fs.NewCommand(&fs.CancelWait{Path: a.Path, WaitID: a.WaitID}))
	return wire.Empty{}, err
}

func (s *Server) release(c *call, a *wire.ReleaseArgs) (any, error) {
	_, err := s.apply(c, fs.NewCommand(&fs.Release{Path: a.Path, LockGen: a.Gen}))
	return wire.Empty{}, err
}

func (s *Server) sequencer(c *call, a *wire.NodeArgs) (any, error) {
	var rep wire.SeqReply
	var err error
	s.fsm.read(func(st *fs.State) { rep.Seq, err = st.HeldSequencer(c.req.Session, a.Path) })
	return rep, err
}

func (s *Server) checkSequencer(c *call, a *wire.CheckSequencerArgs) (any, error) {
	var rep wire.CheckSequencerReply
	if fs.CheckPath(s.cfg.Cell, a.Seq.Path) != nil {
		return rep, nil // names no node of the cell: not valid
	}
	err := s.readAs(c, a.Seq.Path, func(st *fs.State) error {
		rep.Valid = st.CheckSequencer(a.Seq)
		return nil
	})
	return rep, err
}

func (s *Server) getACL(c *call, a *wire.NodeArgs) (any, error) {
	var rep wire.ACLReply
	err := s.readAs(c, a.Path, func(st *fs.State) (err error) {
		if rep.Stat, err = st.StatInstance(a.Path, a.Instance); err == nil {
			rep.ACL, err = st.ACL(a.Path)
		}
		return err
	})
	return rep, err
}

func (s *Server) setACL(c *call, a *wire.SetACLArgs) (any, error) {
	res, err := s.apply(c, fs.NewCommand(&fs.SetACL{Path: a.Path, Instance: a.Instance, ACL: a.ACL}))
	if err != nil {
		return nil, err
	}
	return wire.StatReply{Stat: res.Stat}, nil
}

// admit records that the call's session caches path when it asked to, and
// says whether the reply may be cached (not while path is being
// invalidated).
func (s *Server) admit(c *call, cache bool, path string) bool {
	return cache && !s.leases.noCache(c.req.Session) && s.tracker.admit(c.req.Session, path)
}
