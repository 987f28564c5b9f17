package assign

// The member: joining, the reconcile loop that acts on the table, and
// leaving.

import (
	"context"
	"errors"
	"fmt"
	"path"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/chubby-dev/chubby/client"
)

// The group's layout under its directory.
const (
	membersDir      = "members"     // DIR/members/NAME: one ephemeral file per live member
	itemsDir        = "items"       // DIR/items/I: item I's lock
	coordinatorFile = "coordinator" // its lock elects the coordinator
	assignmentFile  = "assignment"  // the Table, written only by the coordinator, fenced
)

// Sentinel errors.
var (
	// ErrLeft: Member.Err after Leave.
	ErrLeft = errors.New("member left the group")
	// ErrItemCount: Join with m outside 1..MaxItems, or with another m
	// than the group's table has; Member.Err if a coordinator with another
	// m wrote the table.
	ErrItemCount = errors.New("bad number of items")
	// ErrBadName: a member name that is empty or not one path element.
	ErrBadName = errors.New("bad member name")
)

// callTimeout bounds each call the member and the coordinator make on
// their own (reads, writes, releases).
const callTimeout = 5 * time.Second

// maxRetry bounds the pause before retrying after a failed call.
const maxRetry = time.Second

// Item is a work item this member owns.
type Item struct {
	// N is the item's number, 0..m-1.
	N int
	// Seq is the fencing token of the item's lock: pass it with every
	// write to a store that checks sequencers (client/fence), or to the
	// cell (client.WithSequencer).
	Seq client.Sequencer
	// Ctx is done the moment the item's lock may be lost — at jeopardy,
	// expiry, or when the member releases it after a revocation. Its
	// context.Cause is then a *client.LockLostError whose StopBy is the
	// latest moment work on the item may go on.
	Ctx context.Context
}

// Assignment is the set of items a member owns at a moment: every item
// whose lock it holds and which the table gives it.
type Assignment struct {
	// Epoch is the table's epoch the member last acted on.
	Epoch uint64
	// Items, ascending by N.
	Items []Item
}

// Numbers returns the items' numbers, ascending.
func (a Assignment) Numbers() []int {
	out := make([]int, len(a.Items))
	for i, it := range a.Items {
		out[i] = it.N
	}
	return out
}

// Member is this client's membership of a group. Its methods are safe for
// concurrent use.
type Member struct {
	c                       *client.Client
	dir, name               string
	m                       int
	o                       options
	log                     hclog.Logger
	assignPath, membersPath string
	self, assignH, coordH   *client.Handle
	unsub                   func()
	kick, ckick             chan struct{}
	out                     chan Assignment
	leaveCh                 chan context.Context
	leaveOnce               sync.Once
	done, coordDone         chan struct{}
	ctx                     context.Context // ends when the member ends
	cancel, stopCoord       context.CancelFunc
	acquiring               sync.WaitGroup
	retryMu                 sync.Mutex
	retryT                  *time.Timer
	retryD                  time.Duration

	mu      sync.Mutex
	cur     Assignment
	err     error
	results []acqResult
	leading bool

	// The loop's own state.
	table     Table
	handles   map[int]*client.Handle
	held      map[int]Item
	pending   map[int]context.CancelFunc
	stale     map[int]bool // the session may hold the lock: lost at jeopardy
	published bool
	pubEpoch  uint64
	pubItems  []int
}

type acqResult struct {
	n   int
	seq client.Sequencer
	ctx context.Context
	err error
}

// Join makes c's session a member of the group of m work items under dir
// and returns at once; the member acquires its items in the background
// and reports them on Assignments and through the callbacks. dir and its
// layout are created if missing (dir's parent must exist). Every member
// of a group must give the same m.
//
// Join fails with ErrItemCount for m outside 1..MaxItems or another m than
// the group's, ErrBadName for a bad Name, client.ErrExists if the name is
// taken, and with the client's error for a bad dir.
func Join(ctx context.Context, c *client.Client, dir string, m int, opts ...Option) (*Member, error) {
	if c == nil {
		return nil, errors.New("assign: join: nil client")
	}
	if m <= 0 || m > MaxItems {
		return nil, fmt.Errorf("assign: join %s: %w: m = %d, want 1..%d", dir, ErrItemCount, m, MaxItems)
	}
	o := options{revokeTimeout: DefaultRevokeTimeout, log: hclog.NewNullLogger()}
	for _, f := range opts {
		f(&o)
	}
	if o.revokeTimeout <= 0 {
		o.revokeTimeout = DefaultRevokeTimeout
	}
	if o.name == "" {
		o.name = fmt.Sprintf("m-%x", c.Session().ID)
	}
	if strings.ContainsAny(o.name, "/\x00") || o.name == "." || o.name == ".." {
		return nil, fmt.Errorf("assign: join %s: %w: %q", dir, ErrBadName, o.name)
	}
	mb := &Member{
		c: c, dir: dir, name: o.name, m: m, o: o, log: o.log.Named("assign").With("member", o.name),
		assignPath: path.Join(dir, assignmentFile), membersPath: path.Join(dir, membersDir),
		kick: make(chan struct{}, 1), ckick: make(chan struct{}, 1), out: make(chan Assignment, 1),
		leaveCh: make(chan context.Context, 1), done: make(chan struct{}), coordDone: make(chan struct{}),
		handles: map[int]*client.Handle{}, held: map[int]Item{}, pending: map[int]context.CancelFunc{}, stale: map[int]bool{},
	}
	if err := mb.setup(ctx); err != nil {
		mb.teardown()
		return nil, fmt.Errorf("assign: join %s as %s: %w", dir, o.name, err)
	}
	mb.ctx, mb.cancel = context.WithCancel(context.Background())
	var cctx context.Context
	cctx, mb.stopCoord = context.WithCancel(mb.ctx)
	go mb.coordinate(cctx)
	go mb.run()
	poke(mb.kick)
	poke(mb.ckick)
	return mb, nil
}

// setup subscribes to the events, makes the layout and the member's file.
func (mb *Member) setup(ctx context.Context) error {
	c, dir := mb.c, mb.dir
	// Subscribed before anything is read: no change is missed between.
	mb.unsub = c.Subscribe(mb.onEvent)
	for _, d := range []string{dir, mb.membersPath, path.Join(dir, itemsDir)} {
		h, err := openOrCreate(ctx, c, d, client.CreateDir())
		if err != nil {
			return err
		}
		h.Close()
	}
	var err error
	if mb.assignH, err = openOrCreate(ctx, c, mb.assignPath, client.Create(), client.WithEvents(client.EventContentsModified)); err != nil {
		return err
	}
	if _, err := mb.groupTable(ctx); err != nil {
		return err
	}
	// Lock files are opened NoCache: every grant and release changes their
	// stat, and no member's cached copy should have to be invalidated first.
	if mb.coordH, err = openOrCreate(ctx, c, path.Join(dir, coordinatorFile), client.Create(), client.NoCache()); err != nil {
		return err
	}
	opts := []client.OpenOption{client.Ephemeral(), client.FailIfExists()}
	if mb.o.meta != nil {
		opts = append(opts, client.InitialContents(mb.o.meta))
	}
	if mb.self, err = c.Open(ctx, path.Join(mb.membersPath, mb.name), opts...); err != nil {
		return err
	}
	return nil
}

// groupTable reads the group's table and checks that it is one of this
// member's number of items.
func (mb *Member) groupTable(ctx context.Context) (Table, error) {
	data, _, err := mb.assignH.GetContentsAndStat(ctx)
	if err != nil {
		return Table{}, err
	}
	t, err := parseTable(data)
	if err != nil {
		return Table{}, err
	}
	if t.Items != 0 && t.Items != mb.m {
		return Table{}, fmt.Errorf("%w: the table of %s has %d items, this member %d", ErrItemCount, mb.dir, t.Items, mb.m)
	}
	return t, nil
}

// openOrCreate opens path, and only if it is missing opens it with create
// (CreateDir or Create): a creating Open is a write, which waits for every
// session caching the node to acknowledge its invalidation — a member cut
// off from the cell would hold up every Join for its lease.
func openOrCreate(ctx context.Context, c *client.Client, p string, create client.OpenOption, opts ...client.OpenOption) (*client.Handle, error) {
	h, err := c.Open(ctx, p, opts...)
	if !errors.Is(err, client.ErrNoSuchNode) {
		return h, err
	}
	return c.Open(ctx, p, append([]client.OpenOption{create}, opts...)...)
}

// teardown ends the subscription and closes the handles.
func (mb *Member) teardown() {
	if mb.unsub != nil {
		mb.unsub()
	}
	for _, h := range []*client.Handle{mb.assignH, mb.coordH, mb.self} {
		if h != nil {
			h.Close()
		}
	}
	for _, h := range mb.handles {
		h.Close()
	}
}

// poke wakes a loop without blocking.
func poke(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// onEvent is the client's Subscribe callback: it wakes the loop an event
// concerns, never blocking.
func (mb *Member) onEvent(e client.Event) {
	switch e.Type {
	case client.EventContentsModified, client.EventHandleInvalid:
		if e.Path == mb.assignPath {
			poke(mb.kick)
			poke(mb.ckick)
		}
	case client.EventChildAdded, client.EventChildRemoved, client.EventChildModified:
		if path.Dir(e.Path) == mb.membersPath {
			poke(mb.ckick)
		}
	case client.EventJeopardy, client.EventSafe, client.EventExpired, client.EventMasterFailover:
		poke(mb.kick)
		poke(mb.ckick)
	}
}

// Name is the member's name in the group.
func (mb *Member) Name() string { return mb.name }

// Assignments delivers the member's assignment each time it changes: the
// latest state only (a reader that falls behind misses the states in
// between, never the last). It is closed when the member ends.
func (mb *Member) Assignments() <-chan Assignment { return mb.out }

// Current returns the member's assignment now.
func (mb *Member) Current() Assignment {
	mb.mu.Lock()
	defer mb.mu.Unlock()
	return mb.cur
}

// Coordinator reports whether this member is the group's coordinator now.
func (mb *Member) Coordinator() bool {
	mb.mu.Lock()
	defer mb.mu.Unlock()
	return mb.leading
}

// Done is closed when the member has ended: after Leave, or when its
// session ended (then its items were reported lost, and a program that
// wants to go on joins again with a new client).
func (mb *Member) Done() <-chan struct{} { return mb.done }

// Err says why the member ended (nil while it runs): ErrLeft after
// Leave; client.ErrSessionExpired when its session ended (expired, or
// closed by Client.Close); ErrItemCount when the group's table has another
// number of items.
func (mb *Member) Err() error {
	mb.mu.Lock()
	defer mb.mu.Unlock()
	return mb.err
}

// Leave leaves the group: OnRevoked with every item (its ctx ends with
// ctx or after RevokeTimeout), their locks released, the coordinator's
// lock released if held, and the member's file deleted, after which the
// coordinator hands the items to the others. It returns when that is done
// or ctx ends (the rest then goes on in the background). Callbacks must
// not call Leave.
func (mb *Member) Leave(ctx context.Context) error {
	mb.leaveOnce.Do(func() { mb.leaveCh <- ctx })
	select {
	case <-mb.done:
	case <-ctx.Done():
		return fmt.Errorf("assign: leave %s: %w", mb.dir, ctx.Err())
	}
	if err := mb.Err(); !errors.Is(err, ErrLeft) {
		return fmt.Errorf("assign: leave %s: the member had ended: %w", mb.dir, err)
	}
	return nil
}

// run is the member's loop: one reconcile per wake-up, until it ends.
func (mb *Member) run() {
	for {
		select {
		case <-mb.kick:
		case <-mb.c.Done():
		case ctx := <-mb.leaveCh:
			mb.leave(ctx)
			return
		}
		if mb.reconcile() {
			return
		}
	}
}

// retry wakes the loop again after a backoff (after a failed call).
func (mb *Member) retry() {
	mb.retryMu.Lock()
	defer mb.retryMu.Unlock()
	if mb.retryT != nil {
		return
	}
	mb.retryD = min(max(2*mb.retryD, 50*time.Millisecond), maxRetry)
	mb.retryT = time.AfterFunc(mb.retryD, func() {
		mb.retryMu.Lock()
		mb.retryT = nil
		mb.retryMu.Unlock()
		poke(mb.kick)
	})
}

func (mb *Member) retryOK() {
	mb.retryMu.Lock()
	mb.retryD = 0
	mb.retryMu.Unlock()
}

// reconcile brings the member's locks in line with the table; it reports
// whether the member ended.
func (mb *Member) reconcile() (ended bool) {
	// Locks that may have been lost (jeopardy, expiry): gone at once. Out
	// of a safe session every lock is lost (the client marks them one by
	// one): all of them are reported together.
	state := mb.c.State()
	var lost []Item
	for n, it := range mb.held {
		if it.Ctx.Err() == nil && state == client.SessionSafe {
			continue
		}
		delete(mb.held, n)
		lost = append(lost, it)
		mb.stale[n] = true // the session may still hold it, if it comes back
	}
	if len(lost) > 0 {
		sortItems(lost)
		mb.log.Warn("items lost", "items", numbers(lost))
		if mb.o.onLost != nil {
			mb.o.onLost(lost)
		}
	}
	select {
	case <-mb.c.Done():
		// Expired, or ended by Client.Close (which the client may also
		// report as expired: the master ends the session first).
		mb.finish(fmt.Errorf("%w: the member's session ended", client.ErrSessionExpired))
		return true
	default:
	}
	if state != client.SessionSafe {
		mb.publish() // without the lost items; woken again at safe
		return false
	}
	ctx, cancel := context.WithTimeout(mb.ctx, callTimeout)
	defer cancel()
	data, _, err := mb.assignH.GetContentsAndStat(ctx)
	var t Table
	if err == nil {
		t, err = parseTable(data)
	}
	if err != nil {
		mb.log.Warn("read the table", "err", err)
		mb.retry()
		mb.publish()
		return false
	}
	if t.Items != 0 && t.Items != mb.m {
		mb.log.Error("the table has another number of items", "table", t.Items, "m", mb.m)
		mb.finish(fmt.Errorf("%w: the table of %s has %d items, this member %d", ErrItemCount, mb.dir, t.Items, mb.m))
		return true
	}
	mb.table = t
	mine := map[int]bool{}
	for _, n := range t.Of(mb.name) {
		mine[n] = true
	}

	// Acquisitions that finished.
	var newly []Item
	failed := false
	for _, r := range mb.takeResults() {
		delete(mb.pending, r.n)
		switch {
		case r.err != nil:
			if mb.ctx.Err() == nil && mine[r.n] && !errors.Is(r.err, context.Canceled) {
				mb.log.Warn("acquire item", "item", r.n, "err", r.err)
				failed = true
			}
		case r.ctx.Err() != nil:
			mb.stale[r.n] = true // lost before it could be used
		case !mine[r.n]:
			mb.releaseItem(r.n) // taken away while we waited: never used
		default:
			it := Item{N: r.n, Seq: r.seq, Ctx: r.ctx}
			mb.held[r.n] = it
			delete(mb.stale, r.n)
			context.AfterFunc(r.ctx, func() { poke(mb.kick) })
			newly = append(newly, it)
		}
	}

	// Revocations: finish, then release.
	var revoked []Item
	for n, it := range mb.held {
		if !mine[n] {
			revoked = append(revoked, it)
		}
	}
	if len(revoked) > 0 {
		mb.revoke(mb.ctx, revoked)
	}
	// An acquisition under way of an item no longer ours is let finish,
	// not cancelled: granted, the item is released at once, and the new
	// owner, queued behind us, gets it in that hand-off. (A cancel would
	// save the hand-off, but masters before the fix of
	// TestCancelBeforeItsAcquireLeavesNoWait could apply a CancelAcquire
	// before its Acquire and grant the lock later to a session that had
	// given it up, unknown to its handle: the item would stay stuck until
	// the session ended.)
	for n := range mb.stale {
		if _, waiting := mb.pending[n]; waiting || mine[n] {
			continue // taken back, or released once its acquisition ends
		}
		if mb.clearItem(n) {
			delete(mb.stale, n)
		} else {
			failed = true
		}
	}
	for n := range mine {
		if _, ok := mb.held[n]; ok {
			continue
		}
		if _, ok := mb.pending[n]; ok {
			continue
		}
		if !mb.startAcquire(n) {
			failed = true
		}
	}
	if len(newly) > 0 {
		sortItems(newly)
		mb.log.Debug("items assigned", "items", numbers(newly), "epoch", t.Epoch)
		if mb.o.onAssigned != nil {
			mb.o.onAssigned(newly)
		}
	}
	if failed {
		mb.retry()
	} else {
		mb.retryOK()
	}
	mb.publish()
	return false
}

// revoke runs OnRevoked for items (up to RevokeTimeout), then releases
// their locks.
func (mb *Member) revoke(ctx context.Context, items []Item) {
	sortItems(items)
	mb.log.Debug("revoking items", "items", numbers(items))
	if fn := mb.o.onRevoked; fn != nil {
		rctx, cancel := context.WithTimeout(ctx, mb.o.revokeTimeout)
		done := make(chan struct{})
		go func() {
			defer close(done)
			fn(rctx, items)
		}()
		select {
		case <-done:
		case <-rctx.Done():
			mb.log.Warn("OnRevoked ran past its deadline; releasing the items", "items", numbers(items))
		}
		cancel()
	}
	for _, it := range items {
		delete(mb.held, it.N)
		mb.releaseItem(it.N)
	}
}

// releaseItem releases item n's lock, if the handle holds it. A release
// that got no answer from the cell may have left the lock with the session
// (the handle forgets it whatever happens): the item is then marked stale,
// for clearItem.
func (mb *Member) releaseItem(n int) {
	h := mb.handles[n]
	if h == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	if err := h.Release(ctx); err != nil && !errors.Is(err, client.ErrNotHeld) {
		mb.log.Warn("release item", "item", n, "err", err)
		mb.stale[n] = true
		mb.retry()
	}
}

// clearItem makes sure the session does not hold item n's lock, whether
// or not the handle knows of the hold: a TryAcquire gets the session's
// hold back if it has one (or the lock, if it is free) and a Release frees
// it; a lock another session holds, or in its lock-delay, is not ours. It
// reports whether that is settled.
func (mb *Member) clearItem(n int) bool {
	h := mb.handles[n]
	if h == nil {
		return true
	}
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	err := h.TryAcquire(ctx, client.Exclusive, mb.o.lockOpts...)
	switch {
	case errors.Is(err, client.ErrLockHeld), errors.Is(err, client.ErrLockDelay):
		return true
	case err == nil:
		err = h.Release(ctx)
		if err == nil || errors.Is(err, client.ErrNotHeld) {
			return true
		}
	}
	mb.log.Warn("clear item", "item", n, "err", err)
	return false
}

// startAcquire acquires item n's lock in the background; the result wakes
// the loop. It reports false if it could not start (the item's file could
// not be opened).
func (mb *Member) startAcquire(n int) bool {
	h := mb.handles[n]
	if h == nil {
		ctx, cancel := context.WithTimeout(mb.ctx, callTimeout)
		var err error
		h, err = openOrCreate(ctx, mb.c, path.Join(mb.dir, itemsDir, fmt.Sprint(n)), client.Create(), client.NoCache())
		cancel()
		if err != nil {
			mb.log.Warn("open item", "item", n, "err", err)
			return false
		}
		mb.handles[n] = h
	}
	actx, cancel := context.WithCancel(mb.ctx)
	mb.pending[n] = cancel
	mb.acquiring.Add(1)
	go func() {
		defer mb.acquiring.Done()
		defer cancel()
		r := acqResult{n: n, err: h.Acquire(actx, client.Exclusive, mb.o.lockOpts...)}
		if r.err == nil {
			r.ctx = h.LockContext()
			if r.seq, r.err = h.Sequencer(); r.err != nil {
				r.ctx = nil
			}
		}
		mb.mu.Lock()
		mb.results = append(mb.results, r)
		mb.mu.Unlock()
		poke(mb.kick)
	}()
	return true
}

func (mb *Member) takeResults() []acqResult {
	mb.mu.Lock()
	defer mb.mu.Unlock()
	r := mb.results
	mb.results = nil
	return r
}

// publish sends the assignment if it changed since the last one sent.
func (mb *Member) publish() {
	items := make([]Item, 0, len(mb.held))
	for _, it := range mb.held {
		items = append(items, it)
	}
	sortItems(items)
	a := Assignment{Epoch: mb.table.Epoch, Items: items}
	ns := a.Numbers()
	if mb.published && a.Epoch == mb.pubEpoch && slices.Equal(ns, mb.pubItems) {
		return
	}
	mb.published, mb.pubEpoch, mb.pubItems = true, a.Epoch, ns
	mb.mu.Lock()
	mb.cur = a
	mb.mu.Unlock()
	select {
	case <-mb.out:
	default:
	}
	mb.out <- a // the only sender, and the buffer was just emptied
}

// leave is Leave's work, on the loop.
func (mb *Member) leave(ctx context.Context) {
	var items []Item
	for _, it := range mb.held {
		items = append(items, it)
	}
	if len(items) > 0 {
		mb.revoke(ctx, items)
	}
	// Acquisitions under way are cancelled (the master orders a cancel
	// after its Acquire; one granted meanwhile is released below).
	for _, cancel := range mb.pending {
		cancel()
	}
	mb.acquiring.Wait()
	for _, r := range mb.takeResults() {
		if r.err == nil {
			mb.releaseItem(r.n) // granted while we left
		}
	}
	mb.pending = map[int]context.CancelFunc{}
	for n := range mb.stale {
		mb.clearItem(n)
	}
	mb.stopCoord()
	<-mb.coordDone
	dctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	if err := mb.self.Delete(dctx); err != nil {
		mb.log.Warn("delete the member file", "err", err)
	}
	mb.publish()
	mb.finish(ErrLeft)
}

// finish ends the member with err.
func (mb *Member) finish(err error) {
	mb.cancel()
	mb.acquiring.Wait()
	mb.stopCoord()
	<-mb.coordDone
	mb.retryMu.Lock()
	if mb.retryT != nil {
		mb.retryT.Stop()
	}
	mb.retryMu.Unlock()
	if !errors.Is(err, ErrLeft) {
		var items []Item
		for _, it := range mb.held {
			items = append(items, it)
		}
		if len(items) > 0 { // still held: ended by ErrItemCount
			mb.revoke(context.Background(), items)
		}
		for _, r := range mb.takeResults() {
			if r.err == nil {
				mb.releaseItem(r.n)
			}
		}
	}
	mb.teardown()
	mb.mu.Lock()
	mb.err = err
	mb.mu.Unlock()
	mb.log.Debug("member ended", "err", err)
	close(mb.out)
	close(mb.done)
}

func sortItems(items []Item) {
	sort.Slice(items, func(i, j int) bool { return items[i].N < items[j].N })
}

func numbers(items []Item) []int { return Assignment{Items: items}.Numbers() }
