package fs

// Data-driven tests in the style of etcd-io/raft's interaction tests. Each
// file in testdata/ is a script of blocks:
//
//	# comments and blank lines before a command are kept
//	command arg key=value ...
//	----
//	expected output, one or more lines
//
// A block ends at the first blank line after its "----". Run
//
//	go test ./fs/ -run TestScripts -rewrite
//
// to regenerate the expected output from the actual one, and review the diff.
//
// Commands (s= is the session a command is sent for, 0 when omitted; paths
// and data= values may use Go escapes such as \x00 or \x20; "" is the empty
// path; every command is stamped with the script clock, which starts at
// +0s and is moved by advance):
//
//	session [ttl=12s]                      create a session, print its id
//	end s=N [expired]                      end a session (expired: with lock-delay)
//	epoch                                  a new master epoch
//	create [s=N] PATH [dir] [ephemeral] [excl] [data=D] [size=N]
//	write [s=N] PATH (data=D | size=N) [create] [cas=GEN] [seq=SEQ] [inst=N]
//	delete [s=N] PATH [inst=N] [seq=SEQ]
//	acquire s=N PATH X|S [wait] [id=N] [delay=15s] [inst=N]
//	release s=N PATH gen=N
//	cancel s=N PATH id=N
//	grant-delayed PATH
//	advance DURATION                        move the script clock
//	stat PATH [inst=N] | ls PATH [inst=N] | get PATH [inst=N]
//	held s=N PATH                          the session's sequencer for PATH
//	checkseq SEQ                           CheckSequencer of a parsed sequencer
//	sessions | delayed-locks | dump
//	restore                                snapshot, restore into a fresh State, continue with it
//	op op=N                                a raw command with op number N (unknown ops)
//	raw HEX                                a log entry's bytes (one or more encoded commands) as
//	                                       the FSM gets them: decoded with DecodeCommands and
//	                                       applied at one index; each command's result and changes
//	removed-servers                        the servers an operator removed
//
// After every command the harness also checks the state's invariants
// (checkInvariants) and that a command that failed left the state unchanged.

import (
	"bufio"
	"encoding/hex"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

var rewrite = flag.Bool("rewrite", false, "rewrite the expected output of the testdata scripts")

func TestScripts(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "*.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no scripts in testdata/")
	}
	for _, f := range files {
		t.Run(strings.TrimSuffix(filepath.Base(f), ".txt"), func(t *testing.T) { runScriptFile(t, f) })
	}
}

type scriptBlock struct {
	pre  []string // comment and blank lines before the command
	cmd  string
	line int // line number of cmd
	want []string
}

func parseScript(t *testing.T, file string) (blocks []scriptBlock, trailer []string) {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	sc := bufio.NewScanner(strings.NewReader(string(data)))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	var pre []string
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		if strings.TrimSpace(l) == "" || strings.HasPrefix(l, "#") {
			pre = append(pre, l)
			continue
		}
		b := scriptBlock{pre: pre, cmd: l, line: i + 1}
		pre = nil
		if i+1 >= len(lines) || lines[i+1] != "----" {
			t.Fatalf("%s:%d: command %q is not followed by ----", file, i+1, l)
		}
		i += 2
		for ; i < len(lines) && lines[i] != ""; i++ {
			b.want = append(b.want, lines[i])
		}
		blocks = append(blocks, b)
	}
	return blocks, pre
}

func runScriptFile(t *testing.T, file string) {
	blocks, trailer := parseScript(t, file)
	env := &scriptEnv{t: t, st: New("local"), now: testEpoch}
	var out strings.Builder
	for _, b := range blocks {
		got := env.exec(file, b)
		if *rewrite {
			for _, l := range b.pre {
				out.WriteString(l + "\n")
			}
			out.WriteString(b.cmd + "\n----\n")
			for _, l := range got {
				out.WriteString(l + "\n")
			}
			out.WriteString("\n")
			continue
		}
		if strings.Join(got, "\n") != strings.Join(b.want, "\n") {
			t.Errorf("%s:%d: %s\n--- want\n%s\n--- got\n%s", file, b.line, b.cmd,
				strings.Join(b.want, "\n"), strings.Join(got, "\n"))
		}
	}
	if *rewrite {
		for _, l := range trailer {
			out.WriteString(l + "\n")
		}
		s := strings.TrimRight(out.String(), "\n") + "\n"
		if err := os.WriteFile(file, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

type scriptEnv struct {
	t     *testing.T
	st    *State
	now   int64
	index uint64
}

// scriptArgs holds a command line's arguments: positional words in order and
// key=value pairs. Every argument must be consumed, so typos fail the test.
type scriptArgs struct {
	pos  []string
	kv   map[string]string
	used map[string]bool
}

func parseArgs(fields []string) *scriptArgs {
	a := &scriptArgs{kv: map[string]string{}, used: map[string]bool{}}
	for _, f := range fields {
		if k, v, ok := strings.Cut(f, "="); ok && !strings.HasPrefix(f, "/") && !strings.HasPrefix(f, `"`) {
			a.kv[k] = v
			continue
		}
		a.pos = append(a.pos, f)
	}
	return a
}

type scriptError struct{ msg string }

func fail(format string, args ...any) { panic(scriptError{fmt.Sprintf(format, args...)}) }

// unescape reads a path or data token: Go escapes are decoded and `""` is
// the empty string.
func unescape(tok string) string {
	if tok == `""` {
		return ""
	}
	s, err := strconv.Unquote(`"` + strings.ReplaceAll(tok, `"`, `\"`) + `"`)
	if err != nil {
		fail("cannot unescape %q: %v", tok, err)
	}
	return s
}

// path takes the first positional argument as a path.
func (a *scriptArgs) path() string {
	if len(a.pos) == 0 {
		fail("missing path")
	}
	p := a.pos[0]
	a.pos = a.pos[1:]
	return unescape(p)
}

// flag reports and consumes a positional flag word.
func (a *scriptArgs) flag(name string) bool {
	for i, p := range a.pos {
		if p == name {
			a.pos = append(a.pos[:i], a.pos[i+1:]...)
			return true
		}
	}
	return false
}

func (a *scriptArgs) str(key string) (string, bool) {
	v, ok := a.kv[key]
	a.used[key] = true
	return v, ok
}

func (a *scriptArgs) uint(key string) uint64 {
	v, ok := a.str(key)
	if !ok {
		return 0
	}
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		fail("%s=%q: %v", key, v, err)
	}
	return n
}

func (a *scriptArgs) dur(key string) (time.Duration, bool) {
	v, ok := a.str(key)
	if !ok {
		return 0, false
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		fail("%s=%q: %v", key, v, err)
	}
	return d, true
}

// data reads data=D (escaped) or size=N (N bytes of 'x').
func (a *scriptArgs) data() []byte {
	if v, ok := a.str("data"); ok {
		return []byte(unescape(v))
	}
	if _, ok := a.kv["size"]; ok {
		return repeatByte('x', int(a.uint("size")))
	}
	return nil
}

func repeatByte(c byte, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = c
	}
	return b
}

func (a *scriptArgs) seq() *Sequencer {
	v, ok := a.str("seq")
	if !ok {
		return nil
	}
	s, err := ParseSequencer(v)
	if err != nil {
		fail("seq=%q: %v", v, err)
	}
	return &s
}

func (a *scriptArgs) done() {
	if len(a.pos) > 0 {
		fail("unexpected arguments %q", a.pos)
	}
	for k := range a.kv {
		if !a.used[k] {
			fail("unknown argument %s=", k)
		}
	}
}

// exec runs one block and returns its output lines.
func (e *scriptEnv) exec(file string, b scriptBlock) (out []string) {
	defer func() {
		if r := recover(); r != nil {
			if se, ok := r.(scriptError); ok {
				e.t.Fatalf("%s:%d: %s: %s", file, b.line, b.cmd, se.msg)
			}
			panic(r)
		}
	}()
	fields := strings.Fields(b.cmd)
	verb, a := fields[0], parseArgs(fields[1:])
	var body Body
	switch verb {
	case "session":
		b := &CreateSession{TTL: int64(12 * time.Second)}
		if d, ok := a.dur("ttl"); ok {
			b.TTL = int64(d)
		}
		body = b
	case "end":
		body = &EndSession{Expired: a.flag("expired")}
	case "epoch":
		body = &NewEpoch{}
	case "create":
		body = &Create{Path: a.path(), IsDir: a.flag("dir"), Ephemeral: a.flag("ephemeral"), Exclusive: a.flag("excl"), Data: a.data()}
	case "write":
		b := &SetContents{Path: a.path(), Create: a.flag("create"), Data: a.data()}
		if _, ok := a.kv["cas"]; ok {
			b.CAS, b.ContentGen = true, a.uint("cas")
		}
		b.Seq = a.seq()
		b.Instance = a.uint("inst")
		body = b
	case "delete":
		body = &Delete{Path: a.path(), Instance: a.uint("inst"), Seq: a.seq()}
	case "acquire":
		b := &Acquire{Path: a.path()}
		switch {
		case a.flag("X"):
			b.Mode = Exclusive
		case a.flag("S"):
			b.Mode = Shared
		default:
			b.Mode = Mode(a.uint("mode"))
		}
		b.Wait = a.flag("wait")
		b.WaitID = a.uint("id")
		if d, ok := a.dur("delay"); ok {
			b.LockDelay = int64(d)
		}
		b.Instance = a.uint("inst")
		body = b
	case "release":
		body = &Release{Path: a.path(), LockGen: a.uint("gen")}
	case "cancel":
		body = &CancelWait{Path: a.path(), WaitID: a.uint("id")}
	case "grant-delayed":
		body = &GrantDelayed{Path: a.path()}
	case "op":
		// A raw op number, for unknown commands.
		cmd := &Command{Session: a.uint("s"), Op: Op(a.uint("op"))}
		a.done()
		return e.apply(cmd)
	case "raw":
		out = e.applyEntry(a)
		a.done()
		return out
	default:
		out = e.query(verb, a)
		a.done()
		return out
	}
	cmd := cmdFor(a.uint("s"), body)
	a.done()
	return e.apply(cmd)
}

// applyEntry decodes a log entry as the server's FSM does and applies its
// commands at one index, printing each command's result and changes.
func (e *scriptEnv) applyEntry(a *scriptArgs) []string {
	if len(a.pos) != 1 {
		fail("raw HEX")
	}
	b, err := hex.DecodeString(a.pos[0])
	if err != nil {
		fail("raw: %v", err)
	}
	a.pos = nil
	cmds, err := DecodeCommands(b)
	if err != nil {
		return []string{"decode: " + formatErr(err)}
	}
	e.index++
	var out []string
	for i, c := range cmds {
		before := dumpState(e.st, false)
		r := e.st.Apply(e.index, c)
		out = append(out, fmt.Sprintf("[%d] %v", i, c.Op))
		for _, l := range formatResult(r) {
			out = append(out, "  "+l)
		}
		for _, ch := range r.Changes {
			out = append(out, fmt.Sprintf("  change %d %s", ch.Kind, ch.Path))
		}
		if err := checkInvariants(e.st); err != nil {
			out = append(out, "INVARIANT VIOLATED: "+strings.ReplaceAll(err.Error(), "\n", "; "))
		}
		if r.Err != nil && dumpState(e.st, false) != before {
			out = append(out, "FAILED COMMAND CHANGED THE STATE")
		}
	}
	return out
}

// apply runs one command through Apply, checks the invariants and, for a
// failed command, that the state did not change.
func (e *scriptEnv) apply(cmd *Command) []string {
	cmd.Now = e.now
	e.index++
	before := dumpState(e.st, false)
	// Every command must survive the log encoding unchanged.
	if cmd.Op > OpInvalid && cmd.Op < opMax {
		enc, err := cmd.Encode()
		if err != nil {
			fail("encode: %v", err)
		}
		dec, err := DecodeCommand(enc)
		if err != nil {
			fail("decode: %v", err)
		}
		cmd = dec
	}
	r := e.st.Apply(e.index, cmd)
	out := formatResult(r)
	if err := checkInvariants(e.st); err != nil {
		out = append(out, "INVARIANT VIOLATED: "+strings.ReplaceAll(err.Error(), "\n", "; "))
	}
	if r.Err != nil {
		if after := dumpState(e.st, false); after != before {
			out = append(out, "FAILED COMMAND CHANGED THE STATE")
		}
	}
	if e.st.AppliedIndex() != e.index {
		out = append(out, fmt.Sprintf("APPLIED INDEX %d, want %d", e.st.AppliedIndex(), e.index))
	}
	return out
}

func (e *scriptEnv) query(verb string, a *scriptArgs) []string {
	switch verb {
	case "advance":
		if len(a.pos) != 1 {
			fail("advance DURATION")
		}
		d, err := time.ParseDuration(a.pos[0])
		if err != nil {
			fail("advance: %v", err)
		}
		a.pos = nil
		e.now += int64(d)
		return []string{"now " + fmtTime(e.now)}
	case "stat":
		st, err := e.st.StatInstance(a.path(), a.uint("inst"))
		if err != nil {
			return []string{formatErr(err)}
		}
		return []string{formatStat(st)}
	case "ls":
		names, err := e.st.Children(a.path(), a.uint("inst"))
		if err != nil {
			return []string{formatErr(err)}
		}
		if len(names) == 0 {
			return []string{"(empty)"}
		}
		return []string{strings.Join(names, " ")}
	case "get":
		data, st, err := e.st.Get(a.path(), a.uint("inst"))
		if err != nil {
			return []string{formatErr(err)}
		}
		shown := data
		if len(shown) > 32 {
			shown = shown[:32]
		}
		return []string{fmt.Sprintf("data %q (%d bytes)", shown, len(data)), formatStat(st)}
	case "held":
		seq, err := e.st.HeldSequencer(a.uint("s"), a.path())
		if err != nil {
			return []string{formatErr(err)}
		}
		return []string{"seq " + seq.String()}
	case "checkseq":
		if len(a.pos) != 1 {
			fail("checkseq SEQ")
		}
		text := a.pos[0]
		a.pos = nil
		seq, err := ParseSequencer(text)
		if err != nil {
			return []string{formatErr(err)}
		}
		if e.st.CheckSequencer(seq) {
			return []string{"valid"}
		}
		return []string{"invalid"}
	case "sessions":
		var out []string
		for _, si := range e.st.Sessions() {
			out = append(out, fmt.Sprintf("session %d ttl=%v", si.ID, time.Duration(si.TTL)))
		}
		if len(out) == 0 {
			out = []string{"(none)"}
		}
		return out
	case "delayed-locks":
		var out []string
		for _, d := range e.st.DelayedLocks() {
			out = append(out, fmt.Sprintf("delayed %s until=%s", d.Path, fmtTime(d.Until)))
		}
		if len(out) == 0 {
			out = []string{"(none)"}
		}
		return out
	case "removed-servers":
		var ids []string
		for id := range e.st.RemovedServers() {
			ids = append(ids, id)
		}
		if len(ids) == 0 {
			return []string{"(none)"}
		}
		slices.Sort(ids)
		return ids
	case "dump":
		return strings.Split(strings.TrimRight(dumpState(e.st, true), "\n"), "\n")
	case "restore":
		before := dumpState(e.st, true)
		fresh, err := roundTrip(e.st)
		if err != nil {
			fail("%v", err)
		}
		e.st = fresh
		if after := dumpState(fresh, true); after != before {
			return []string{"RESTORED STATE DIFFERS", "--- before", before, "--- after", after}
		}
		return []string{fmt.Sprintf("restored %d nodes, %d sessions", fresh.NodeCount(), len(fresh.Sessions()))}
	}
	fail("unknown command %q", verb)
	return nil
}
