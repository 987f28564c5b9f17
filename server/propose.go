package server

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/hashicorp/raft"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/chubby-dev/chubby/fs"
	"github.com/chubby-dev/chubby/session"
	"github.com/chubby-dev/chubby/wire"
)

// Group commit. Concurrent commands are packed into one raft log entry (a
// msgpack stream of commands), so many calls share one log write, one fsync
// and one FSM dispatch. At most maxInflight entries are in raft at once;
// commands that arrive meanwhile queue and go out together in the next entry.
// A lone command goes out at once, so an idle cell pays no batching delay.
//
// Paced by the disk (issue 13): raft writes entries to its log one append
// at a time, so an entry sent while another waits to be written only waits
// too, holding the few commands that had arrived when it was formed, while
// the commands arriving behind it wait for the entry after. With the log
// store reporting its writes (stored), the next entry is formed only once
// every entry sent has been written: it then takes everything that queued
// during that write, and goes to the log store while the entry before is
// still being applied and answered. At 64 clients this doubles the
// commands per fsync.
//
// The queue is fair between clients: each client connection's commands
// wait in a queue of their own, in order, and a batch takes one command
// from each queue in turn (the master's own commands — expiries, grants
// after a lock-delay — queue by session). A client that pipelines
// thousands of writes delays another client's write by about one batch,
// not by its whole backlog; and one that spreads its calls over thousands
// of sessions on a few connections (issue 17: 50,000 sessions, a blocking
// Acquire each, on 50 connections) gets a few queues, not thousands, so it
// cannot push another client's call back by thousands of turns.
const (
	maxInflight   = 2
	maxBatchCmds  = 512
	maxBatchBytes = 1 << 20
	applyTimeout  = 10 * time.Second
)

// queueKey names a queue of the proposer: a client connection's (conn set)
// or, for the master's own commands, a session's (session 0: the master's
// commands for no session).
type queueKey struct{ conn, session uint64 }

type proposal struct {
	queue queueKey // whose queue it waits in
	enc   []byte
	res   *fs.Result
	err   error
	done  chan struct{}
}

// proposer replicates commands through a raft log (raftApplier) in
// batches; it knows nothing of what the commands mean.
type proposer struct {
	raft    raftApplier
	clock   session.Clock
	latency prometheus.Observer // propose to applied
	batches prometheus.Observer // commands per entry

	mu sync.Mutex
	// queues holds each queue's waiting proposals in order; turn lists
	// the queues with some, in the order batches visit them.
	queues   map[queueKey][]*proposal
	turn     []queueKey
	inflight int
	// paced: entries are sent only when the log store has written every
	// entry sent before (sent == written); see stored.
	paced         bool
	sent, written uint64
}

// raftApplier appends an entry to the replicated log (a *raft.Raft); the
// future's Response is the FSM's answer, one *fs.Result per command.
type raftApplier interface {
	Apply(cmd []byte, timeout time.Duration) raft.ApplyFuture
}

func newProposer(r raftApplier, clock session.Clock, latency, batches prometheus.Observer) *proposer {
	return &proposer{raft: r, clock: clock, latency: latency, batches: batches, queues: map[queueKey][]*proposal{}}
}

// pace makes the proposer wait for the log store (stored) before sending
// an entry behind one not yet written. Call before the first proposal.
func (q *proposer) pace() { q.paced = true }

// stored is called by the raft log store after it wrote n command entries
// (raft.LogCommand: on the leader, only the proposer's). If commands wait
// and nothing sent is left unwritten, the next entry goes out now.
// Entries written on a follower, where nothing was sent, count for
// nothing.
func (q *proposer) stored(n int) {
	if !q.paced || n == 0 {
		return
	}
	q.mu.Lock()
	q.written = min(q.written+uint64(n), q.sent)
	start := len(q.turn) > 0 && q.inflight < maxInflight && q.written == q.sent
	if start {
		q.inflight++
	}
	q.mu.Unlock()
	if start {
		go q.flush(nil)
	}
}

// mayFormLocked reports whether the caller's flush (counted in inflight)
// may form and send the next entry now: unpaced, or every entry sent has
// been written. An entry that will never be written (its Apply failed when
// leadership was lost before the log write) stops counting once no other
// flush runs, for then nothing of ours is in raft: no write will come to
// report it, least of all on a new term's leader, which writes no command
// until this one.
func (q *proposer) mayFormLocked() bool {
	if !q.paced || q.written == q.sent {
		return true
	}
	if q.inflight == 1 { // only the caller's flush: nothing is in raft
		q.written = q.sent
		return true
	}
	return false
}

// propose stamps cmd with the master's clock, replicates it and returns the
// applied result. The error is non-nil only when the command may not have
// been applied (not leader, shutdown, timeout). It waits in the queue of
// cmd's session: for the master's own commands.
func (q *proposer) propose(cmd *fs.Command) (*fs.Result, error) {
	return q.proposeIn(queueKey{session: cmd.Session}, cmd)
}

// proposeIn is propose with cmd waiting in queue key.
func (q *proposer) proposeIn(key queueKey, cmd *fs.Command) (*fs.Result, error) {
	cmd.Now = q.clock.Now().UnixNano()
	b, err := cmd.Encode()
	if err != nil {
		return nil, err
	}
	start := time.Now()
	p := &proposal{queue: key, enc: b, done: make(chan struct{})}
	if q.enqueue(p) {
		q.flush(p.done)
	}
	<-p.done
	if p.err != nil {
		return nil, p.err
	}
	q.latency.Observe(time.Since(start).Seconds())
	return p.res, nil
}

func (q *proposer) submit(p *proposal) {
	if q.enqueue(p) {
		go q.flush(nil)
	}
}

// enqueue queues p and reports whether a flush must start for it (fewer
// than maxInflight entries were in flight); the caller then runs it.
func (q *proposer) enqueue(p *proposal) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.queues[p.queue]) == 0 {
		q.turn = append(q.turn, p.queue)
	}
	q.queues[p.queue] = append(q.queues[p.queue], p)
	if q.inflight >= maxInflight {
		return false
	}
	q.inflight++ // the flush the caller would run, counted as mayFormLocked expects
	if !q.mayFormLocked() {
		q.inflight--
		return false
	}
	return true
}

// flush sends queued commands as batches until the queue is empty. With
// own set it runs on the goroutine of the call that started it and stops
// once own is closed (that call's command applied), handing what is left
// to a goroutine of its own: a lone write thus goes from its handler to
// raft and back without a goroutine hand-off on either side, and a caller
// never waits for other callers' batches after its own.
func (q *proposer) flush(own <-chan struct{}) {
	for {
		q.mu.Lock()
		if len(q.turn) == 0 {
			q.inflight--
			q.mu.Unlock()
			return
		}
		if own != nil && isClosed(own) {
			q.mu.Unlock()
			go q.flush(nil) // the in-flight slot goes with it
			return
		}
		if !q.mayFormLocked() { // stored starts the next flush
			q.inflight--
			q.mu.Unlock()
			return
		}
		batch, size := q.takeBatchLocked()
		q.sent++
		q.mu.Unlock()
		q.apply(batch, size)
	}
}

func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// takeBatchLocked takes the next batch: one proposal from each queue in
// turn, round after round, up to maxBatchCmds and maxBatchBytes (one at
// least). A queue keeps its place in the turn while it has more.
func (q *proposer) takeBatchLocked() ([]*proposal, int) {
	var batch []*proposal
	size := 0
	for len(q.turn) > 0 && len(batch) < maxBatchCmds {
		s := q.turn[0]
		p := q.queues[s][0]
		if len(batch) > 0 && size+len(p.enc) > maxBatchBytes {
			break
		}
		batch, size = append(batch, p), size+len(p.enc)
		q.queues[s][0] = nil // taken: no reference left in the queue
		q.turn = q.turn[1:]
		if rest := q.queues[s][1:]; len(rest) > 0 {
			q.queues[s] = rest
			q.turn = append(q.turn, s) // its next proposal waits for everyone else's
		} else {
			delete(q.queues, s)
		}
	}
	if len(q.turn) == 0 {
		q.turn = nil
	}
	return batch, size
}

func (q *proposer) apply(batch []*proposal, size int) {
	defer func() {
		for _, p := range batch {
			close(p.done)
		}
	}()
	entry := make([]byte, 0, size)
	for _, p := range batch {
		entry = append(entry, p.enc...)
	}
	q.batches.Observe(float64(len(batch)))
	f := q.raft.Apply(entry, applyTimeout)
	if err := f.Error(); err != nil {
		switch {
		case errors.Is(err, raft.ErrNotLeader), errors.Is(err, raft.ErrLeadershipLost), errors.Is(err, raft.ErrLeadershipTransferInProgress):
			err = fmt.Errorf("%w: %v", wire.ErrNotMaster, err)
		default:
			err = fmt.Errorf("%w: %v", wire.ErrUnavailable, err)
		}
		for _, p := range batch {
			p.err = err
		}
		return
	}
	results, ok := f.Response().([]*fs.Result)
	if !ok || len(results) != len(batch) {
		err := fmt.Errorf("%w: unexpected apply response %T", wire.ErrUnavailable, f.Response())
		if r, isRes := f.Response().(*fs.Result); isRes && r.Err != nil {
			err = r.Err
		}
		for _, p := range batch {
			p.err = err
		}
		return
	}
	for i, p := range batch {
		p.res = results[i]
	}
}

// writePaths are the paths whose cached entries a command may change: the
// node, and its parent directory's listing and stat when nodes come or go;
// for the end of a session, every node it held a lock on or owned; for an
// ACL file (a child of /ls/<cell>/acl), everyPath as well.
func (s *Server) writePaths(cmd *fs.Command) []string {
	withParent := func(p string) []string {
		if dir, _ := fs.Split(p); dir != "" {
			return []string{p, dir}
		}
		return []string{p}
	}
	// An ACL file's edit may revoke any read: every cached path.
	aclDir := fs.Root(s.cfg.Cell) + "/" + fs.ACLDirName
	aclFile := func(p string) bool { dir, _ := fs.Split(p); return dir == aclDir }
	switch cmd.Op {
	case fs.OpCreate, fs.OpSetContents, fs.OpDelete:
		if fs.CheckPath(s.cfg.Cell, cmd.Path()) != nil || cmd.Path() == fs.Root(s.cfg.Cell) {
			return []string{cmd.Path()}
		}
		if aclFile(cmd.Path()) {
			return append(withParent(cmd.Path()), everyPath)
		}
		return withParent(cmd.Path())
	case fs.OpAcquire, fs.OpRelease, fs.OpCancelWait, fs.OpGrantDelayed, fs.OpSetACL:
		return []string{cmd.Path()}
	case fs.OpEndSession:
		var paths []string
		s.fsm.read(func(st *fs.State) { paths = st.SessionPaths(cmd.Session) })
		var out []string
		for _, p := range paths {
			out = append(out, withParent(p)...)
			if aclFile(p) { // an ephemeral ACL file goes with the session
				out = append(out, everyPath)
			}
		}
		return out
	}
	return nil
}

// proposeWrite runs the invalidation protocol for cmd's paths and proposes
// it on behalf of the session cmd.Session, in that session's queue: for
// the master's own commands.
func (s *Server) proposeWrite(cmd *fs.Command) (*fs.Result, error) {
	return s.proposeWriteIn(queueKey{session: cmd.Session}, cmd)
}

// proposeWriteIn is proposeWrite with cmd waiting in queue key.
func (s *Server) proposeWriteIn(key queueKey, cmd *fs.Command) (*fs.Result, error) {
	release, err := s.tracker.beforeWrite(cmd.Session, s.writePaths(cmd))
	defer release()
	if err != nil {
		return nil, err
	}
	return s.proposer.proposeIn(key, cmd)
}
