package assign

import (
	"context"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/chubby-dev/chubby/client"
)

// Option configures Join.
type Option func(*options)

type options struct {
	name          string
	meta          []byte
	revokeTimeout time.Duration
	onRevoked     func(ctx context.Context, items []Item)
	onAssigned    func(items []Item)
	onLost        func(items []Item)
	lockOpts      []client.LockOption
	log           hclog.Logger
}

// DefaultRevokeTimeout is how long OnRevoked may run before the member
// releases the items anyway.
const DefaultRevokeTimeout = 5 * time.Second

// MaxItems bounds m: the table of a larger group may not fit the cell's
// 256 KiB contents limit.
const MaxItems = 10_000

// Name names the member: its file DIR/members/NAME, and its entry in the
// table. It must be unique in the group while the member is alive (Join
// fails with client.ErrExists otherwise) and a valid path element. Default:
// "m-" and the session id in hex.
func Name(name string) Option { return func(o *options) { o.name = name } }

// Metadata is the contents of the member's file (at most
// client's 256 KiB): what others should know of it, such as an address.
func Metadata(data []byte) Option {
	return func(o *options) { o.meta = append([]byte{}, data...) }
}

// RevokeTimeout bounds OnRevoked: its ctx ends after d, and the member
// releases the items then even if OnRevoked has not returned (their
// Item.Ctx is done from that moment). Default DefaultRevokeTimeout.
func RevokeTimeout(d time.Duration) Option { return func(o *options) { o.revokeTimeout = d } }

// OnRevoked is called when the table takes items away from this member,
// before their locks are released: fn should finish or abandon the work on
// them before returning (or before ctx ends). The items' Ctx are still
// live while fn runs. Also called with every item at Leave.
func OnRevoked(fn func(ctx context.Context, items []Item)) Option {
	return func(o *options) { o.onRevoked = fn }
}

// OnAssigned is called with the items whose locks the member has just
// acquired, before the Assignment that includes them is sent.
func OnAssigned(fn func(items []Item)) Option { return func(o *options) { o.onAssigned = fn } }

// OnLost is called with the items whose locks may have been lost without
// a revocation: the session entered jeopardy or expired. Their Ctx are
// done already; the items are gone from the member's assignment at once.
// If the session comes back safe, the member takes them again as the
// table says (OnAssigned).
func OnLost(fn func(items []Item)) Option { return func(o *options) { o.onLost = fn } }

// ItemLockOptions are the options of the items' lock acquisitions, such
// as client.LockDelay (default: the client's Config.LockDelay). The
// lock-delay is how long an item stays unowned after its owner's session
// expired; it protects downstream stores that do not check sequencers.
func ItemLockOptions(opts ...client.LockOption) Option {
	return func(o *options) { o.lockOpts = append(o.lockOpts, opts...) }
}

// Logger receives the member's debug and warning lines (default: none).
func Logger(l hclog.Logger) Option { return func(o *options) { o.log = l } }
