package client

// SessionGroup: the multi-session form of the protocol for a process that
// holds many sessions and does nothing else with most of them (a load
// tool): one connection, one loop renewing them all with KeepAliveMany.

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/chubby-dev/chubby/wire"
)

// SessionGroup is many sessions renewed together over one connection to
// the master: one goroutine and one KeepAliveMany call per hold for all of
// them (per wire.MaxKeepAliveMany of them), where a Client per session
// costs a goroutine, a lease loop and a cache each. After the master
// fails, the group finds the new one once and renews every session there
// in one urgent call, so they all reach it within a round trip of each
// other. A group's sessions open no handles and cache nothing; they exist,
// are renewed, and are closed. It is safe for concurrent use.
type SessionGroup struct {
	u       *Upstream
	ttl     time.Duration
	grace   time.Duration
	noCache bool

	mu       sync.Mutex
	sessions map[uint64]*groupSession
	lost     int
	wake     chan struct{} // a session was added while the loop had none

	stop   chan struct{}
	done   chan struct{}
	closed sync.Once
}

// groupSession is the group's record of one session.
type groupSession struct {
	secret []byte
	// expires is the local lease: the send time of the last renewal the
	// master granted, plus the TTL it granted.
	expires  time.Time
	ackInval uint64
}

// NewSessionGroup finds the master of the cell cfg names (Servers, TLS,
// Backoff, Logger, Clock) and starts the group's renewal loop. Its
// sessions take cfg's SessionTTL and Grace; DisableCache creates them as
// sessions that never cache (CreateSessionArgs.NoCache).
func NewSessionGroup(ctx context.Context, cfg Config) (*SessionGroup, error) {
	u, err := DialUpstream(ctx, cfg)
	if err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	g := &SessionGroup{
		u: u, ttl: cfg.SessionTTL, grace: cfg.Grace, noCache: cfg.DisableCache,
		sessions: map[uint64]*groupSession{},
		wake:     make(chan struct{}, 1),
		stop:     make(chan struct{}),
		done:     make(chan struct{}),
	}
	go g.renewLoop()
	return g, nil
}

// Create creates a session in the group and returns its id. It retries on
// another master (with the same nonce: a retry after a lost reply is
// answered with the session the first attempt made) until ctx ends.
func (g *SessionGroup) Create(ctx context.Context) (uint64, error) {
	select {
	case <-g.stop:
		return 0, ErrClosed
	default:
	}
	c := g.u.c
	nonce := rand.Uint64() | 1
	retry := c.newRetrier()
	for {
		conn, h, err := g.u.conn(ctx)
		if err != nil {
			return 0, err
		}
		sentAt := c.clock.Now()
		var rep wire.CreateSessionReply
		err = conn.call(ctx, wire.MCreateSession, h.Epoch, sessionRef{}, wire.CreateSessionArgs{TTL: int64(g.ttl), Nonce: nonce, NoCache: g.noCache}, &rep)
		if err == nil {
			g.add(rep.Session, &groupSession{secret: rep.Secret, expires: sentAt.Add(time.Duration(rep.TTL))})
			return rep.Session, nil
		}
		g.u.failed(conn, h.Epoch, err)
		if !retryable(err) && !errors.Is(err, ErrUnavailable) {
			return 0, err
		}
		t := c.clock.NewTimer(retry.next())
		select {
		case <-ctx.Done():
			t.Stop()
			return 0, fmt.Errorf("create session: %w", err)
		case <-t.C():
		}
	}
}

func (g *SessionGroup) add(id uint64, s *groupSession) {
	g.mu.Lock()
	g.sessions[id] = s
	first := len(g.sessions) == 1
	g.mu.Unlock()
	if first {
		select {
		case g.wake <- struct{}{}:
		default:
		}
	}
}

// Len is the number of the group's sessions that have not ended.
func (g *SessionGroup) Len() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.sessions)
}

// Lost is the number of the group's sessions that ended without Close: the
// master expired them, or no renewal reached the group before their local
// lease and grace period ran out.
func (g *SessionGroup) Lost() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.lost
}

// renewLoop keeps a KeepAliveMany (one per wire.MaxKeepAliveMany
// sessions) parked on the master for every session of the group, sending
// the next as soon as the last is answered. After a failure it looks for
// the master (with jittered backoff, never longer than a quarter of the
// TTL) and asks it to answer at once.
func (g *SessionGroup) renewLoop() {
	defer close(g.done)
	c := g.u.c
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-g.stop:
			cancel()
		case <-g.done:
		}
	}()
	retry := c.newRenewalRetrier(g.ttl)
	urgent := true
	for {
		batches := g.due(c.clock.Now(), urgent)
		if len(batches) == 0 {
			select {
			case <-g.wake:
				continue
			case <-g.stop:
				return
			}
		}
		conn, h, err := g.u.conn(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			continue
		}
		if err := g.renew(ctx, conn, h.Epoch, batches); err != nil {
			if ctx.Err() != nil {
				return
			}
			c.log.Debug("session group: renewal failed", "err", err)
			g.u.failed(conn, h.Epoch, err)
			if !retryable(err) {
				c.dropConn(conn) // no answer in time: look for the master again
			}
			urgent = true
			t := c.clock.NewTimer(retry.next())
			select {
			case <-t.C():
			case <-g.stop:
				t.Stop()
				return
			}
			continue
		}
		retry.reset()
		urgent = false
	}
}

// due drops the sessions whose local lease and grace period have passed
// (lost) and returns the KeepAlive entries of the others, in batches a
// KeepAliveMany may carry.
func (g *SessionGroup) due(now time.Time, urgent bool) [][]wire.KeepAliveEntry {
	g.mu.Lock()
	defer g.mu.Unlock()
	var batches [][]wire.KeepAliveEntry
	var b []wire.KeepAliveEntry
	for id, s := range g.sessions {
		if now.After(s.expires.Add(g.grace)) {
			delete(g.sessions, id)
			g.lost++
			continue
		}
		if len(b) == wire.MaxKeepAliveMany {
			batches = append(batches, b)
			b = nil
		}
		b = append(b, wire.KeepAliveEntry{Session: id, Secret: s.secret, Urgent: urgent, AckInval: s.ackInval})
	}
	if len(b) > 0 {
		batches = append(batches, b)
	}
	return batches
}

// renew sends the batches to the master of epoch on conn, all at once, and
// applies the answers. It fails with the first call's error; a call gets
// no answer after the TTL (the master holds it a fifth of that) fails too.
func (g *SessionGroup) renew(ctx context.Context, conn *rpcConn, epoch uint64, batches [][]wire.KeepAliveEntry) error {
	clock := g.u.c.clock
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	timeout := clock.NewTimer(g.ttl)
	defer timeout.Stop()
	go func() {
		select {
		case <-timeout.C():
			cancel()
		case <-ctx.Done():
		}
	}()
	sentAt := clock.Now()
	errs := make([]error, len(batches))
	var wg sync.WaitGroup
	for i, b := range batches {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var rep wire.KeepAliveManyReply
			errs[i] = conn.call(ctx, wire.MKeepAliveMany, epoch, sessionRef{}, wire.KeepAliveManyArgs{Sessions: b}, &rep)
			if errs[i] == nil {
				g.renewed(sentAt, &rep)
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// renewed applies a KeepAliveMany's answers: a renewed lease counts from
// when the call was sent; a session the master says has expired is lost.
// Sessions the reply left out were renewed but not answered: the next call
// carries them again.
func (g *SessionGroup) renewed(sentAt time.Time, rep *wire.KeepAliveManyReply) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, r := range rep.Sessions {
		s := g.sessions[r.Session]
		if s == nil {
			continue
		}
		err := r.Err()
		switch {
		case err == nil:
			s.expires = sentAt.Add(time.Duration(r.Reply.TTL))
			s.ackInval = r.Reply.InvalSeq
		case errors.Is(err, ErrSessionExpired):
			delete(g.sessions, r.Session)
			g.lost++
		default:
			g.u.c.log.Debug("session group: a session's renewal refused", "session", r.Session, "err", err)
		}
	}
}

// Close stops renewing, closes every session of the group on the master
// (a few at a time; a session it cannot close in ctx expires after its
// TTL) and the connection.
func (g *SessionGroup) Close(ctx context.Context) error {
	g.closed.Do(func() { close(g.stop) })
	<-g.done
	g.mu.Lock()
	ids := make([]uint64, 0, len(g.sessions))
	secrets := make([][]byte, 0, len(g.sessions))
	for id, s := range g.sessions {
		ids = append(ids, id)
		secrets = append(secrets, s.secret)
	}
	g.sessions = map[uint64]*groupSession{}
	g.mu.Unlock()
	const parallel = 32
	sem := make(chan struct{}, parallel)
	errs := make([]error, len(ids))
	var wg sync.WaitGroup
	for i, id := range ids {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			errs[i] = g.closeOne(ctx, id, secrets[i])
		}()
	}
	wg.Wait()
	g.u.Close()
	return errors.Join(errs...)
}

// closeOne ends one session on the master: its only numbered call.
func (g *SessionGroup) closeOne(ctx context.Context, id uint64, secret []byte) error {
	for {
		conn, h, err := g.u.conn(ctx)
		if err != nil {
			return err
		}
		err = conn.callNumbered(ctx, wire.MCloseSession, h.Epoch, sessionRef{id: id, secret: secret}, 1, 1, wire.Empty{}, nil)
		if err == nil || errors.Is(err, ErrSessionExpired) {
			return nil
		}
		g.u.failed(conn, h.Epoch, err)
		if !retryable(err) {
			return fmt.Errorf("close session %d: %w", id, err)
		}
	}
}
