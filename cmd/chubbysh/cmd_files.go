package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/chubby-dev/chubby/client"
	"github.com/chubby-dev/chubby/fs"
)

// The file commands: ls, stat, cat, write, cas, mkdir, create, rm (acl: cmd_acl.go).

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
	data, err := sh.contents(a, 1, "write PATH DATA|- [-file F] [-seq SEQ]")
	if err != nil {
		return err
	}
	return sh.writeContents(a, data, func(ctx context.Context, data []byte, opts []client.WriteOption) (client.Stat, error) {
		return sh.cli.WriteFile(ctx, a.pos[0], data, opts...)
	})
}

func (sh *shell) cmdCAS(a *cmdArgs) error {
	const usage = "cas PATH GEN DATA|- [-file F] [-seq SEQ]"
	if len(a.pos) < 2 {
		return &usageError{"missing GEN; usage: " + usage}
	}
	gen, err := strconv.ParseUint(a.pos[1], 10, 64)
	if err != nil {
		return &usageError{fmt.Sprintf("GEN %q is not a content generation; usage: %s", a.pos[1], usage)}
	}
	data, err := sh.contents(a, 2, usage)
	if err != nil {
		return err
	}
	return sh.writeContents(a, data, func(ctx context.Context, data []byte, opts []client.WriteOption) (client.Stat, error) {
		return sh.cli.WriteFileIf(ctx, a.pos[0], data, gen, opts...)
	})
}

// contents are what write and cas store: the argument at position i, or
// with "-" standard input, or with -file the file's bytes, exactly as they
// are (binary safe). More than fs.MaxContents is refused before anything
// is sent (exit 1).
func (sh *shell) contents(a *cmdArgs, i int, usage string) ([]byte, error) {
	var src io.Reader
	var name string
	switch {
	case a.has("file") && len(a.pos) > i:
		return nil, &usageError{"give DATA or -file F, not both; usage: " + usage}
	case a.has("file"):
		f, err := os.Open(a.flags["file"])
		if err != nil {
			return nil, err
		}
		defer f.Close()
		src, name = f, a.flags["file"]
	case len(a.pos) <= i:
		return nil, &usageError{"missing DATA (or - for stdin, or -file F); usage: " + usage}
	case a.pos[i] != "-":
		if len(a.pos[i]) > fs.MaxContents {
			return nil, fmt.Errorf("%w: %d bytes (limit %d)", client.ErrTooLarge, len(a.pos[i]), fs.MaxContents)
		}
		return []byte(a.pos[i]), nil
	case sh.stdin == nil:
		return nil, &usageError{"- (contents from stdin) works only as a one-shot command: in a script or the interactive shell stdin carries the commands; use -file F"}
	default:
		src, name = sh.stdin, "stdin"
	}
	data, err := io.ReadAll(io.LimitReader(src, fs.MaxContents+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", name, err)
	}
	if len(data) > fs.MaxContents {
		return nil, fmt.Errorf("%w: %s holds more than %d bytes (the limit of a file's contents)", client.ErrTooLarge, name, fs.MaxContents)
	}
	return data, nil
}

// writeContents runs the write of data (write, cas) with -seq's fence and
// prints the new content generation.
func (sh *shell) writeContents(a *cmdArgs, data []byte, write func(context.Context, []byte, []client.WriteOption) (client.Stat, error)) error {
	opts, err := sh.seqFlag(a)
	if err != nil {
		return err
	}
	ctx, cancel := sh.ctx()
	defer cancel()
	st, err := write(ctx, data, opts)
	if err != nil {
		return err
	}
	sh.out(map[string]any{"content_gen": st.ContentGen}, "")
	return nil
}

func (sh *shell) cmdMkdir(a *cmdArgs) error {
	return sh.create(a.pos[0], client.CreateDir(), client.FailIfExists(), client.WithACL(aclOf(a)))
}

func (sh *shell) cmdCreate(a *cmdArgs) error {
	opts := []client.OpenOption{client.Create(), client.FailIfExists(), client.WithACL(aclOf(a))}
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
