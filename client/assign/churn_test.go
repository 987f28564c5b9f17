package assign_test

import (
	"testing"

	"github.com/chubby-dev/chubby/client/assign"
)

// TestChurnMovesWithinOneOfMinimum (issue 14, acceptance 2): members join
// and leave one at a time — ten changes over twelve items, leaves by Leave
// and one by a member cut off from the cell — and after each change has
// settled, the number of items whose owner changed is at most one more
// than the minimum any balanced assignment must move (assign.MinMoves: an
// exhaustive search, independent of Balance). Every item is owned exactly
// once after each change (settle checks it).
func TestChurnMovesWithinOneOfMinimum(t *testing.T) {
	const m = 12
	g := newGroup(t, m)
	live := []string{"a", "b", "c"}
	for _, n := range live {
		g.join(n)
	}
	prev := g.settle(live...)
	changes := []struct {
		name string
		join bool
		cut  bool
	}{
		{"d", true, false}, {"e", true, false}, {"b", false, false}, {"f", true, false}, {"a", false, true},
		{"g", true, false}, {"d", false, false}, {"e", false, false}, {"h", true, false}, {"c", false, false},
	}
	total := 0
	for i, ch := range changes {
		switch {
		case ch.join:
			g.join(ch.name)
			live = append(live, ch.name)
		case ch.cut:
			g.proxies[ch.name].Blackhole()
			live = remove(live, ch.name)
		default:
			if err := g.members[ch.name].Leave(ctxT(t)); err != nil {
				t.Fatal(err)
			}
			live = remove(live, ch.name)
		}
		next := g.settle(live...)
		moved := assign.Moves(prev.Owners(), next.Owners())
		least := assign.MinMoves(m, live, prev.Owners())
		what := "leaves"
		switch {
		case ch.join:
			what = "joins"
		case ch.cut:
			what = "dies"
		}
		t.Logf("change %d: %s %s → %d members, %d items moved (minimum %d)", i+1, ch.name, what, len(live), moved, least)
		if moved > least+1 {
			t.Errorf("change %d (%s %s): %d items moved, minimum %d", i+1, ch.name, what, moved, least)
		}
		total += moved
		prev = next
	}
	t.Logf("%d changes moved %d items in all", len(changes), total)
	checkRevokedBeforeAssigned(t, g.callbacks())
}

func remove(s []string, x string) []string {
	var out []string
	for _, v := range s {
		if v != x {
			out = append(out, v)
		}
	}
	return out
}
