package proxy

// The proxy's own cache (Chubby §3.1): it answers its clients' uncached
// reads (GetContents and GetStat without Cache) from the cache of a
// session of its own, which the master counts among each node's cachers
// and invalidates before any write of the node commits, exactly as it
// would a client's. A read answered from it is therefore as fresh as one
// from the master (DESIGN invariant 5), and a thousand clients reading a
// file after it changed cost the master one read per proxy, not a thousand.
//
// A client's caching reads (Cache set) are forwarded: the client's session
// must itself be a cacher of the node to be invalidated. Every read the
// proxy answers itself is of a session it has seen renewed, with the same
// secret, within the lease the master granted that renewal; any other goes
// to the master, which refuses it if it must. Without TLS (the only way a
// proxy runs) every session has the one anonymous principal, so what the
// proxy's session may read, its clients may.

import (
	"context"
	"crypto/subtle"
	"sync"
	"sync/atomic"
	"time"

	"github.com/chubby-dev/chubby/client"
	"github.com/chubby-dev/chubby/session"
	"github.com/chubby-dev/chubby/wire"
)

// cachedReadTimeout bounds a miss the proxy fills with its own session's
// read before it gives up and forwards the client's.
const cachedReadTimeout = 2 * time.Second

// renewedSession is what the proxy knows of a client's session: its
// secret, and when the lease the master last granted it through this
// proxy ends at the latest.
type renewedSession struct {
	secret []byte
	until  time.Time
}

// readCache is the proxy's cache and what it needs to serve from it.
type readCache struct {
	cfg   client.Config // the proxy's own session's
	clock session.Clock

	ctx    context.Context // ends at close
	cancel context.CancelFunc
	wg     sync.WaitGroup // a dial in the background

	mu       sync.Mutex
	sessions map[uint64]renewedSession
	sweepAt  int            // size of sessions at which lapsed ones are dropped
	cacher   *client.Client // nil until dialled, or after it expired
	dialling bool
	// reading holds the reads of the proxy's session under way, by
	// method and path: a read of the same waits for it to fill the cache
	// rather than make the master answer a crowd after each write.
	reading map[readKey]chan struct{}

	hits, forwarded atomic.Uint64
}

// newReadCache starts the proxy's cache, its session dialled within ctx
// (or, failing that, in the background).
func newReadCache(ctx context.Context, cfg client.Config, clock session.Clock) *readCache {
	rc := &readCache{cfg: cfg, clock: clock, sessions: map[uint64]renewedSession{}, reading: map[readKey]chan struct{}{}, dialling: true}
	rc.ctx, rc.cancel = context.WithCancel(context.Background())
	rc.dial(ctx)
	return rc
}

// renewed records a KeepAlive of the client's session sent at sentAt and
// answered (rep) or refused (err): a refusal forgets the session.
func (rc *readCache) renewed(id uint64, secret []byte, sentAt time.Time, rep wire.KeepAliveReply, err error) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if err != nil || rep.TTL <= 0 {
		delete(rc.sessions, id)
		return
	}
	rc.sessions[id] = renewedSession{secret: append([]byte(nil), secret...), until: sentAt.Add(time.Duration(rep.TTL))}
	if len(rc.sessions) >= rc.sweepAt {
		// Sessions that went elsewhere or ended stop renewing here:
		// drop those whose lease is over, at most once per doubling.
		now := rc.clock.Now()
		for id, s := range rc.sessions {
			if !now.Before(s.until) {
				delete(rc.sessions, id)
			}
		}
		rc.sweepAt = 2*len(rc.sessions) + 1024
	}
}

// created records a session created through the proxy (body is the
// master's CreateSessionReply to a call sent at sentAt): its first
// KeepAlive is parked for a hold, and its reads need not wait for it.
func (rc *readCache) created(sentAt time.Time, body []byte) {
	var rep wire.CreateSessionReply
	if wire.Unmarshal(body, &rep) == nil {
		rc.renewed(rep.Session, rep.Secret, sentAt, wire.KeepAliveReply{TTL: rep.TTL}, nil)
	}
}

// forget drops a session (it is being closed).
func (rc *readCache) forget(id uint64) {
	rc.mu.Lock()
	delete(rc.sessions, id)
	rc.mu.Unlock()
}

// vouched reports whether req's session is one the proxy saw renewed with
// req's secret, and its lease is not over.
func (rc *readCache) vouched(req *wire.Request) bool {
	rc.mu.Lock()
	s, ok := rc.sessions[req.Session]
	rc.mu.Unlock()
	return ok && subtle.ConstantTimeCompare(s.secret, req.Secret) == 1 && rc.clock.Now().Before(s.until)
}

// session is the proxy's own session, or nil while there is none; when
// the last one ended it starts dialling another.
func (rc *readCache) session() *client.Client {
	rc.mu.Lock()
	c := rc.cacher
	var ended *client.Client
	if c != nil {
		select {
		case <-c.Done(): // expired: the cache it held is gone with it
			rc.cacher, ended, c = nil, c, nil
		default:
		}
	}
	if c == nil && !rc.dialling && rc.ctx.Err() == nil {
		rc.dialling = true
		rc.wg.Add(1)
		go func() {
			defer rc.wg.Done()
			rc.dial(rc.ctx)
		}()
	}
	rc.mu.Unlock()
	if ended != nil {
		ended.Close()
	}
	return c
}

// dial creates the proxy's session, trying until ctx ends. It runs only
// while there is none (dialling guards it).
func (rc *readCache) dial(ctx context.Context) {
	c, err := client.Dial(ctx, rc.cfg)
	rc.mu.Lock()
	rc.dialling = false
	closed := rc.ctx.Err() != nil
	if err == nil && !closed {
		rc.cacher = c
	}
	rc.mu.Unlock()
	switch {
	case err != nil && !closed:
		rc.cfg.Logger.Warn("no session of the proxy's own: reads go to the master", "err", err)
	case err == nil && closed: // closed meanwhile
		c.Close()
	}
}

// close ends the proxy's session; no other is dialled after it.
func (rc *readCache) close() {
	rc.cancel()
	rc.wg.Wait()
	rc.mu.Lock()
	c := rc.cacher
	rc.cacher = nil
	rc.mu.Unlock()
	if c != nil {
		c.Close()
	}
}

// answer answers req (an uncached GetContents or GetStat) from the
// proxy's cache, and reports false when it cannot: the caller forwards
// it. Anything out of the ordinary (an unknown session, another epoch
// than the proxy's session's, another instance than the cached one, an
// error) is the master's to answer.
func (rc *readCache) answer(ctx context.Context, req *wire.Request) ([]byte, bool) {
	var a wire.NodeArgs
	if wire.Unmarshal(req.Body, &a) != nil || a.Cache || a.After != "" {
		return nil, false // the master's: a client that caches, or a bad call
	}
	if !rc.vouched(req) {
		return nil, rc.miss()
	}
	c := rc.session()
	if c == nil || c.Session().Epoch != req.Epoch {
		return nil, rc.miss()
	}
	ctx, cancel := context.WithTimeout(ctx, cachedReadTimeout)
	defer cancel()
	data, st, err := rc.read(ctx, c, req.Method, a.Path)
	if err != nil || (a.Instance != 0 && st.Instance != a.Instance) {
		return nil, rc.miss()
	}
	var rep any = wire.StatReply{Stat: st}
	if req.Method == wire.MGetContents {
		rep = wire.ContentsReply{Data: data, Stat: st}
	}
	body, err := wire.Marshal(rep)
	if err != nil {
		return nil, rc.miss()
	}
	rc.hits.Add(1)
	return body, true
}

type readKey struct {
	m    wire.Method
	path string
}

// read is c.CachedRead, one at a time for each method and path.
func (rc *readCache) read(ctx context.Context, c *client.Client, m wire.Method, path string) ([]byte, client.Stat, error) {
	k := readKey{m, path}
	for {
		rc.mu.Lock()
		busy := rc.reading[k]
		if busy == nil {
			done := make(chan struct{})
			rc.reading[k] = done
			rc.mu.Unlock()
			defer func() {
				rc.mu.Lock()
				delete(rc.reading, k)
				rc.mu.Unlock()
				close(done)
			}()
			return c.CachedRead(ctx, m, path)
		}
		rc.mu.Unlock()
		select {
		case <-busy:
		case <-ctx.Done():
			return nil, client.Stat{}, ctx.Err()
		}
	}
}

func (rc *readCache) miss() bool {
	rc.forwarded.Add(1)
	return false
}
