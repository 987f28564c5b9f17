package hostile

import (
	"strings"
	"testing"

	"github.com/chubby-dev/chubby/testing/proc"
)

// TestDeceptiveNamesRefused replays issue 17, finding 7 (a name with a
// right-to-left override displayed as another name; a zero-width space
// made "ad​min" look like "admin"): chubbysh create and mkdir of such names
// fail with exit 1 and one error line naming the invisible character, and
// nothing is created.
func TestDeceptiveNamesRefused(t *testing.T) {
	s := proc.StartServer(t, proc.Options{LogLevel: "info"})
	for _, tc := range []struct{ name, char string }{
		{"abc\u202Etxt.exe", "U+202E"}, // RIGHT-TO-LEFT OVERRIDE
		{"ad\u200Bmin", "U+200B"},      // ZERO WIDTH SPACE
	} {
		for _, cmd := range []string{"create", "mkdir"} {
			r := s.Sh(t, cmd, root+"/"+tc.name)
			lines := r.StderrLines()
			if r.Code != 1 || len(lines) != 1 || !strings.HasPrefix(lines[0], "chubbysh: ") ||
				!strings.Contains(lines[0], "invisible") || !strings.Contains(lines[0], tc.char) {
				t.Errorf("%s %q: want exit 1 and one line naming the invisible character %s\n%s", cmd, tc.name, tc.char, r)
			}
			t.Logf("%s %q: exit %d: %s", cmd, tc.name, r.Code, strings.TrimSpace(r.Stderr))
		}
	}
	if r := s.Sh(t, "ls", root); r.Code != 0 || r.Stdout != "" {
		t.Errorf("ls after the refusals: want an empty directory\n%s", r)
	}
}
