package assign

// Property tests of Balance (pgregory.net/rapid): balance, stickiness,
// the fewest moves, determinism.

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"pgregory.net/rapid"
)

// minMoves is the fewest items any balanced assignment of m items to
// members must move from prev, found by trying every choice of the
// members allowed ⌈m/n⌉ (independently of Balance's greedy choice): an
// item can stay only with a live previous owner, and each member keeps at
// most its quota.
func minMoves(m int, members []string, prev []string) int {
	ms := slices.Clone(members)
	slices.Sort(ms)
	ms = slices.Compact(ms)
	n := len(ms)
	if n == 0 {
		return Moves(prev, make([]string, m))
	}
	count := map[string]int{}
	for i := 0; i < m && i < len(prev); i++ {
		count[prev[i]]++
	}
	owned := 0 // items owned before, in range (they count as moved if their owner changes)
	for i := 0; i < m && i < len(prev); i++ {
		if prev[i] != "" {
			owned++
		}
	}
	q, r := m/n, m%n
	best := -1
	// every subset of size r gets q+1
	var rec func(start, left int, extra []bool)
	rec = func(start, left int, extra []bool) {
		if left == 0 {
			kept := 0
			for k, name := range ms {
				quota := q
				if extra[k] {
					quota++
				}
				kept += min(count[name], quota)
			}
			best = max(best, kept)
			return
		}
		for k := start; k <= n-left; k++ {
			extra[k] = true
			rec(k+1, left-1, extra)
			extra[k] = false
		}
	}
	rec(0, r, make([]bool, n))
	// Every item in range is assigned to someone: those not kept change
	// owner (from a departed member, or "" to a member); items past m that
	// had an owner lose it.
	moved := m - best
	for i := m; i < len(prev); i++ {
		if prev[i] != "" {
			moved++
		}
	}
	_ = owned
	return moved
}

func genCase(t *rapid.T) (m int, members, prev []string) {
	m = rapid.IntRange(0, 40).Draw(t, "m")
	pool := []string{"a", "b", "c", "d", "e", "f", "g", "h", "i", "j"}
	members = rapid.SliceOfN(rapid.SampledFrom(pool), 0, 10).Draw(t, "members")
	prevLen := rapid.IntRange(0, m+3).Draw(t, "prevLen")
	prev = rapid.SliceOfN(rapid.SampledFrom(append([]string{"", "gone1", "gone2"}, pool...)), prevLen, prevLen).Draw(t, "prev")
	return m, members, prev
}

func distinct(ms []string) []string {
	out := slices.Clone(ms)
	slices.Sort(out)
	return slices.Compact(out)
}

// TestBalanceIsBalanced: every item has a live owner, each owning ⌊m/n⌋
// or ⌈m/n⌉; with no member, nobody owns anything.
func TestBalanceIsBalanced(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		m, members, prev := genCase(t)
		got := Balance(m, members, prev)
		if len(got) != m {
			t.Fatalf("%d owners for %d items", len(got), m)
		}
		ms := distinct(members)
		if len(ms) == 0 {
			for i, o := range got {
				if o != "" {
					t.Fatalf("item %d owned by %q with no member", i, o)
				}
			}
			return
		}
		per := map[string]int{}
		for i, o := range got {
			if !slices.Contains(ms, o) {
				t.Fatalf("item %d owned by %q, not a member of %v", i, o, ms)
			}
			per[o]++
		}
		lo, hi := m/len(ms), (m+len(ms)-1)/len(ms)
		for _, name := range ms {
			if per[name] < lo || per[name] > hi {
				t.Fatalf("%s owns %d items, want %d..%d (m=%d, members %v): %v", name, per[name], lo, hi, m, ms, got)
			}
		}
	})
}

// TestBalanceIsSticky: an item whose previous owner is alive stays with it
// unless that owner holds more than ⌈m/n⌉ of them; and it moves the fewest
// items any balanced assignment could (so within the acceptance's
// "minimum + 1"), checked against an exhaustive search.
func TestBalanceIsSticky(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		m, members, prev := genCase(t)
		got := Balance(m, members, prev)
		ms := distinct(members)
		if len(ms) > 0 {
			hi := (m + len(ms) - 1) / len(ms)
			count := map[string]int{}
			for i := 0; i < m && i < len(prev); i++ {
				count[prev[i]]++
			}
			for i := 0; i < m && i < len(prev); i++ {
				if slices.Contains(ms, prev[i]) && count[prev[i]] <= m/len(ms) && got[i] != prev[i] {
					t.Fatalf("item %d moved from %s, which held %d (≤ ⌊m/n⌋ = %d): %v → %v", i, prev[i], count[prev[i]], m/len(ms), prev, got)
				}
				_ = hi
			}
		}
		if moved, least := Moves(prev, got), minMoves(m, members, prev); moved != least {
			t.Fatalf("moved %d items, the minimum is %d (m=%d members %v): %v → %v", moved, least, m, members, prev, got)
		}
	})
}

// TestBalanceIsDeterministic: the order and duplicates of members do not
// matter, and balancing a balanced assignment again moves nothing.
func TestBalanceIsDeterministic(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		m, members, prev := genCase(t)
		got := Balance(m, members, prev)
		shuffled := slices.Clone(members)
		seed := rapid.Uint64().Draw(t, "seed")
		rand.New(rand.NewPCG(seed, 0)).Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
		shuffled = append(shuffled, shuffled...)
		if again := Balance(m, shuffled, prev); !slices.Equal(got, again) {
			t.Fatalf("members %v gave %v, %v gave %v", members, got, shuffled, again)
		}
		if again := Balance(m, members, got); !slices.Equal(got, again) {
			t.Fatalf("re-balancing a balanced assignment moved %d items: %v → %v", Moves(got, again), got, again)
		}
	})
}

// TestBalanceJoinLeaveMovesMinimum: from a balanced assignment, one member
// joining or leaving moves exactly the items it must: a joiner takes
// ⌊m/(n+1)⌋ items (one more at most when the quotas shift), a leaver's
// items go to the others.
func TestBalanceJoinLeaveMovesMinimum(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		m := rapid.IntRange(1, 60).Draw(t, "m")
		n := rapid.IntRange(1, 9).Draw(t, "n")
		var ms []string
		for i := range n {
			ms = append(ms, fmt.Sprintf("m%d", i))
		}
		base := Balance(m, ms, nil)
		// join
		joined := Balance(m, append(slices.Clone(ms), "new"), base)
		took := 0
		for _, o := range joined {
			if o == "new" {
				took++
			}
		}
		if moved := Moves(base, joined); moved != took || moved != m/(n+1) {
			t.Fatalf("join: moved %d, the joiner took %d, want ⌊%d/%d⌋ = %d", moved, took, m, n+1, m/(n+1))
		}
		// leave
		gone := rapid.IntRange(0, n-1).Draw(t, "gone")
		left := slices.Delete(slices.Clone(ms), gone, gone+1)
		after := Balance(m, left, base)
		had := 0
		for _, o := range base {
			if o == ms[gone] {
				had++
			}
		}
		if len(left) > 0 {
			if moved := Moves(base, after); moved != had {
				t.Fatalf("leave of %s: moved %d, it held %d", ms[gone], moved, had)
			}
		}
	})
}

// TestBalanceExample: a worked case.
func TestBalanceExample(t *testing.T) {
	prev := []string{"a", "a", "a", "a", "b", "b", "b", "gone", "gone", ""}
	got := Balance(10, []string{"c", "b", "a"}, prev)
	want := []string{"a", "a", "a", "a", "b", "b", "b", "c", "c", "c"}
	if !slices.Equal(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
}
