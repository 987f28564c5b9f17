package e2e

import (
	"fmt"
	"hash/fnv"
	"io"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/chubby-dev/chubby/testing/proc"
	"github.com/chubby-dev/chubby/testing/wait"
)

// TestBackupRestore (issue 15, backup and restore): `chubbysh snapshot save`
// writes a backup while a session holds a lock and an ephemeral file; the
// data directory is wiped; `chubbyd restore` prepares a new one from the
// backup and chubbyd starts on it. Every permanent node is back with its
// contents and stat; what was written after the backup, the session, its
// lock and its ephemeral file are not; the old sequencer is invalid and a
// new lock's generation is greater than any before. A truncated or
// corrupted backup is refused with a clear error and writes nothing.
func TestBackupRestore(t *testing.T) {
	t.Parallel()
	s := proc.StartServer(t, proc.Options{})
	d := p("bk")
	wantOK(t, s.Sh(t, "mkdir", d))
	wantOK(t, s.Sh(t, "mkdir", d+"/sub"))
	wantOK(t, s.Sh(t, "write", d+"/config", "replicas=3"))
	wantOK(t, s.ShStdin(t, "\x00binary\xff\n", "write", d+"/sub/bin", "-"))
	wantOK(t, s.Sh(t, "create", d+"/empty"))

	sess := s.StartSh(t, "-json")
	sess.Send(t, "lock "+d+"/lock")
	seq := parseSeq(t, str(t, jsonLine(t, sess.NextLine(t, 20*time.Second)), "sequencer"))
	sess.Send(t, "create "+d+"/eph -ephemeral")
	jsonLine(t, sess.NextLine(t, 20*time.Second))

	paths := []string{d + "/sub", d + "/config", d + "/sub/bin", d + "/empty", d + "/lock"}
	before := snapshot(t, s, paths)

	file := filepath.Join(t.TempDir(), "cell.backup")
	obj := s.Sh(t, "-json", "snapshot", "save", file).JSON(t)
	if !boolean(t, obj, "ok") || num(t, obj, "bytes") == 0 {
		t.Fatalf("snapshot save: %v", obj)
	}
	if fi, err := os.Stat(file); err != nil || uint64(fi.Size()) != num(t, obj, "bytes") {
		t.Fatalf("backup file: %v, %v; want %d bytes", fi, err, num(t, obj, "bytes"))
	}
	wantOK(t, s.Sh(t, "write", d+"/after", "written after the backup"))
	maxGen := num(t, s.Sh(t, "-json", "stat", d+"/after").JSON(t), "content_gen")

	// Disaster: the server and its data are gone.
	s.Kill(t)
	if err := os.RemoveAll(s.DataDir); err != nil {
		t.Fatal(err)
	}

	// Damaged backups are refused and leave the directory empty.
	good, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(t.TempDir(), "bad.backup")
	for _, tc := range []struct {
		data []byte
		says string
	}{
		{good[:len(good)-100], "truncated"},
		{append(append([]byte{}, good[:len(good)-1]...), good[len(good)-1]^1), "checksum"},
		{[]byte("not a backup\n"), "not a valid chubby backup"},
	} {
		if err := os.WriteFile(bad, tc.data, 0o600); err != nil {
			t.Fatal(err)
		}
		r := proc.RunChubbyd(t, 30*time.Second, "restore", "-from", bad, "-data-dir", s.DataDir, "-node-id", s.NodeID, "-raft-addr", s.RaftAddr)
		if r.Code != 1 || !strings.Contains(r.Stderr, tc.says) {
			t.Errorf("restore of a damaged backup: want exit 1 saying %q\n%s", tc.says, r)
		}
		if entries, _ := os.ReadDir(s.DataDir); len(entries) != 0 {
			t.Fatalf("a refused restore wrote into the data directory: %v", entries)
		}
	}

	r := proc.RunChubbyd(t, 30*time.Second, "restore", "-from", file, "-data-dir", s.DataDir, "-node-id", s.NodeID, "-raft-addr", s.RaftAddr)
	wantCode(t, r, 0)
	again := proc.RunChubbyd(t, 30*time.Second, "restore", "-from", file, "-data-dir", s.DataDir, "-node-id", s.NodeID, "-raft-addr", s.RaftAddr)
	if again.Code != 1 || !strings.Contains(again.Stderr, "already holds") {
		t.Errorf("a second restore into the same directory: want exit 1\n%s", again)
	}
	s.Start(t)

	compareSnapshots(t, "restore from backup", before, snapshot(t, s, paths))
	wantFail(t, s.Sh(t, "cat", d+"/after"), 1) // written after the backup
	wantFail(t, s.Sh(t, "stat", d+"/eph"), 1)  // its session is gone
	if got := s.Sh(t, "ls", d).Lines(); strings.Join(got, " ") != "config empty lock sub" {
		t.Errorf("ls %s after the restore = %q, want config empty lock sub", d, got)
	}
	if r := s.Sh(t, "checkseq", seq.text); r.Code != 1 || strings.TrimSpace(r.Stdout) != "invalid" {
		t.Errorf("checkseq of the old holder's sequencer after the restore: want invalid, exit 1\n%s", r)
	}
	// The lock is free at once (no holder, no lock-delay) and its new
	// generation is past every generation the old cell issued.
	seq2 := parseSeq(t, str(t, s.Sh(t, "-json", "trylock", d+"/lock").JSON(t), "sequencer"))
	if seq2.gen <= seq.gen || seq2.gen <= maxGen {
		t.Errorf("lock generation after the restore %d, want > %d (old lock) and > %d (any old generation)", seq2.gen, seq.gen, maxGen)
	}
	wantOK(t, s.Sh(t, "write", d+"/config", "replicas=4")) // and it serves writes
}

// TestBackupRestoreCell (issue 15, acceptance 2, with a cell of three): a
// backup taken from a three-server cell while a session holds a lock;
// every server is SIGKILLed and its data directory wiped; `chubbyd
// restore` prepares one of them, which starts as a cell of one, and the
// other two, on empty data directories, join it with -join. Every
// permanent node and its contents are back, read through each server and
// also on each server's own replica (its status page for the node shows the
// local stat and checksum); the old sequencer is invalid and a new lock's
// generation is greater than any the old cell issued.
func TestBackupRestoreCell(t *testing.T) {
	t.Parallel()
	c := proc.StartCell(t, 3, proc.CellOptions{})
	d := p("bkcell")
	big := strings.Repeat("restored-bytes.", 4<<10) // 60 KiB
	script := strings.Join([]string{
		"mkdir " + d, "mkdir " + d + "/sub",
		"write " + d + "/config replicas=3",
		"write " + d + "/sub/big " + big,
		"create " + d + "/empty",
		"create " + d + "/lock",
	}, "\n") + "\n"
	wantOK(t, c.ShStdin(t, script))

	sess := c.StartSh(t, "-json")
	sess.Send(t, "lock "+d+"/lock")
	seq := parseSeq(t, str(t, jsonLine(t, sess.NextLine(t, 20*time.Second)), "sequencer"))
	sess.Send(t, "create "+d+"/eph -ephemeral")
	jsonLine(t, sess.NextLine(t, 20*time.Second))

	paths := []string{d, d + "/sub", d + "/config", d + "/sub/big", d + "/empty", d + "/lock"}
	before := snapshot(t, c, paths)
	maxGen := uint64(0)
	for _, n := range before {
		for _, k := range []string{"instance", "content_gen", "lock_gen", "acl_gen"} {
			maxGen = max(maxGen, num(t, n.stat, k))
		}
	}
	file := filepath.Join(t.TempDir(), "cell.backup")
	if obj := c.Sh(t, "-json", "snapshot", "save", file).JSON(t); !boolean(t, obj, "ok") {
		t.Fatalf("snapshot save: %v", obj)
	}

	// Disaster: every server and all their data are gone.
	for _, s := range c.Servers() {
		s.Kill(t)
	}
	for _, s := range c.Servers() {
		if err := os.RemoveAll(s.DataDir); err != nil {
			t.Fatal(err)
		}
	}
	first, others := c.Servers()[0], c.Servers()[1:]
	wantCode(t, proc.RunChubbyd(t, 30*time.Second, "restore", "-from", file, "-data-dir", first.DataDir,
		"-node-id", first.NodeID, "-raft-addr", first.RaftAddr), 0)
	first.Start(t) // a cell of one, serving as master
	for _, s := range others {
		s.Start(t) // empty data dir, -join the first: added by its master
	}
	// Every server is an alive voter of the new cell, and one master leads
	// it (gossip may take a moment to tell every server of the others).
	var last string
	wait.For(t, 0, "n1, n2 and n3 alive voters of the restored cell", wait.Every(200*time.Millisecond, func() bool {
		r := c.Sh(t, "-json", "members")
		if r.Code != 0 {
			last = r.String()
			return false
		}
		obj := r.JSON(t)
		last = fmt.Sprint(obj)
		list, _ := obj["members"].([]any)
		masters, ok := 0, len(list) == 3
		for _, e := range list {
			m, _ := e.(map[string]any)
			ok = ok && m["voter"] == true && m["state"] == "alive"
			if m["master"] == true {
				masters++
			}
		}
		return ok && masters == 1
	}))
	t.Logf("restored cell: %s", last)

	// The ephemeral file is not restored: its session is gone.
	want := maps.Clone(before)
	dir := want[d]
	dir.children = slices.DeleteFunc(slices.Clone(dir.children), func(c string) bool { return c == "eph" })
	want[d] = dir
	for _, s := range c.Servers() {
		compareSnapshots(t, "restore, read through "+s.NodeID, want, snapshot(t, s, paths))
	}
	// Each server's own replica (not only the master's answer): the node
	// pages read the local state.
	for _, s := range c.Servers() {
		for _, path := range paths {
			want := before[path]
			wait.For(t, 0, fmt.Sprintf("%s's replica of %s", s.NodeID, path), func() bool {
				return replicaMatches(t, s, path, want) == ""
			})
		}
	}
	wantFail(t, c.Sh(t, "stat", d+"/eph"), 1) // its session is gone
	if r := c.Sh(t, "checkseq", seq.text); r.Code != 1 || strings.TrimSpace(r.Stdout) != "invalid" {
		t.Errorf("checkseq of the old holder's sequencer after the restore: want invalid, exit 1\n%s", r)
	}
	seq2 := parseSeq(t, str(t, c.Sh(t, "-json", "trylock", d+"/lock").JSON(t), "sequencer"))
	if seq2.gen <= seq.gen || seq2.gen <= maxGen {
		t.Errorf("lock generation after the restore %d, want > %d (old lock) and > %d (any old generation)", seq2.gen, seq.gen, maxGen)
	}
	wantOK(t, c.Sh(t, "write", d+"/config", "replicas=4")) // and the cell of three serves writes
}

// ddPair is one "<dt>key</dt><dd>value</dd>" of a status page.
var ddPair = regexp.MustCompile(`<dt>([^<]+)</dt><dd[^>]*>([^<]*)</dd>`)

// replicaMatches compares what server s's own replica holds of path (its
// node page) with a snapshot read through chubbysh; "" if they agree, else
// what differs. For a file the checksum is also checked against the
// contents read.
func replicaMatches(t *testing.T, s *proc.Server, path string, want node) string {
	t.Helper()
	resp, err := http.Get("http://" + s.HTTPAddr + path)
	if err != nil {
		return err.Error()
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		return fmt.Sprintf("GET %s: %s %v", path, resp.Status, err)
	}
	got := map[string]string{}
	for _, m := range ddPair.FindAllStringSubmatch(string(body), -1) {
		got[m[1]] = strings.TrimSpace(m[2])
	}
	sum := fnv.New64a()
	sum.Write([]byte(want.contents))
	checks := map[string]string{
		"instance":    fmt.Sprint(num(t, want.stat, "instance")),
		"content gen": fmt.Sprint(num(t, want.stat, "content_gen")),
		"lock gen":    fmt.Sprint(num(t, want.stat, "lock_gen")),
		"ACL gen":     fmt.Sprint(num(t, want.stat, "acl_gen")),
		"checksum":    fmt.Sprintf("%016x", num(t, want.stat, "checksum")),
		"size":        fmt.Sprintf("%d bytes", num(t, want.stat, "size")),
	}
	if !boolean(t, want.stat, "is_dir") {
		if c := fmt.Sprintf("%016x", sum.Sum64()); c != checks["checksum"] {
			t.Fatalf("%s: chubbysh's checksum %s is not the FNV-1a of the contents it read (%s)", path, checks["checksum"], c)
		}
	}
	var diffs []string
	for k, v := range checks {
		if got[k] != v {
			diffs = append(diffs, fmt.Sprintf("%s %q, want %q", k, got[k], v))
		}
	}
	sort.Strings(diffs)
	return strings.Join(diffs, "; ")
}
