package assign

// The assignment table: what DIR/assignment holds.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path"

	"github.com/chubby-dev/chubby/client"
)

// Table is the assignment the coordinator publishes in DIR/assignment, as
// JSON: {"epoch":3,"items":10,"members":["a","b"],"owner":[0,1,0,…]}, an
// owner being an index into members (-1: none). Members act on it; it is
// what the coordinator balances from next time. It says who should own an
// item, not who holds its lock now (an owner may still be acquiring it, or
// a former owner finishing its revocation).
type Table struct {
	// Epoch counts the tables the coordinators wrote (0: none yet).
	Epoch uint64 `json:"epoch"`
	// Items is the number of work items, M.
	Items int `json:"items"`
	// Members are the live members the coordinator saw, sorted.
	Members []string `json:"members"`
	// Owner[i] is item i's owner, an index into Members, or -1.
	Owner []int `json:"owner"`
}

// Owners returns each item's owner by name ("" for none).
func (t Table) Owners() []string {
	out := make([]string, t.Items)
	for i := range out {
		out[i] = t.OwnerOf(i)
	}
	return out
}

// OwnerOf returns item i's owner ("" for none or an item out of range).
func (t Table) OwnerOf(i int) string {
	if i < 0 || i >= len(t.Owner) {
		return ""
	}
	k := t.Owner[i]
	if k < 0 || k >= len(t.Members) {
		return ""
	}
	return t.Members[k]
}

// Of returns the items owned by member, ascending.
func (t Table) Of(member string) []int {
	var out []int
	for i := range t.Items {
		if t.OwnerOf(i) == member {
			out = append(out, i)
		}
	}
	return out
}

// newTable builds the table of owners (Balance's result) over members.
func newTable(epoch uint64, members []string, owners []string) Table {
	t := Table{Epoch: epoch, Items: len(owners), Members: members, Owner: make([]int, len(owners))}
	idx := make(map[string]int, len(members))
	for k, name := range members {
		idx[name] = k
	}
	for i, o := range owners {
		k, ok := idx[o]
		if !ok {
			k = -1
		}
		t.Owner[i] = k
	}
	return t
}

// ErrBadTable: DIR/assignment does not hold a table this package wrote.
var ErrBadTable = errors.New("not an assignment table")

// parseTable reads a table; empty contents are the empty table (no
// coordinator has written one yet).
func parseTable(data []byte) (Table, error) {
	var t Table
	if len(data) == 0 {
		return t, nil
	}
	if err := json.Unmarshal(data, &t); err != nil {
		return Table{}, fmt.Errorf("%w: %v", ErrBadTable, err)
	}
	if t.Items < 0 || len(t.Owner) != t.Items {
		return Table{}, fmt.Errorf("%w: %d owners for %d items", ErrBadTable, len(t.Owner), t.Items)
	}
	return t, nil
}

// ReadTable reads the assignment table of the group under dir (from the
// client's cache when it is valid). A group whose coordinator has not
// written one yet has the empty table (Epoch 0).
func ReadTable(ctx context.Context, c *client.Client, dir string) (Table, error) {
	h, err := c.Open(ctx, path.Join(dir, assignmentFile))
	if err != nil {
		return Table{}, err
	}
	defer h.Close()
	data, _, err := h.GetContentsAndStat(ctx)
	if err != nil {
		return Table{}, err
	}
	return parseTable(data)
}
