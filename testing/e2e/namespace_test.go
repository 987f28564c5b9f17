package e2e

import (
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chubby-dev/chubby/testing/proc"
)

// TestNamespace drives the file namespace through chubbysh one-shot
// commands, text and -json, exactly as CONTRACT.md lists them.
func TestNamespace(t *testing.T) {
	t.Parallel()
	s := proc.StartServer(t, proc.Options{})
	dir := p("ns")

	t.Run("mkdir", func(t *testing.T) {
		r := s.Sh(t, "mkdir", dir)
		wantOK(t, r)
		obj := s.Sh(t, "-json", "mkdir", dir+"/sub").JSON(t)
		if num(t, obj, "instance") == 0 {
			t.Errorf("mkdir -json: instance 0: %v", obj)
		}
		wantFail(t, s.Sh(t, "mkdir", dir), 1)                    // exists
		wantFail(t, s.Sh(t, "mkdir", p("no", "such", "dir")), 1) // parent missing
	})

	t.Run("create", func(t *testing.T) {
		r := s.Sh(t, "-json", "create", dir+"/f")
		wantCode(t, r, 0)
		if num(t, r.JSON(t), "instance") == 0 {
			t.Errorf("create -json: instance 0: %s", r)
		}
		wantFail(t, s.Sh(t, "create", dir+"/f"), 1)
		wantJSONFail(t, s.Sh(t, "-json", "create", dir+"/f"), 1)
		if got := wantOK(t, s.Sh(t, "cat", dir+"/f")); got != "" {
			t.Errorf("a created file holds %q, want empty", got)
		}
	})

	t.Run("write and cat", func(t *testing.T) {
		// write creates the missing file.
		wantFail(t, s.Sh(t, "cat", dir+"/w"), 1)
		r := s.Sh(t, "write", dir+"/w", "hello  world")
		wantOK(t, r)
		if r.Stdout != "" {
			t.Errorf("write printed %q", r.Stdout)
		}
		r = s.Sh(t, "cat", dir+"/w")
		if got := wantOK(t, r); r.Stdout != "hello  world" {
			t.Errorf("cat = %q, want %q", got, "hello  world")
		}
		obj := s.Sh(t, "-json", "cat", dir+"/w").JSON(t)
		if got := str(t, obj, "data"); got != "hello  world" {
			t.Errorf("cat -json data = %q", got)
		}
		obj = s.Sh(t, "-json", "write", dir+"/w", "again").JSON(t)
		if num(t, obj, "content_gen") == 0 {
			t.Errorf("write -json: content_gen 0: %v", obj)
		}
		wantFail(t, s.Sh(t, "write", p("nodir", "x"), "data"), 1) // parent missing
		wantFail(t, s.Sh(t, "write", dir, "data"), 1)             // a directory
		wantFail(t, s.Sh(t, "cat", dir), 1)
		wantFail(t, s.Sh(t, "cat", dir+"/missing"), 1)
	})

	t.Run("ls", func(t *testing.T) {
		r := s.Sh(t, "ls", dir)
		wantOK(t, r)
		want := []string{"f", "sub", "w"}
		if got := r.Lines(); !slices.Equal(got, want) {
			t.Errorf("ls %s lines = %q, want %q (one child a line)", dir, got, want)
		}
		obj := s.Sh(t, "-json", "ls", dir).JSON(t)
		kids, ok := obj["children"].([]any)
		if !ok {
			t.Fatalf("ls -json: children is %T: %v", obj["children"], obj)
		}
		var names []string
		for _, k := range kids {
			names = append(names, k.(string))
		}
		if !slices.Equal(names, want) {
			t.Errorf("ls -json children = %q, want %q", names, want)
		}
		// An empty directory is an empty list, not null.
		r = s.Sh(t, "-json", "ls", dir+"/sub")
		if got := r.Out(); got != `{"children":[]}` {
			t.Errorf("ls -json of an empty directory = %s", got)
		}
		if r := s.Sh(t, "ls", dir+"/sub"); wantOK(t, r) != "" {
			t.Errorf("ls of an empty directory printed %q", r.Stdout)
		}
		wantFail(t, s.Sh(t, "ls", dir+"/f"), 1)       // a file
		wantFail(t, s.Sh(t, "ls", dir+"/missing"), 1) // no such node
	})

	t.Run("stat", func(t *testing.T) {
		wantOK(t, s.Sh(t, "write", dir+"/st", "12345"))
		file := s.Sh(t, "-json", "stat", dir+"/st").JSON(t)
		for _, k := range []string{"instance", "content_gen", "lock_gen", "acl_gen", "checksum", "size"} {
			num(t, file, k)
		}
		if num(t, file, "instance") == 0 || num(t, file, "content_gen") == 0 {
			t.Errorf("stat: zero instance or content_gen: %v", file)
		}
		if boolean(t, file, "is_dir") || boolean(t, file, "ephemeral") {
			t.Errorf("stat of a permanent file: %v", file)
		}
		if num(t, file, "size") != 5 {
			t.Errorf("stat size = %d, want 5", num(t, file, "size"))
		}
		d := s.Sh(t, "-json", "stat", dir).JSON(t)
		if !boolean(t, d, "is_dir") || boolean(t, d, "ephemeral") {
			t.Errorf("stat of a directory: %v", d)
		}
		// The checksum follows the contents.
		wantOK(t, s.Sh(t, "write", dir+"/st", "54321"))
		file2 := s.Sh(t, "-json", "stat", dir+"/st").JSON(t)
		if num(t, file2, "checksum") == num(t, file, "checksum") {
			t.Errorf("checksum unchanged after new contents: %v then %v", file, file2)
		}
		if num(t, file2, "content_gen") <= num(t, file, "content_gen") {
			t.Errorf("content_gen did not grow on write: %v then %v", file, file2)
		}
		if num(t, file2, "instance") != num(t, file, "instance") {
			t.Errorf("instance changed on write: %v then %v", file, file2)
		}
		r := s.Sh(t, "stat", dir+"/st")
		wantOK(t, r)
		if !strings.Contains(r.Stdout, "content_gen") {
			t.Errorf("stat text does not show content_gen: %q", r.Stdout)
		}
		wantFail(t, s.Sh(t, "stat", dir+"/missing"), 1)
	})

	t.Run("cas", func(t *testing.T) {
		f := dir + "/cas"
		g1 := num(t, s.Sh(t, "-json", "write", f, "one").JSON(t), "content_gen")
		r := s.Sh(t, "-json", "cas", f, strconv.FormatUint(g1, 10), "two")
		wantCode(t, r, 0)
		g2 := num(t, r.JSON(t), "content_gen")
		if g2 <= g1 {
			t.Errorf("cas returned content_gen %d, not newer than %d", g2, g1)
		}
		if got := num(t, s.Sh(t, "-json", "stat", f).JSON(t), "content_gen"); got != g2 {
			t.Errorf("stat content_gen = %d, cas said %d", got, g2)
		}
		// The stale generation fails and changes nothing.
		wantFail(t, s.Sh(t, "cas", f, strconv.FormatUint(g1, 10), "three"), 1)
		wantJSONFail(t, s.Sh(t, "-json", "cas", f, strconv.FormatUint(g1, 10), "three"), 1)
		if got := s.Sh(t, "cat", f).Stdout; got != "two" {
			t.Errorf("after a failed cas contents = %q, want %q", got, "two")
		}
		// The current one (text mode) succeeds.
		wantOK(t, s.Sh(t, "cas", f, strconv.FormatUint(g2, 10), "three"))
		if got := s.Sh(t, "cat", f).Stdout; got != "three" {
			t.Errorf("contents = %q, want three", got)
		}
		wantFail(t, s.Sh(t, "cas", f, "notanumber", "x"), 2)
		// GEN 0: only if the file does not exist (it is then created).
		g0 := num(t, s.Sh(t, "-json", "cas", dir+"/cas0", "0", "first").JSON(t), "content_gen")
		if got := s.Sh(t, "cat", dir+"/cas0").Stdout; got != "first" || g0 == 0 {
			t.Errorf("cas 0 on a missing file: content_gen %d, contents %q", g0, got)
		}
		wantFail(t, s.Sh(t, "cas", dir+"/cas0", "0", "second"), 1)
		// Any other GEN expects the file to exist, and does not create it.
		wantFail(t, s.Sh(t, "cas", dir+"/cas-missing", "5", "x"), 1)
		wantFail(t, s.Sh(t, "cat", dir+"/cas-missing"), 1)
	})

	t.Run("rm", func(t *testing.T) {
		wantOK(t, s.Sh(t, "write", dir+"/gone", "x"))
		if r := s.Sh(t, "-json", "rm", dir+"/gone"); wantOK(t, r) != `{"ok":true}` {
			t.Errorf("rm -json printed %q", r.Stdout)
		}
		wantFail(t, s.Sh(t, "cat", dir+"/gone"), 1)
		wantFail(t, s.Sh(t, "rm", dir+"/gone"), 1)
		// A directory with children stays.
		wantFail(t, s.Sh(t, "rm", dir), 1)
		wantJSONFail(t, s.Sh(t, "-json", "rm", dir), 1)
		if !slices.Contains(s.Sh(t, "ls", root).Lines(), "ns") {
			t.Errorf("rm of a non-empty directory removed it")
		}
		wantOK(t, s.Sh(t, "rm", dir+"/sub"))
		if slices.Contains(s.Sh(t, "ls", dir).Lines(), "sub") {
			t.Errorf("rm of an empty directory left it")
		}
	})

	t.Run("bad paths", func(t *testing.T) {
		commands := func(bad string) [][]string {
			return [][]string{{"cat", bad}, {"ls", bad}, {"stat", bad}, {"write", bad, "x"}, {"cas", bad, "1", "x"},
				{"create", bad}, {"mkdir", bad}, {"rm", bad}, {"trylock", bad}, {"lock", bad}}
		}
		for _, bad := range []string{"/etc/passwd", root + "/a/../b", root + "//x"} {
			for _, argv := range commands(bad) {
				wantFail(t, s.Sh(t, argv...), 1)
				wantJSONFail(t, s.Sh(t, append([]string{"-json"}, argv...)...), 1)
			}
		}
		for _, bad := range []string{root + "/x/", root + "/./x", "relative", "/ls/othercell/x", root + "/sp ace"} {
			wantFail(t, s.Sh(t, "write", bad, "x"), 1)
			wantFail(t, s.Sh(t, "cat", bad), 1)
		}
		// Nothing was created under the root by any of them.
		if got := s.Sh(t, "ls", root).Lines(); !slices.Equal(got, []string{"ns"}) {
			t.Errorf("after bad paths ls %s = %q, want [ns]", root, got)
		}
	})

	t.Run("usage", func(t *testing.T) {
		for _, argv := range [][]string{
			{"frobnicate"}, {"frobnicate", root},
			{"cat"}, {"ls"}, {"stat"}, {"write", root + "/x"}, {"cas", root + "/x", "1"}, {"mkdir"}, {"create"}, {"rm"},
			{"lock"}, {"trylock"}, {"unlock"}, {"seq"}, {"checkseq"}, {"sleep"},
			{"cat", root + "/a", root + "/b"}, {"cat", "-nosuchflag", root + "/a"}, {"write", root + "/a", "x", "-seq"},
			{"trylock", root + "/a", "--", "true"}, {"lock", root + "/a", "-delay", "forever"}, {"lock", root + "/a", "--"},
		} {
			r := s.Sh(t, argv...)
			wantFail(t, r, 2)
			wantJSONFail(t, s.Sh(t, append([]string{"-json"}, argv...)...), 2)
		}
	})

	t.Run("unreachable", func(t *testing.T) {
		closed, err := proc.FreeAddr()
		if err != nil {
			t.Fatal(err)
		}
		r := proc.RunSh(t, closed, proc.ShOptions{}, "-timeout", "1s", "ls", root)
		wantFail(t, r, 3)
		if r.Took > 8*time.Second {
			t.Errorf("-timeout 1s took %v to give up", r.Took)
		}
		wantJSONFail(t, proc.RunSh(t, closed, proc.ShOptions{}, "-timeout", "1s", "-json", "cat", root+"/x"), 3)
		// A script fails on its first line that needs the cell.
		r = proc.RunSh(t, closed, proc.ShOptions{Stdin: strings.NewReader("ls " + root + "\n")}, "-timeout", "1s")
		wantFail(t, r, 3)
	})

	t.Run("session", func(t *testing.T) {
		obj := s.Sh(t, "-json", "-ttl", "5s", "session").JSON(t)
		if num(t, obj, "id") == 0 || num(t, obj, "epoch") == 0 {
			t.Errorf("session: zero id or epoch: %v", obj)
		}
		if got := num(t, obj, "ttl_ms"); got != 5000 {
			t.Errorf("session ttl_ms = %d, asked -ttl 5s", got)
		}
		if left := num(t, obj, "lease_left_ms"); left == 0 || left > 5000 {
			t.Errorf("session lease_left_ms = %d, want in (0, 5000]", left)
		}
		if got := str(t, obj, "master"); got != s.RPCAddr {
			t.Errorf("session master = %q, want %q", got, s.RPCAddr)
		}
	})
}

// TestJSONOneObjectPerCommand runs every implemented command with -json,
// successes and failures, one-shot and in a script, and checks that each
// prints exactly one JSON object on one line.
func TestJSONOneObjectPerCommand(t *testing.T) {
	t.Parallel()
	s := proc.StartServer(t, proc.Options{})
	d := p("j")
	wantOK(t, s.Sh(t, "mkdir", d))
	for _, argv := range [][]string{
		{"session"}, {"help"}, {"help", "ls"}, {"sleep", "10ms"},
		{"mkdir", d + "/sub"}, {"mkdir", d + "/sub"},
		{"create", d + "/c"}, {"create", d + "/c"}, {"create", d + "/e", "-ephemeral"},
		{"write", d + "/w", "x"}, {"write", d + "/nodir/w", "x"},
		{"cat", d + "/w"}, {"cat", d + "/missing"},
		{"ls", d}, {"ls", d + "/w"}, {"stat", d + "/w"}, {"stat", d + "/missing"},
		{"cas", d + "/w", "1", "y"}, {"cas", d + "/w", "x", "y"},
		{"rm", d + "/c"}, {"rm", d + "/c"},
		{"trylock", d + "/l"}, {"unlock", d + "/l"}, {"seq", d + "/l"},
		{"checkseq", "X:1:" + d + "/l"}, {"checkseq", "garbage"},
		{"nosuchcommand"}, {"cat"}, {"cat", "/etc/passwd"},
	} {
		r := s.Sh(t, append([]string{"-json"}, argv...)...)
		if _, err := proc.OneJSONObject(r.Stdout); err != nil {
			t.Errorf("%v\n%s", err, r)
		}
	}
	// A script: one object per line run, here four lines and the failing fifth.
	script := "write " + d + "/s 1\ncat " + d + "/s\ntrylock " + d + "/s\nseq " + d + "/s\ncat " + d + "/nope\nls " + d + "\n"
	r := s.ShStdin(t, script, "-json")
	wantCode(t, r, 1)
	lines := r.Lines()
	if len(lines) != 5 {
		t.Fatalf("script printed %d lines, want 5 (4 ok, 1 failed, then stop)\n%s", len(lines), r)
	}
	for _, l := range lines {
		if _, err := proc.DecodeJSONLine(l); err != nil {
			t.Errorf("%v\n%s", err, r)
		}
	}
	// A script line that does not parse is a failing line like any other.
	r = s.ShStdin(t, "ls "+d+"\nls '"+d+"\nls "+d+"\n", "-json")
	wantCode(t, r, 2)
	if lines := r.Lines(); len(lines) != 2 {
		t.Errorf("script with an unterminated quote on line 2 printed %d lines, want 2\n%s", len(lines), r)
	} else if obj, err := proc.DecodeJSONLine(lines[1]); err != nil || obj["error"] == nil {
		t.Errorf("line 2 of the script: %q, %v", lines[1], err)
	}
	wantErrLine(t, r)
	// So is a missing -cell address.
	wantJSONFail(t, proc.RunSh(t, "", proc.ShOptions{}, "-cell", "", "-json", "ls", root), 2)
	wantFail(t, proc.RunSh(t, "", proc.ShOptions{}, "-cell", " , ", "ls", root), 2)
}
