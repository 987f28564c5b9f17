package assign

import (
	"errors"
	"slices"
	"testing"
)

// TestParseTable: empty contents are the empty table; a table round-trips;
// contents this package did not write are ErrBadTable.
func TestParseTable(t *testing.T) {
	if tab, err := parseTable(nil); err != nil || tab.Epoch != 0 || tab.Items != 0 {
		t.Fatalf("empty contents: %+v %v", tab, err)
	}
	tab, err := parseTable([]byte(`{"epoch":3,"items":3,"members":["a","b"],"owner":[0,1,-1]}`))
	if err != nil {
		t.Fatal(err)
	}
	if got := tab.Owners(); !slices.Equal(got, []string{"a", "b", ""}) || !slices.Equal(tab.Of("a"), []int{0}) || tab.OwnerOf(7) != "" {
		t.Fatalf("owners %v, a's %v", got, tab.Of("a"))
	}
	if nt := newTable(4, []string{"a", "b"}, []string{"b", "b", "a"}); !slices.Equal(nt.Owner, []int{1, 1, 0}) || nt.Items != 3 {
		t.Fatalf("newTable: %+v", nt)
	}
	for _, bad := range []string{`not json`, `{"items":2,"owner":[0]}`, `{"items":-1,"owner":[]}`} {
		if _, err := parseTable([]byte(bad)); !errors.Is(err, ErrBadTable) {
			t.Errorf("parseTable(%s): %v, want ErrBadTable", bad, err)
		}
	}
}
