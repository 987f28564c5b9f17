package main

import (
	"slices"
	"strings"
	"testing"
	"time"
)

func TestResolvePath(t *testing.T) {
	for _, tc := range []struct{ cwd, in, want string }{
		{"/ls/local", "app", "/ls/local/app"},
		{"/ls/local/app", "../x", "/ls/local/x"},
		{"/ls/local/app", "./sub/", "/ls/local/app/sub"},
		{"/ls/local/app", "sub//f", "/ls/local/app/sub/f"},
		{"/ls/local/app", "/ls/local/b/../c", "/ls/local/c"},
		{"/ls/local", "../../../..", "/"},
		{"/ls/local/app", ".", "/ls/local/app"},
	} {
		if got := resolvePath(tc.cwd, tc.in); got != tc.want {
			t.Errorf("resolvePath(%q, %q) = %q, want %q", tc.cwd, tc.in, got, tc.want)
		}
	}
	if !within("/ls/local", "/ls/local") || !within("/ls/local", "/ls/local/a") || within("/ls/local", "/ls/localx") || within("/ls/local", "/ls") {
		t.Errorf("within is wrong")
	}
}

func TestNearest(t *testing.T) {
	names := commandNames()
	for in, want := range map[string]string{
		"lsx": "ls", "sl": "ls", "stats": "stat", "satt": "stat", "mkdri": "mkdir", "lcok": "lock", "unlcok": "unlock",
		"memebrs": "members", "sesion": "session", "remove": "remove-server", "wirte": "write", "chekseq": "checkseq",
	} {
		if got, ok := nearest(in, names); !ok || got != want {
			t.Errorf("nearest(%q) = %q, %v; want %q", in, got, ok, want)
		}
	}
	for _, in := range []string{"frobnicate", "x", "c", "zzzzzz"} {
		if got, ok := nearest(in, names); ok {
			t.Errorf("nearest(%q) = %q, want no guess", in, got)
		}
	}
	if d := editDistance("ab", "ba"); d != 1 {
		t.Errorf("editDistance(ab, ba) = %d, want 1 (a swap)", d)
	}
	if d := editDistance("", "abc"); d != 3 {
		t.Errorf("editDistance('', abc) = %d", d)
	}
}

func TestParseInteractive(t *testing.T) {
	sh := &shell{tty: true, cwd: "/ls/local/app"}
	_, a, err := sh.parse([]string{"write", "sub/../f", "data", "-seq", "X:1:/ls/local/l"})
	if err != nil {
		t.Fatal(err)
	}
	if a.pos[0] != "/ls/local/app/f" || a.pos[1] != "data" || a.flags["seq"] != "X:1:/ls/local/l" {
		t.Errorf("write in the shell: %+v", a)
	}
	if _, a, err = sh.parse([]string{"ls"}); err != nil || !slices.Equal(a.pos, []string{"/ls/local/app"}) {
		t.Errorf("ls alone in the shell: %+v, %v", a, err)
	}
	if _, a, err = sh.parse([]string{"checkseq", "X:1:l"}); err != nil || a.pos[0] != "X:1:l" {
		t.Errorf("checkseq's SEQ is not a path: %+v, %v", a, err)
	}
	// Outside the shell nothing is resolved, and cd/pwd are usage errors.
	sh = &shell{}
	if _, a, err = sh.parse([]string{"cat", "relative/../x"}); err != nil || a.pos[0] != "relative/../x" {
		t.Errorf("cat in a script: %+v, %v", a, err)
	}
	if _, _, err = sh.parse([]string{"ls"}); err == nil {
		t.Errorf("ls without PATH in a script parsed")
	}
	for _, w := range [][]string{{"cd", "/ls/local"}, {"pwd"}} {
		if _, _, err := sh.parse(w); err == nil || !strings.Contains(err.Error(), "only in the interactive shell") {
			t.Errorf("%v in a script: %v", w, err)
		}
	}
	_, _, err = sh.parse([]string{"lsx"})
	if err == nil || err.Error() != `unknown command "lsx"; did you mean "ls"?` {
		t.Errorf("lsx: %v", err)
	}
	_, _, err = sh.parse([]string{"lock", "/ls/local/l", "-shraed"})
	if err == nil || !strings.Contains(err.Error(), "unknown flag -shraed; did you mean -shared?") {
		t.Errorf("lock -shraed: %v", err)
	}
}

func TestCompleteWithoutCell(t *testing.T) {
	sh := &shell{tty: true, cwd: "/ls/local"}
	for _, tc := range []struct {
		line string
		want []string
	}{
		{"", commandNames()},
		{"s", []string{"stat ", "seq ", "session ", "snapshot ", "sleep "}},
		{"re", []string{"remove-server "}},
		{"lock /ls/local/l -", []string{"-shared ", "-delay "}},
		{"lock /ls/local/l -d", []string{"-delay "}},
		{"write /ls/local/f x -s", []string{"-seq "}},
		{"help lo", []string{"lock "}},
		{"lock /ls/local/l -delay ", nil},               // a duration
		{"lock /ls/local/l -- ", nil},                   // CMD
		{"write /ls/local/f ", nil},                     // DATA
		{"nosuch ", nil},                                // no command
		{"cat '/ls/lo", nil},                            // inside a quote
		{"checkseq ", nil},                              // no locks held
		{"cas /ls/local/f 3 ", nil},                     // DATA
		{"trylock -shared /ls/local/x -delay 1s ", nil}, // all positionals given
	} {
		words, cur, ok := completionWords(tc.line)
		var got []string
		if ok {
			if len(words) == 0 && cur == "" {
				got, _ = sh.complete(nil, "")
				for i := range got {
					got[i] = strings.TrimSuffix(got[i], " ")
				}
			} else {
				got, _ = sh.complete(words, cur)
			}
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("complete(%q) = %q, want %q", tc.line, got, tc.want)
		}
	}
	words, cur, _ := completionWords(`write "a b" c\ d e`)
	if !slices.Equal(words, []string{"write", "a b", "c d"}) || cur != "e" {
		t.Errorf("completionWords: %q %q", words, cur)
	}
}

func TestHumanDuration(t *testing.T) {
	for d, want := range map[time.Duration]string{
		16 * time.Millisecond:                         "16ms",
		12345 * time.Millisecond:                      "12.3s",
		2*time.Minute + 13400*time.Millisecond:        "2m13s",
		3*time.Hour + 12*time.Minute + 40*time.Second: "3h13m",
		50 * time.Hour:                                "2d2h",
	} {
		if got := humanDuration(d); got != want {
			t.Errorf("humanDuration(%v) = %q, want %q", d, got, want)
		}
	}
}

func TestEveryCommandHasHelp(t *testing.T) {
	for _, c := range commands {
		if c.usage == "" || c.help == "" || c.example == "" || !strings.HasPrefix(c.example, c.name) || !slices.Contains(groups, c.group) {
			t.Errorf("command %s: usage %q, help %q, example %q, group %q", c.name, c.usage, c.help, c.example, c.group)
		}
	}
}
