package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/chubby-dev/chubby/client"
)

// The session and cell commands: session, cache, members, remove-server,
// snapshot, sleep.

func (sh *shell) cmdSession(a *cmdArgs) error {
	si := sh.cli.Session()
	obj := map[string]any{"id": si.ID, "ttl_ms": si.TTL.Milliseconds(), "lease_left_ms": si.LeaseLeft.Milliseconds(),
		"master": si.Master, "epoch": si.Epoch, "state": si.State.String(), "cell": si.Cell}
	text := fmt.Sprintf("id          %d\nstate       %s\nttl         %v\nlease left  %v\nmaster      %s\nepoch       %d\ncell        %s\n",
		si.ID, si.State, si.TTL, humanDuration(si.LeaseLeft), si.Master, si.Epoch, si.Cell)
	sh.out(obj, text)
	return nil
}

func (sh *shell) cmdWhoami(a *cmdArgs) error {
	p := sh.cli.Session().Principal
	sh.out(map[string]any{"principal": p}, p)
	return nil
}

func (sh *shell) cmdSleep(a *cmdArgs) error {
	d, err := time.ParseDuration(a.pos[0])
	if err != nil || d < 0 {
		return &usageError{fmt.Sprintf("sleep %q: not a duration", a.pos[0])}
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-sh.signals:
		return errors.New("interrupted")
	case <-sh.cli.Done():
		return fmt.Errorf("%w: the session ended while sleeping", client.ErrSessionExpired)
	}
	sh.out(map[string]any{"ok": true}, "")
	return nil
}

func (sh *shell) cmdMembers(a *cmdArgs) error {
	ctx, cancel := sh.ctx()
	defer cancel()
	ms, err := sh.cli.Members(ctx)
	if err != nil {
		return err
	}
	if ms == nil {
		ms = []client.Member{}
	}
	var b strings.Builder
	tw := tabwriter.NewWriter(&b, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tRPC ADDRESS\tSTATE\tROLE")
	for _, m := range ms {
		role := "voter"
		if !m.Voter {
			role = "non-voter"
		}
		if m.Master {
			role = "master"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", m.Name, m.RPCAddr, m.State, role)
	}
	tw.Flush()
	sh.out(map[string]any{"members": ms}, b.String())
	return nil
}

func (sh *shell) cmdRemoveServer(a *cmdArgs) error {
	ctx, cancel := sh.ctx()
	defer cancel()
	var opts []client.RemoveOption
	if a.has("force") {
		opts = append(opts, client.ForceRemove())
	}
	if err := sh.cli.RemoveServer(ctx, a.pos[0], opts...); err != nil {
		return err
	}
	sh.out(map[string]any{"ok": true}, "")
	return nil
}

// cmdCache shows the client cache's counters for this session (a one-shot
// command's session has just started: mostly zeros).
func (sh *shell) cmdCache(a *cmdArgs) error {
	st := sh.cli.CacheStats()
	obj := map[string]any{"hits": st.Hits, "misses": st.Misses, "entries": st.Entries, "invalidations": st.Invalidations, "bytes": st.Bytes}
	ratio := "-"
	if n := st.Hits + st.Misses; n > 0 {
		ratio = fmt.Sprintf("%.0f%%", 100*float64(st.Hits)/float64(n))
	}
	text := fmt.Sprintf("hits           %d (%s of lookups)\nmisses         %d\nentries        %d (%d bytes)\ninvalidations  %d\n",
		st.Hits, ratio, st.Misses, st.Entries, st.Bytes, st.Invalidations)
	sh.out(obj, text)
	return nil
}

// cmdSnapshot writes a backup of the cell to FILE: into a temporary file
// beside it, renamed into place once complete, so FILE is never half a
// backup.
func (sh *shell) cmdSnapshot(a *cmdArgs) error {
	if a.pos[0] != "save" {
		return &usageError{fmt.Sprintf("unknown snapshot command %q; usage: snapshot save FILE", a.pos[0])}
	}
	file := a.pos[1]
	tmp, err := os.CreateTemp(filepath.Dir(file), filepath.Base(file)+".partial-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // gone after the rename; left behind on failure otherwise
	ctx, cancel := sh.ctx()
	defer cancel()
	n, err := sh.cli.Backup(ctx, tmp)
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), file)
	}
	if err != nil {
		return err
	}
	sh.out(map[string]any{"ok": true, "bytes": n}, fmt.Sprintf("wrote %s (%d bytes)\n", file, n))
	return nil
}
