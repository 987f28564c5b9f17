package commalist

import (
	"slices"
	"testing"
)

func TestSplit(t *testing.T) {
	for in, want := range map[string][]string{
		"":                    nil,
		" , ,":                nil,
		"127.0.0.1:7100":      {"127.0.0.1:7100"},
		"a:1, b:2 ,,c:3,":     {"a:1", "b:2", "c:3"},
		"  spaced  ,  out   ": {"spaced", "out"},
	} {
		if got := Split(in); !slices.Equal(got, want) {
			t.Errorf("Split(%q) = %q, want %q", in, got, want)
		}
	}
}
