package server

import (
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/hashicorp/raft"

	"github.com/chubby-dev/chubby/fs"
	"github.com/chubby-dev/chubby/session"
	"github.com/chubby-dev/chubby/wire"
)

func (c *call) hello() (any, error) {
	rep := wire.HelloReply{Cell: c.s.cfg.Cell, Node: c.s.cfg.NodeID}
	for _, info := range c.s.members.snapshot() {
		if info.RPCAddr != "" {
			rep.Servers = append(rep.Servers, info.RPCAddr)
		}
	}
	sort.Strings(rep.Servers)
	if e := c.s.epoch.Load(); e != 0 {
		rep.IsMaster, rep.Master, rep.Epoch = true, c.s.RPCAddr(), e
	} else if _, id := c.s.raft.LeaderWithID(); id != "" && string(id) != c.s.cfg.NodeID {
		rep.Master = c.s.members.rpcAddr(string(id))
	}
	return rep, nil
}

func (c *call) members() (any, error) {
	cf := c.s.raft.GetConfiguration()
	if err := cf.Error(); err != nil {
		return nil, fmt.Errorf("%w: %v", wire.ErrUnavailable, err)
	}
	_, leader := c.s.raft.LeaderWithID()
	book := c.s.members.snapshot()
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
		if id == c.s.cfg.NodeID {
			m.State = "alive"
		}
		rep.Members = append(rep.Members, m)
	}
	sort.Slice(rep.Members, func(i, j int) bool { return rep.Members[i].Name < rep.Members[j].Name })
	return rep, nil
}

func (c *call) removeServer() (any, error) {
	var a wire.RemoveServerArgs
	if err := c.decode(&a); err != nil {
		return nil, err
	}
	cf := c.s.raft.GetConfiguration()
	if err := cf.Error(); err != nil {
		return nil, fmt.Errorf("%w: %v", wire.ErrUnavailable, err)
	}
	found := false
	for _, srv := range cf.Configuration().Servers {
		found = found || string(srv.ID) == a.Name
	}
	if !found {
		return nil, fmt.Errorf("%w: no server named %q in the cell", fs.ErrNoSuchNode, a.Name)
	}
	// Tombstone first, so the master does not add it back from gossip.
	if _, err := c.s.proposer.propose(&fs.Command{Op: fs.OpRemoveServer, Path: a.Name}); err != nil {
		return nil, err
	}
	c.s.log.Info("removing server for good", "node", a.Name)
	if err := c.s.raft.RemoveServer(raft.ServerID(a.Name), 0, 10*time.Second).Error(); err != nil {
		return nil, fmt.Errorf("%w: remove %s: %v", wire.ErrUnavailable, a.Name, err)
	}
	return wire.Empty{}, nil
}

func (c *call) createSession() (any, error) {
	var a wire.CreateSessionArgs
	if err := c.decode(&a); err != nil {
		return nil, err
	}
	ttl := session.NegotiateTTL(time.Duration(a.TTL))
	if a.TTL == 0 {
		ttl = c.s.cfg.DefaultTTL
	}
	res, err := c.s.proposer.propose(&fs.Command{Op: fs.OpCreateSession, TTL: int64(ttl), Nonce: a.Nonce})
	if err != nil {
		return nil, err
	}
	if res.Err != nil {
		return nil, res.Err
	}
	if c.s.leases.check(res.Session) != nil {
		c.s.leases.add(c.s.clock.Now(), res.Session, ttl)
	}
	c.s.metrics.created.Inc()
	return wire.CreateSessionReply{Session: res.Session, TTL: int64(ttl)}, nil
}

func (c *call) keepAlive() (any, error) {
	var a wire.KeepAliveArgs
	if err := c.decode(&a); err != nil {
		return nil, err
	}
	if err := c.s.leases.keepAlive(c.c, c.req.ID, c.req.Session, a.Urgent, a.AckInval); err != nil {
		return nil, err
	}
	return nil, errDeferred
}

func (c *call) closeSession() (any, error) {
	_, err := c.apply(&fs.Command{Op: fs.OpEndSession})
	return wire.Empty{}, err
}

func (c *call) open() (any, error) {
	var a wire.OpenArgs
	if err := c.decode(&a); err != nil {
		return nil, err
	}
	if err := c.checkPath(a.Path); err != nil {
		return nil, err
	}
	// Subscribe only once the node is known to exist (or was created).
	watch := func() {
		if a.Events != 0 {
			c.s.watches.watch(c.req.Session, a.Path, a.Events&wire.EvAll)
		}
	}
	if !a.Create {
		var rep wire.StatReply
		if a.Cache {
			rep.Cacheable = c.s.tracker.admit(c.req.Session, a.Path)
		}
		var err error
		c.s.fsm.read(func(s *fs.State) { rep.Stat, err = s.Stat(a.Path) })
		if a.Cache && errors.Is(err, fs.ErrNoSuchNode) {
			rep.Absent, err = true, nil
		}
		if err == nil && !rep.Absent {
			watch()
		}
		return rep, err
	}
	res, err := c.apply(&fs.Command{Op: fs.OpCreate, Path: a.Path, IsDir: a.IsDir, Ephemeral: a.Ephemeral, Exclusive: a.Exclusive})
	if err != nil {
		return nil, err
	}
	watch()
	return wire.StatReply{Stat: res.Stat}, nil
}

func (c *call) unwatch() (any, error) {
	var a wire.UnwatchArgs
	if err := c.decode(&a); err != nil {
		return nil, err
	}
	c.s.watches.watch(c.req.Session, a.Path, 0)
	return wire.Empty{}, nil
}

func (c *call) getContents() (any, error) {
	var a wire.NodeArgs
	if err := c.decode(&a); err != nil {
		return nil, err
	}
	var rep wire.ContentsReply
	if a.Cache {
		rep.Cacheable = c.s.tracker.admit(c.req.Session, a.Path)
	}
	var err error
	c.s.fsm.read(func(s *fs.State) { rep.Data, rep.Stat, err = s.Get(a.Path, a.Instance) })
	return rep, err
}

func (c *call) getStat() (any, error) {
	var a wire.NodeArgs
	if err := c.decode(&a); err != nil {
		return nil, err
	}
	var rep wire.StatReply
	if a.Cache {
		rep.Cacheable = c.s.tracker.admit(c.req.Session, a.Path)
	}
	var err error
	c.s.fsm.read(func(s *fs.State) { rep.Stat, err = s.StatInstance(a.Path, a.Instance) })
	return rep, err
}

func (c *call) readDir() (any, error) {
	var a wire.NodeArgs
	if err := c.decode(&a); err != nil {
		return nil, err
	}
	var rep wire.ReadDirReply
	if a.Cache {
		rep.Cacheable = c.s.tracker.admit(c.req.Session, a.Path)
	}
	var err error
	c.s.fsm.read(func(s *fs.State) {
		rep.Children, err = s.Children(a.Path, a.Instance)
		if err == nil {
			rep.Stat, err = s.StatInstance(a.Path, a.Instance)
		}
	})
	return rep, err
}

func (c *call) setContents() (any, error) {
	var a wire.SetContentsArgs
	if err := c.decode(&a); err != nil {
		return nil, err
	}
	if err := c.checkPath(a.Path); err != nil {
		return nil, err
	}
	if len(a.Data) > fs.MaxContents {
		return nil, fmt.Errorf("%w: %d bytes (limit %d)", fs.ErrTooLarge, len(a.Data), fs.MaxContents)
	}
	res, err := c.apply(&fs.Command{Op: fs.OpSetContents, Path: a.Path, Instance: a.Instance, Data: a.Data,
		Create: a.Create, CAS: a.CAS, Gen: a.Gen, Seq: a.Seq})
	if err != nil {
		return nil, err
	}
	return wire.StatReply{Stat: res.Stat}, nil
}

func (c *call) delete() (any, error) {
	var a wire.DeleteArgs
	if err := c.decode(&a); err != nil {
		return nil, err
	}
	if err := c.checkPath(a.Path); err != nil {
		return nil, err
	}
	_, err := c.apply(&fs.Command{Op: fs.OpDelete, Path: a.Path, Instance: a.Instance, Seq: a.Seq})
	return wire.Empty{}, err
}

func (c *call) acquire() (any, error) {
	var a wire.AcquireArgs
	if err := c.decode(&a); err != nil {
		return nil, err
	}
	if err := c.checkPath(a.Path); err != nil {
		return nil, err
	}
	delay, err := session.ValidateLockDelay(time.Duration(a.LockDelay))
	if err != nil {
		return nil, fmt.Errorf("%w: %v", fs.ErrBadRequest, err)
	}
	if a.Wait && a.WaitID == 0 {
		return nil, errBadRequest("a blocking Acquire needs a wait id")
	}
	cmd := &fs.Command{Op: fs.OpAcquire, Path: a.Path, Instance: a.Instance, Mode: a.Mode,
		Wait: a.Wait, WaitID: a.WaitID, LockDelay: int64(delay)}
	if !a.Wait {
		res, err := c.apply(cmd)
		if err != nil {
			return nil, err
		}
		return wire.SeqReply{Seq: res.Seq}, nil
	}
	// A blocking Acquire is made idempotent by its wait id, not by the call
	// number: its retry must find the wait (or the grant) as it is now.
	c.req.Call = 0
	// Register before proposing: the grant may come in the very apply that
	// queues us, or in any later one.
	s := c.s
	ch, unregister := s.waits.register(waitKey{c.req.Session, a.WaitID})
	res, err := c.apply(cmd)
	if err != nil {
		unregister()
		return nil, err
	}
	if !res.Queued {
		unregister()
		return wire.SeqReply{Seq: res.Seq}, nil
	}
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

func (c *call) cancelAcquire() (any, error) {
	var a wire.CancelAcquireArgs
	if err := c.decode(&a); err != nil {
		return nil, err
	}
	if err := c.checkPath(a.Path); err != nil {
		return nil, err
	}
	_, err := c.apply(&fs.Command{Op: fs.OpCancelWait, Path: a.Path, WaitID: a.WaitID})
	return wire.Empty{}, err
}

func (c *call) release() (any, error) {
	var a wire.ReleaseArgs
	if err := c.decode(&a); err != nil {
		return nil, err
	}
	if err := c.checkPath(a.Path); err != nil {
		return nil, err
	}
	_, err := c.apply(&fs.Command{Op: fs.OpRelease, Path: a.Path, Gen: a.Gen})
	return wire.Empty{}, err
}

func (c *call) sequencer() (any, error) {
	var a wire.NodeArgs
	if err := c.decode(&a); err != nil {
		return nil, err
	}
	var rep wire.SeqReply
	var err error
	c.s.fsm.read(func(s *fs.State) { rep.Seq, err = s.HeldSequencer(c.req.Session, a.Path) })
	return rep, err
}

func (c *call) checkSequencer() (any, error) {
	var a wire.CheckSequencerArgs
	if err := c.decode(&a); err != nil {
		return nil, err
	}
	var rep wire.CheckSequencerReply
	c.s.fsm.read(func(s *fs.State) { rep.Valid = s.CheckSequencer(a.Seq) })
	return rep, nil
}
