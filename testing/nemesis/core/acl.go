package core

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/chubby-dev/chubby/client"
	"github.com/chubby-dev/chubby/testing/wait"
)

// Intruder is the ACL probe of the TLS runs: a client of a principal that
// no ACL file of the working directory names, trying, while the schedule
// plays, to read a file of it, to write one and to create one in it. Each
// must be refused with client.ErrPermission; an attempt that succeeds is a
// violation, one that fails otherwise (no master, a cut link, the session
// lost) is counted and retried — the faults are not the intruder's to
// survive.
type Intruder struct {
	// Dial makes the intruder's client (again after its session ended).
	Dial func(ctx context.Context) (*client.Client, error)
	// Read is a file the workloads use; Create a path under their
	// directory that nobody makes.
	Read, Create string
	// Every is the pause between rounds of attempts.
	Every time.Duration

	Denied   atomic.Int64 // refused with ErrPermission
	Failed   atomic.Int64 // failed otherwise
	mu       sync.Mutex
	admitted []string
}

// Run tries until ctx is done.
func (x *Intruder) Run(ctx context.Context) {
	var cl *client.Client
	defer func() {
		if cl != nil {
			cl.Close()
		}
	}()
	for ctx.Err() == nil {
		if cl != nil && wait.Closed(cl.Done()) {
			cl.Close()
			cl = nil
		}
		if cl == nil {
			dctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			c, err := x.Dial(dctx)
			cancel()
			if err != nil {
				x.Failed.Add(1)
				wait.Sleep(ctx, x.Every)
				continue
			}
			cl = c
		}
		x.try(ctx, "read "+x.Read, func(ctx context.Context) error {
			h, err := cl.Open(ctx, x.Read, client.NoCache())
			if err != nil {
				return err
			}
			defer h.Close()
			_, _, err = h.GetContentsAndStat(ctx)
			return err
		})
		x.try(ctx, "write "+x.Read, func(ctx context.Context) error {
			_, err := cl.WriteFile(ctx, x.Read, []byte("intruder"))
			return err
		})
		x.try(ctx, "create "+x.Create, func(ctx context.Context) error {
			h, err := cl.Open(ctx, x.Create, client.Create())
			if err == nil {
				h.Close()
			}
			return err
		})
		wait.Sleep(ctx, x.Every)
	}
}

func (x *Intruder) try(ctx context.Context, what string, f func(context.Context) error) {
	octx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	err := f(octx)
	switch {
	case err == nil:
		x.mu.Lock()
		x.admitted = append(x.admitted, what)
		x.mu.Unlock()
	case errors.Is(err, client.ErrPermission):
		x.Denied.Add(1)
	default:
		x.Failed.Add(1)
	}
}

// Check returns the violations: every attempt that succeeded, and no
// attempt refused at all (then the probe proved nothing).
func (x *Intruder) Check() []string {
	x.mu.Lock()
	defer x.mu.Unlock()
	var out []string
	for _, a := range x.admitted {
		out = append(out, "the intruder was allowed to "+a)
	}
	if x.Denied.Load() == 0 {
		out = append(out, fmt.Sprintf("the intruder was never refused with permission denied (%d attempts failed otherwise)", x.Failed.Load()))
	}
	return out
}

// String is the probe's tally.
func (x *Intruder) String() string {
	x.mu.Lock()
	n := len(x.admitted)
	x.mu.Unlock()
	return fmt.Sprintf("%d attempts refused with permission denied, %d failed otherwise, %d admitted", x.Denied.Load(), x.Failed.Load(), n)
}

// Grant makes dir the working directory of principals on a cell with
// ACLs, as admin (a client of one of the cell's admins): it writes the ACL
// file root/acl/name listing them, one a line, makes dir, and sets dir's
// read, write and change-ACL names to name. What the workloads create under
// dir copies those names; everything else stays the admins'.
func Grant(ctx context.Context, admin *client.Client, root, name, dir string, principals ...string) error {
	file := root + "/acl/" + name
	if _, err := admin.WriteFile(ctx, file, []byte(strings.Join(principals, "\n")+"\n")); err != nil {
		return fmt.Errorf("grant: %w", err)
	}
	h, err := admin.Open(ctx, dir, client.CreateDir())
	if err != nil {
		return fmt.Errorf("grant: %w", err)
	}
	defer h.Close()
	if _, err := h.SetACL(ctx, client.ACL{Read: name, Write: name, Change: name}); err != nil {
		return fmt.Errorf("grant: %w", err)
	}
	return nil
}
