package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/chubby-dev/chubby/client"
)

// The file commands: ls, stat, cat, write, cas, mkdir, create, rm.

// onNode opens path and runs f on the handle, both bounded by ctx.
func onNode[T any](ctx context.Context, sh *shell, path string, f func(*client.Handle, context.Context) (T, error)) (T, error) {
	h, err := sh.cli.Open(ctx, path)
	if err != nil {
		var zero T
		return zero, err
	}
	return f(h, ctx)
}

// atPath is onNode for a command: Ctrl-C cancels it.
func atPath[T any](sh *shell, path string, f func(*client.Handle, context.Context) (T, error)) (T, error) {
	ctx, cancel := sh.ctx()
	defer cancel()
	return onNode(ctx, sh, path, f)
}

func (sh *shell) cmdLs(a *cmdArgs) error {
	kids, err := atPath(sh, a.pos[0], (*client.Handle).ReadDir)
	if err != nil {
		return err
	}
	if kids == nil {
		kids = []string{}
	}
	sh.out(map[string]any{"children": kids}, strings.Join(kids, "\n"))
	return nil
}

func (sh *shell) cmdStat(a *cmdArgs) error {
	st, err := atPath(sh, a.pos[0], (*client.Handle).GetStat)
	if err != nil {
		return err
	}
	obj := map[string]any{"path": a.pos[0], "instance": st.Instance, "content_gen": st.ContentGen, "lock_gen": st.LockGen,
		"acl_gen": st.ACLGen, "checksum": st.Checksum, "ephemeral": st.Ephemeral, "is_dir": st.IsDir, "size": st.Size,
		"mtime": time.Unix(0, st.Mtime).UTC().Format(time.RFC3339Nano)}
	var b strings.Builder
	tw := tabwriter.NewWriter(&b, 0, 8, 2, ' ', 0)
	kind := "file"
	if st.IsDir {
		kind = "directory"
	}
	if st.Ephemeral {
		kind = "ephemeral file"
	}
	mtime := time.Unix(0, st.Mtime)
	fmt.Fprintf(tw, "path\t%s\nkind\t%s\nsize\t%d bytes\ninstance\t%d\ncontent_gen\t%d\nlock_gen\t%d\nacl_gen\t%d\nchecksum\t%016x\nmodified\t%s ago (%s)\n",
		a.pos[0], kind, st.Size, st.Instance, st.ContentGen, st.LockGen, st.ACLGen, st.Checksum,
		humanDuration(time.Since(mtime)), mtime.Local().Format("2006-01-02 15:04:05 MST"))
	tw.Flush()
	sh.out(obj, b.String())
	return nil
}

func (sh *shell) cmdCat(a *cmdArgs) error {
	data, err := atPath(sh, a.pos[0], func(h *client.Handle, ctx context.Context) ([]byte, error) {
		data, _, err := h.GetContentsAndStat(ctx)
		return data, err
	})
	if err != nil {
		return err
	}
	if sh.json {
		sh.emit(map[string]any{"data": string(data)})
		return nil
	}
	sh.stdout.Write(data)
	if sh.tty && len(data) > 0 && data[len(data)-1] != '\n' {
		// Keep the prompt on a line of its own; scripts get the bytes as they are.
		fmt.Fprintln(sh.stdout)
	}
	return nil
}

func (sh *shell) seqFlag(a *cmdArgs) ([]client.WriteOption, error) {
	if !a.has("seq") {
		return nil, nil
	}
	seq, err := client.ParseSequencer(a.flags["seq"])
	if err != nil {
		return nil, err
	}
	return []client.WriteOption{client.WithSequencer(seq)}, nil
}

func (sh *shell) cmdWrite(a *cmdArgs) error {
	return sh.writeContents(a, a.pos[1], func(ctx context.Context, data []byte, opts []client.WriteOption) (client.Stat, error) {
		return sh.cli.WriteFile(ctx, a.pos[0], data, opts...)
	})
}

func (sh *shell) cmdCAS(a *cmdArgs) error {
	gen, err := strconv.ParseUint(a.pos[1], 10, 64)
	if err != nil {
		return &usageError{fmt.Sprintf("GEN %q is not a content generation; usage: cas PATH GEN DATA [-seq SEQ]", a.pos[1])}
	}
	return sh.writeContents(a, a.pos[2], func(ctx context.Context, data []byte, opts []client.WriteOption) (client.Stat, error) {
		return sh.cli.WriteFileIf(ctx, a.pos[0], data, gen, opts...)
	})
}

// writeContents runs the write of data (write, cas) with -seq's fence and
// prints the new content generation.
func (sh *shell) writeContents(a *cmdArgs, data string, write func(context.Context, []byte, []client.WriteOption) (client.Stat, error)) error {
	opts, err := sh.seqFlag(a)
	if err != nil {
		return err
	}
	ctx, cancel := sh.ctx()
	defer cancel()
	st, err := write(ctx, []byte(data), opts)
	if err != nil {
		return err
	}
	sh.out(map[string]any{"content_gen": st.ContentGen}, "")
	return nil
}

func (sh *shell) cmdMkdir(a *cmdArgs) error {
	return sh.create(a.pos[0], client.CreateDir(), client.FailIfExists())
}

func (sh *shell) cmdCreate(a *cmdArgs) error {
	opts := []client.OpenOption{client.Create(), client.FailIfExists()}
	if a.has("ephemeral") {
		opts = append(opts, client.Ephemeral())
	}
	return sh.create(a.pos[0], opts...)
}

// create makes a node (mkdir, create) and prints its instance.
func (sh *shell) create(path string, opts ...client.OpenOption) error {
	ctx, cancel := sh.ctx()
	defer cancel()
	h, err := sh.cli.Open(ctx, path, opts...)
	if err != nil {
		return err
	}
	sh.out(map[string]any{"instance": h.Instance()}, "")
	return nil
}

func (sh *shell) cmdRm(a *cmdArgs) error {
	_, err := atPath(sh, a.pos[0], func(h *client.Handle, ctx context.Context) (struct{}, error) {
		return struct{}{}, h.Delete(ctx)
	})
	if err != nil {
		return err
	}
	sh.dropHeld(a.pos[0])
	sh.out(map[string]any{"ok": true}, "")
	return nil
}

// humanDuration rounds d to what a reader needs: milliseconds under a
// second, tenths of a second under a minute, seconds under an hour, minutes
// under a day, then days and hours.
func humanDuration(d time.Duration) string {
	switch {
	case d < 0:
		return "-" + humanDuration(-d)
	case d < time.Second:
		return d.Round(time.Millisecond).String()
	case d < time.Minute:
		return d.Round(100 * time.Millisecond).String()
	case d < time.Hour:
		return d.Round(time.Second).String()
	case d < 24*time.Hour:
		return strings.TrimSuffix(d.Round(time.Minute).String(), "0s")
	}
	days := d / (24 * time.Hour)
	return fmt.Sprintf("%dd%dh", days, (d-days*24*time.Hour)/time.Hour)
}
