package server

import (
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	"golang.org/x/sync/errgroup"

	"github.com/chubby-dev/chubby/fs"
	"github.com/chubby-dev/chubby/wire"
)

// leadershipLoop turns raft leadership changes into becoming and ceasing to
// be master, and the lease table's expired sessions into expiries.
func (s *Server) leadershipLoop() {
	defer s.wg.Done()
	for {
		select {
		case <-s.shutdown:
			return
		case leader := <-s.notifyCh:
			if leader {
				go s.establishMaster()
			} else {
				s.revokeMaster()
			}
		case <-s.leases.Expired():
			go s.expireSessions(s.leases.TakeExpired())
		}
	}
}

// establishMaster runs when this server becomes raft leader: it waits until
// every earlier entry is applied, starts a new epoch through the log, gives
// every session a fresh lease of its TTL (the most an earlier master could
// have granted), re-arms lock-delay timers and starts serving.
func (s *Server) establishMaster() {
	s.masterMu.Lock()
	defer s.masterMu.Unlock()
	if s.raft.State() != raft.Leader || s.closing.Load() {
		return
	}
	// When this server last heard from the previous leader: the failover
	// is timed from there to serving (zero for the cell's first master).
	lastLeader := s.raft.LastContact()
	if err := s.raft.Barrier(10 * time.Second).Error(); err != nil {
		s.log.Warn("barrier before serving failed", "err", err)
		return
	}
	res, err := s.proposer.propose(fs.NewCommand(&fs.NewEpoch{}))
	if err != nil {
		s.log.Warn("new epoch failed", "err", err)
		return
	}
	if err := s.initACLs(); err != nil {
		s.log.Warn("first ACLs of the secure cell failed", "err", err)
		return
	}
	now := s.clock.Now()
	var sessions []fs.SessionInfo
	var delayed []fs.Delayed
	s.fsm.read(func(st *fs.State) {
		sessions = st.Sessions()
		delayed = st.DelayedLocks()
	})
	s.tracker.reset()
	s.watches.reset()
	s.leases.Promote(now, sessions)
	for _, d := range delayed {
		s.delays.arm(d)
	}
	s.epoch.Store(res.Epoch)
	s.metrics.epoch.Set(float64(res.Epoch))
	s.metrics.serving.Set(1)
	if !lastLeader.IsZero() {
		took := time.Since(lastLeader)
		s.metrics.failover.Observe(took.Seconds())
		s.journal.add("master", "serving as master, epoch %d, %d sessions carried over; %v after the last contact with the previous leader",
			res.Epoch, len(sessions), took.Round(time.Millisecond))
	} else {
		s.journal.add("master", "serving as master, epoch %d, %d sessions", res.Epoch, len(sessions))
	}
	s.log.Info("serving as master", "epoch", res.Epoch, "sessions", len(sessions))
}

// initACLs gives a secure cell its first ACLs before its first master
// serves (fs.InitACLs): the root's names "admin" and acl/admin listing
// the admins, so a fresh cell denies every other principal until an admin
// grants access. A cell whose root has names already, and a dev cell
// (every caller an admin), are left as they are.
func (s *Server) initACLs() error {
	if s.tls == nil {
		return nil
	}
	var bare bool
	s.fsm.read(func(st *fs.State) {
		a, err := st.ACL(fs.Root(s.cfg.Cell))
		bare = err == nil && a.IsZero()
	})
	if !bare {
		return nil
	}
	res, err := s.proposer.propose(fs.NewCommand(&fs.InitACLs{Admins: s.admins()}))
	if err == nil {
		err = res.Err
	}
	if err == nil {
		s.log.Info("secure cell: the root's ACLs are admin's", "admins", s.admins())
	}
	return err
}

// revokeMaster stops serving: KeepAlive polls and blocked calls are failed
// so clients look for the new master.
func (s *Server) revokeMaster() {
	s.masterMu.Lock()
	defer s.masterMu.Unlock()
	if s.epoch.Swap(0) == 0 {
		return
	}
	s.log.Info("no longer master")
	s.metrics.serving.Set(0)
	s.metrics.epoch.Set(0)
	s.journal.add("master", "no longer master")
	s.leases.Demote()
	s.tracker.reset()
	s.watches.reset()
	s.delays.stopAll()
	s.waits.failAll(wire.FromCode("not_master", "not the master any more"))
}

// expiryWorkers bounds the expiries proposed at once: a full batch of
// group commit (maxBatchCmds), so a million expiries take a couple of
// thousand log entries; the proposer's queue takes one command per session
// in turn, so a client's write waits behind about one batch of them, not
// behind the flood (issue 17, finding 3).
const expiryWorkers = maxBatchCmds

// expireSessions ends a batch of sessions whose leases ran out, once this
// server has confirmed with a quorum — once for the whole batch — that it
// is still the leader. An expiry that cannot be made is abandoned and the
// lease timer looks again later.
func (s *Server) expireSessions(ids []uint64) {
	if err := s.awaitRaft(s.raft.VerifyLeader()); err != nil {
		for _, id := range ids {
			s.expiryLog.add(hclog.Warn, "sessions not expired: leadership not confirmed", "session", id, "err", err)
			s.leases.retryExpiry(id)
		}
		return
	}
	var g errgroup.Group
	g.SetLimit(expiryWorkers)
	for _, id := range ids {
		g.Go(func() error { s.expireSession(id); return nil })
	}
	g.Wait()
}

// expireSession ends one session of a confirmed batch, unless this server
// stalled since the session's last renewal.
func (s *Server) expireSession(id uint64) {
	if s.leases.graceAfterStall(id) {
		s.expiryLog.add(hclog.Warn, "sessions not expired: the master stalled since their last renewal", "session", id)
		return
	}
	s.expiryLog.add(hclog.Info, "sessions expired", "session", id)
	res, err := s.proposeWrite(&fs.Command{Op: fs.OpEndSession, Session: id, Body: &fs.EndSession{Expired: true}})
	if err != nil {
		s.expiryLog.add(hclog.Warn, "expiring sessions failed", "session", id, "err", err)
		s.leases.retryExpiry(id)
		return
	}
	if res.Err != nil {
		s.leases.remove(id)
	}
	s.metrics.expired.Inc()
	s.journal.add("expiry", "session %d expired", id)
}
