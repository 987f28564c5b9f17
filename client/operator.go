package client

// Operator calls: the cell's membership, backups.

import (
	"context"
	"fmt"
	"io"

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

// Backup writes a consistent backup of the cell's replicated state to w
// (the master writes it after confirming its leadership, so it holds every
// write acknowledged before the call) and returns its size. The file is
// what `chubbyd restore -from FILE` starts a new cell from: every permanent
// node with its contents; not the sessions, locks or ephemeral nodes. The
// master holds the backup for a minute while it is fetched page by page; a
// failover in between makes Backup fail, and it can simply be called again.
func (c *Client) Backup(ctx context.Context, w io.Writer) (int64, error) {
	var args wire.BackupArgs
	var written int64
	for {
		var rep wire.BackupReply
		if err := c.do(ctx, wire.MBackup, args, &rep, readCall); err != nil {
			return written, fmt.Errorf("backup: %w", err)
		}
		if args.ID != 0 && rep.ID != args.ID || int64(len(rep.Data)) > rep.Total-written {
			return written, fmt.Errorf("backup: the master answered a page of another backup")
		}
		n, err := w.Write(rep.Data)
		written += int64(n)
		if err != nil {
			return written, fmt.Errorf("backup: %w", err)
		}
		if written == rep.Total {
			return written, nil
		}
		if len(rep.Data) == 0 {
			return written, fmt.Errorf("backup: an empty page at %d of %d bytes", written, rep.Total)
		}
		args = wire.BackupArgs{ID: rep.ID, Offset: written}
	}
}
