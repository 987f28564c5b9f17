package client

// A Pool's Clients look for the master together: after a failover a
// thousand sessions sharing a connection lost it at the same moment, and
// one search (a Hello to each server) finds the new master for all of
// them, where a search each would cost the process a thousand sets of
// probes, dials and timers (at 100,000 sessions in one process, enough to
// starve it of CPU past the sessions' leases).

import (
	"context"
	"crypto/tls"
	"strings"
	"time"
)

// searchKey names a search: the servers asked, with the TLS configuration
// of the connections.
type searchKey struct {
	servers string
	tls     *tls.Config
}

// search is one search for the master; done is closed when it ends. Its
// outcome stands for the Clients that ask within helloFresh (a master
// found, while its connection is up) or notMasterFresh (none found).
type search struct {
	done chan struct{}
	at   time.Time
	res  found // res.conn is the searcher's own view
	t    *transport
	err  error
}

// findMaster is Client.findMaster for a Client of the Pool: the search
// under way for the same servers, or the outcome of one just done, or a
// search of c's own whose outcome the others then share.
func (p *Pool) findMaster(ctx context.Context, c *Client, servers []string) (found, error) {
	key := searchKey{strings.Join(servers, ","), c.cfg.TLS}
	for {
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			return found{}, errPoolClosed
		}
		s := p.searches[key]
		if s != nil {
			select {
			case <-s.done:
				if f, err, ok := p.reuseLocked(s); ok {
					p.mu.Unlock()
					if err == nil {
						c.learn(f.hello.Servers)
					}
					return f, err
				}
				s = nil // stale: search again
			default:
			}
		}
		if s != nil {
			p.mu.Unlock()
			select {
			case <-s.done:
				continue
			case <-ctx.Done():
				return found{}, ctx.Err()
			}
		}
		p.sweepLocked()
		s = &search{done: make(chan struct{})}
		p.searches[key] = s
		p.searched++
		p.mu.Unlock()
		res, err := c.probe(ctx, servers)
		p.mu.Lock()
		s.at, s.res, s.err = time.Now(), res, err
		if err == nil {
			s.t = res.conn.t
		}
		if ctx.Err() != nil && err != nil {
			// This caller gave up, the cell may not have: the next asks again.
			delete(p.searches, key)
		}
		close(s.done)
		p.mu.Unlock()
		return res, err
	}
}

// reuseLocked is the outcome of the search s that ended, for another
// Client: a view of the master's connection, or the error; ok is false
// when it no longer stands.
func (p *Pool) reuseLocked(s *search) (found, error, bool) {
	age := time.Since(s.at)
	if s.err != nil {
		return s.res, s.err, age < notMasterFresh
	}
	t := s.t
	if age >= helloFresh || t.retired || p.conns[t.key] != t {
		return found{}, nil, false
	}
	select {
	case <-t.done:
		return found{}, nil, false
	default:
	}
	t.refs++
	f := s.res
	f.conn = t.view()
	return f, nil, true
}

// sweepLocked forgets the searches and failed dials whose outcomes no
// longer stand: a long-lived process (processPool) that dials many cells
// in turn keeps no record, nor connection, of the ones it is done with.
func (p *Pool) sweepLocked() {
	for k, s := range p.searches {
		select {
		case <-s.done:
			if time.Since(s.at) >= helloFresh {
				delete(p.searches, k)
			}
		default:
		}
	}
	for k, f := range p.failed {
		if !f.stands() {
			delete(p.failed, k)
		}
	}
}
