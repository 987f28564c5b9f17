package election

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/chubby-dev/chubby/client"
	"github.com/chubby-dev/chubby/fs"
)

// RecordName is the name of the leader's record in the election directory.
const RecordName = "leader"

// MaxValue is the largest value a leader can publish: the record holds the
// sequencer too, within the cell's limit on contents.
const MaxValue = fs.MaxContents - 1024

var (
	// ErrNoLeader: nobody leads the election now.
	ErrNoLeader = errors.New("no leader")
	// ErrNotLeader: Proclaim without a term that still leads.
	ErrNotLeader = errors.New("not the leader")
	// ErrLeading: Campaign while this Election's term still leads, or
	// while another Campaign of it is under way.
	ErrLeading = errors.New("already leading or campaigning")
)

// Election is one session's part in the election held on a directory. It
// is safe for concurrent use; each session (Client) campaigns through its
// own Election.
type Election struct {
	c        *client.Client
	dir, rec string
	lockOpts []client.LockOption

	mu          sync.Mutex
	term        *Term // the last term won and not resigned
	campaigning bool  // a Campaign is under way
}

// Option modifies New.
type Option func(*Election)

// LockDelay sets the lock-delay of the election's lock (client.LockDelay):
// when a leader's session expires, nobody else can lead for d. Without it
// the client's Config.LockDelay applies.
func LockDelay(d time.Duration) Option { return LockOptions(client.LockDelay(d)) }

// LockOptions adds options to the Acquire of the election's lock.
func LockOptions(opts ...client.LockOption) Option {
	return func(e *Election) { e.lockOpts = append(e.lockOpts, opts...) }
}

// New returns the Election of c's session on the directory dir (created by
// the first Campaign or Observe if missing; its parent must exist).
func New(c *client.Client, dir string, opts ...Option) *Election {
	e := &Election{c: c, dir: dir, rec: dir + "/" + RecordName}
	for _, o := range opts {
		o(e)
	}
	return e
}

// Dir is the election's directory.
func (e *Election) Dir() string { return e.dir }

// Leader is a leader as the election's record names it.
type Leader struct {
	Value     []byte
	Sequencer client.Sequencer
}

// Term is one leadership of an Election, from the Campaign that won it to
// the moment it may be lost.
type Term struct {
	e     *Election
	seq   client.Sequencer
	lock  *client.Handle // the directory, its lock held
	ctx   context.Context
	mu    sync.Mutex
	rec   *client.Handle // the record, while published
	gen   uint64         // the record's content generation
	value []byte
}

// Sequencer is the term's fencing token: the election lock's sequencer.
// Writes made as leader should carry it (client.WithSequencer for the
// cell, client/fence for a downstream store), so that a leader that lost
// its term without knowing (a long pause) is refused.
func (t *Term) Sequencer() client.Sequencer { return t.seq }

// Value is the value the term published last.
func (t *Term) Value() []byte {
	t.mu.Lock()
	defer t.mu.Unlock()
	return bytes.Clone(t.value)
}

// Done is closed the moment leadership may be lost: the session's local
// lease ran out (jeopardy), the session ended, or the term resigned. The
// leader must stop acting as leader then; Err says by when at the latest.
// The term is over for good. If the session comes back from jeopardy it
// still holds the lock and the record, keeping others out, until Resign —
// or Campaign, which resigns a lost term first and queues again (as an etcd
// leader's key stays until it resigns or its lease ends). Only Resign, or
// the session's end, gives the lock up: never the library on its own.
func (t *Term) Done() <-chan struct{} { return t.ctx.Done() }

// Context is a context done when Done is closed; its context.Cause is Err.
func (t *Term) Context() context.Context { return t.ctx }

// Err is nil while the term leads and, once Done is closed, a
// *client.LockLostError whose StopBy is the latest moment (on the client's
// clock) the leader may still act: until then nobody else can lead.
func (t *Term) Err() error {
	if t.ctx.Err() == nil {
		return nil
	}
	return context.Cause(t.ctx)
}

// Campaign blocks until this session leads the election or ctx ends. The
// master queues the campaigners on the directory's lock and grants it in
// order, without polling. The winner publishes value in the election's
// record — an ephemeral file, created only while the lock is held
// (client.CreateFenced) and deleted with the session — and gets the term.
//
// A Campaign while a term of this Election still leads fails with
// ErrLeading. A term that was lost (Done closed) is resigned first: its
// record deleted and its lock released, if the session still has them.
func (e *Election) Campaign(ctx context.Context, value []byte) (*Term, error) {
	if len(value) > MaxValue {
		return nil, fmt.Errorf("campaign %s: %w: a value of %d bytes (limit %d)", e.dir, client.ErrTooLarge, len(value), MaxValue)
	}
	e.mu.Lock()
	old := e.term
	if e.campaigning || (old != nil && old.ctx.Err() == nil) {
		e.mu.Unlock()
		return nil, fmt.Errorf("campaign %s: %w", e.dir, ErrLeading)
	}
	e.term, e.campaigning = nil, true
	e.mu.Unlock()
	defer func() {
		e.mu.Lock()
		e.campaigning = false
		e.mu.Unlock()
	}()
	if old != nil {
		if err := old.resign(ctx); err != nil && !errors.Is(err, ErrNotLeader) {
			return nil, fmt.Errorf("campaign %s: resigning the lost term: %w", e.dir, err)
		}
	}
	dh, err := e.openDir(ctx)
	if err != nil {
		return nil, fmt.Errorf("campaign: %w", err)
	}
	if err := dh.Acquire(ctx, client.Exclusive, e.lockOpts...); err != nil {
		dh.Close()
		return nil, fmt.Errorf("campaign: %w", err)
	}
	seq, err := dh.Sequencer()
	if err != nil { // released by Close meanwhile
		dh.Close()
		return nil, fmt.Errorf("campaign: %w", err)
	}
	t := &Term{e: e, seq: seq, lock: dh, ctx: dh.LockContext(), value: bytes.Clone(value)}
	if err := t.publish(ctx); err != nil {
		cctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		t.resign(cctx)
		cancel()
		return nil, fmt.Errorf("campaign %s: publishing the record: %w", e.dir, err)
	}
	e.mu.Lock()
	e.term = t
	e.mu.Unlock()
	return t, nil
}

// openDir opens the election's directory, creating it if missing (an Open
// of an existing node is a read; a creating one is a write). The session
// does not cache the directory: every grant and release of its lock
// changes its stat, and a cached copy in each campaigner and observer would
// have to be invalidated first. A file there is refused (client.ErrNotDir)
// before anything is locked.
func (e *Election) openDir(ctx context.Context, opts ...client.OpenOption) (*client.Handle, error) {
	opts = append(opts, client.NoCache())
	h, err := e.c.Open(ctx, e.dir, opts...)
	if errors.Is(err, client.ErrNoSuchNode) {
		h, err = e.c.Open(ctx, e.dir, append(opts, client.CreateDir())...)
	}
	if err != nil {
		return nil, err
	}
	if !h.IsDir() {
		h.Close()
		return nil, fmt.Errorf("%w: the election %s is a file; an election is a directory", client.ErrNotDir, e.dir)
	}
	return h, nil
}

// publish creates the record, fenced by the term's sequencer. A record
// already there can only be one this session left from an earlier term
// (lost at jeopardy, then safe again): a record is created only by the
// lock's holder and deleted before its lock is released or with its
// session. It is deleted (fenced too) and the create tried again.
func (t *Term) publish(ctx context.Context) error {
	data := encodeRecord(t.seq, t.value)
	for attempt := 0; ; attempt++ {
		h, err := t.e.c.Open(ctx, t.e.rec, client.Ephemeral(), client.FailIfExists(),
			client.InitialContents(data), client.CreateFenced(t.seq))
		if err == nil {
			t.mu.Lock()
			t.rec, t.gen = h, h.Instance() // a new file's content generation is its instance
			t.mu.Unlock()
			return nil
		}
		if !errors.Is(err, client.ErrExists) || attempt == 3 {
			return err
		}
		old, err := t.e.c.Open(ctx, t.e.rec)
		if errors.Is(err, client.ErrNoSuchNode) {
			continue
		}
		if err != nil {
			return err
		}
		if err := old.Delete(ctx, client.WithSequencer(t.seq)); err != nil && !gone(err) {
			return err
		}
	}
}

// gone: the node was deleted (or replaced) already.
func gone(err error) bool {
	return errors.Is(err, client.ErrNoSuchNode) || errors.Is(err, client.ErrStaleHandle)
}

// Proclaim publishes a new value for the current term: a compare-and-set
// on the record's content generation, fenced by the term's sequencer, so it
// fails (ErrNotLeader, client.ErrBadSequencer) once leadership moved.
func (e *Election) Proclaim(ctx context.Context, value []byte) error {
	if len(value) > MaxValue {
		return fmt.Errorf("proclaim %s: %w: a value of %d bytes (limit %d)", e.dir, client.ErrTooLarge, len(value), MaxValue)
	}
	e.mu.Lock()
	t := e.term
	e.mu.Unlock()
	if t == nil || t.ctx.Err() != nil {
		return fmt.Errorf("proclaim %s: %w", e.dir, ErrNotLeader)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	st, err := t.rec.SetContentsIf(ctx, encodeRecord(t.seq, value), t.gen, client.WithSequencer(t.seq))
	if err != nil {
		return fmt.Errorf("proclaim %s: %w", e.dir, err)
	}
	t.gen, t.value = st.ContentGen, bytes.Clone(value)
	return nil
}

// Resign ends this Election's term, if any: it deletes the record and
// releases the lock, both at once (the cell commits them together), so the
// next campaigner in line leads as soon as they commit. Resign without a
// term returns nil. If the term had ended already on the cell (the session
// expired, or its lock moved on) Resign says so with an error wrapping
// ErrNotLeader: whatever the leader did since without a fenced write is
// suspect.
//
// If the record cannot be deleted (ctx ended, the cell unreachable) Resign
// returns the error, and the record may outlive the term until the session
// ends or the next leader replaces it: Leader may name this leader until
// then, with a sequencer no longer valid. Call Resign again, or close the
// client.
func (e *Election) Resign(ctx context.Context) error {
	e.mu.Lock()
	t := e.term
	e.mu.Unlock()
	if t == nil {
		return nil
	}
	err := t.resign(ctx)
	e.mu.Lock()
	if e.term == t && (err == nil || errors.Is(err, ErrNotLeader)) { // otherwise Resign again retries
		e.term = nil
	}
	e.mu.Unlock()
	if err != nil {
		return fmt.Errorf("resign %s: %w", e.dir, err)
	}
	return nil
}

// resign deletes the term's record and releases its lock, in parallel:
// the delete needs no fence (the handle names this term's record only), so
// it commits whichever of the two the master applies first. A next leader
// whose create meets the record still there deletes it itself (publish).
func (t *Term) resign(ctx context.Context) error {
	t.mu.Lock()
	rec := t.rec
	t.mu.Unlock()
	delErr := make(chan error, 1)
	if rec != nil {
		go func() { delErr <- rec.Delete(ctx) }()
	} else {
		delErr <- nil
	}
	relErr := t.lock.Release(ctx)
	if err := <-delErr; err != nil && !gone(err) && !lockGone(err) {
		return err
	}
	t.mu.Lock()
	t.rec = nil
	t.mu.Unlock()
	t.lock.Close()
	switch {
	case relErr == nil:
		return nil
	case lockGone(relErr):
		return fmt.Errorf("%w: the term had ended already: %v", ErrNotLeader, relErr)
	}
	return relErr
}

// lockGone: the lock is no longer this session's, so neither is the record
// (the session ended, or the lock moved on with it).
func lockGone(err error) bool {
	return errors.Is(err, client.ErrNotHeld) || errors.Is(err, client.ErrSessionExpired) ||
		errors.Is(err, client.ErrBadSequencer) || errors.Is(err, client.ErrClosed)
}

// Leader returns the current leader's value and sequencer, or ErrNoLeader.
// It reads the record through the session's cache: while the local lease is
// valid a repeated call costs no round trip, and the cell invalidates the
// cached record before any change to it commits.
func (e *Election) Leader(ctx context.Context) (Leader, error) {
	return e.leader(ctx)
}

// leader reads the record, with opts for its Open (NoCache: from the cell).
func (e *Election) leader(ctx context.Context, opts ...client.OpenOption) (Leader, error) {
	for {
		h, err := e.c.Open(ctx, e.rec, opts...)
		if errors.Is(err, client.ErrNoSuchNode) {
			return Leader{}, fmt.Errorf("%s: %w", e.dir, ErrNoLeader)
		}
		if err != nil {
			return Leader{}, err
		}
		data, _, err := h.GetContentsAndStat(ctx)
		if gone(err) {
			continue // replaced under us: read the new one
		}
		if err != nil {
			return Leader{}, err
		}
		return decodeRecord(data)
	}
}

// Observe returns a channel that receives the leader as it is now and then
// each time it changes, until ctx ends or the session ends (it is then
// closed). A zero Leader (no Sequencer) says nobody leads. Changes come from
// the cell's events on the election directory (no polling), each followed
// by a read of the record; a reader that falls behind gets the latest
// leader, not every one in between. Observe reads the record from the
// cell, not the cache: an observer never caches it, so a leader change
// waits for no observer's cache to be invalidated, however many there are.
//
// An observer costs the master a watch: between leader changes, no more
// than an idle session; at a change, one event and one read.
func (e *Election) Observe(ctx context.Context) <-chan Leader {
	out := make(chan Leader)
	go e.observe(ctx, out)
	return out
}

func (e *Election) observe(ctx context.Context, out chan<- Leader) {
	defer close(out)
	kick := make(chan struct{}, 1)
	poke := func() {
		select {
		case kick <- struct{}{}:
		default:
		}
	}
	stop := e.c.Subscribe(func(ev client.Event) {
		switch ev.Type {
		case client.EventChildAdded, client.EventChildRemoved, client.EventChildModified:
			if ev.Path == e.rec {
				poke()
			}
		case client.EventHandleInvalid:
			if ev.Path == e.dir {
				poke()
			}
		case client.EventMasterFailover, client.EventSafe, client.EventExpired:
			poke()
		}
	})
	defer stop()
	var dh *client.Handle
	defer func() {
		if dh != nil {
			dh.Close()
		}
	}()
	var last Leader
	sent := false
	retry := time.NewTimer(time.Hour)
	retry.Stop()
	defer retry.Stop()
	backoff := 10 * time.Millisecond
	for {
		var err error
		if dh == nil {
			dh, err = e.openDir(ctx, client.WithEvents(client.EventChildAdded, client.EventChildRemoved, client.EventChildModified))
			if err != nil {
				dh = nil
			}
		}
		var l Leader
		if err == nil {
			l, err = e.leader(ctx, client.NoCache())
			if errors.Is(err, ErrNoLeader) {
				l, err = Leader{}, nil
			}
		}
		switch {
		case err == nil:
			backoff = 10 * time.Millisecond
			if !sent || !same(l, last) {
				select {
				case out <- l:
				case <-ctx.Done():
					return
				case <-e.c.Done():
					return
				}
				last, sent = l, true
			}
		case errors.Is(err, client.ErrSessionExpired) || errors.Is(err, client.ErrClosed):
			return
		default:
			if errors.Is(err, client.ErrStaleHandle) || errors.Is(err, client.ErrNoSuchNode) {
				if dh != nil {
					dh.Close()
				}
				dh = nil // the directory was deleted: watch the new one
			}
			retry.Reset(backoff)
			backoff = min(2*backoff, time.Second)
		}
		select {
		case <-ctx.Done():
			return
		case <-e.c.Done():
			return
		case <-kick:
		case <-retry.C:
		}
	}
}

func same(a, b Leader) bool { return a.Sequencer == b.Sequencer && bytes.Equal(a.Value, b.Value) }

// The record: the sequencer as chubbysh prints it, a newline, the value.
// `chubbysh cat DIR/leader` shows both.
func encodeRecord(seq client.Sequencer, value []byte) []byte {
	s := seq.String()
	b := make([]byte, 0, len(s)+1+len(value))
	b = append(b, s...)
	b = append(b, '\n')
	return append(b, value...)
}

func decodeRecord(data []byte) (Leader, error) {
	line, value, ok := bytes.Cut(data, []byte{'\n'})
	if !ok {
		return Leader{}, fmt.Errorf("election record %q: no sequencer line", data)
	}
	seq, err := client.ParseSequencer(string(line))
	if err != nil {
		return Leader{}, fmt.Errorf("election record: %w", err)
	}
	return Leader{Value: bytes.Clone(value), Sequencer: seq}, nil
}
