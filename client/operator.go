package client

// Operator calls: the cell's membership.

import (
	"context"
	"fmt"

	"github.com/chubby-dev/chubby/wire"
)

// Member is a server of the cell.
type Member struct {
	Name    string `json:"name"`
	RPCAddr string `json:"rpc_addr"`
	// State is the gossip view: alive, suspect, dead, left, or unknown.
	State  string `json:"state"`
	Voter  bool   `json:"voter"`
	Master bool   `json:"master"`
}

// Members lists the cell's servers: name, RPC address, gossip state, whether
// it votes and which is the master.
func (c *Client) Members(ctx context.Context) ([]Member, error) {
	var rep wire.MembersReply
	if err := c.do(ctx, wire.MMembers, wire.Empty{}, &rep, readCall); err != nil {
		return nil, fmt.Errorf("members: %w", err)
	}
	if rep.Members == nil {
		return nil, nil
	}
	ms := make([]Member, len(rep.Members))
	for i, m := range rep.Members {
		ms[i] = Member{Name: m.Name, RPCAddr: m.RPCAddr, State: m.State, Voter: m.Voter, Master: m.Master}
	}
	return ms, nil
}

// RemoveOption modifies RemoveServer.
type RemoveOption func(force *bool)

// ForceRemove removes a voter even if fewer voters than a quorum of the
// current configuration remain (the cell then needs every one of them).
func ForceRemove() RemoveOption { return func(force *bool) { *force = true } }

// RemoveServer removes a server from the cell for good (an operator
// command). A server that is merely down stays a member until removed.
// The cell refuses to remove a voter if fewer voters than a quorum of the
// current configuration would remain, unless ForceRemove is given, and
// never removes its last server.
func (c *Client) RemoveServer(ctx context.Context, name string, opts ...RemoveOption) error {
	args := wire.RemoveServerArgs{Name: name}
	for _, o := range opts {
		o(&args.Force)
	}
	if err := c.do(ctx, wire.MRemoveServer, args, nil, readCall); err != nil {
		return fmt.Errorf("remove-server %s: %w", name, err)
	}
	return nil
}
