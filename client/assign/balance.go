package assign

// The balancing algorithm: pure, deterministic, no I/O.

import (
	"slices"
	"sort"
)

// Balance returns the owner of each of m items (index i: item i; "" for
// none) given the live members and the previous owners (prev[i]; items
// past len(prev) had none). The result is:
//
//   - balanced: with n members, each owns ⌊m/n⌋ or ⌈m/n⌉ items (every item
//     is owned when n > 0; none when n == 0);
//   - sticky, with the fewest moves: an item stays with its previous owner
//     while that owner is alive and under its quota. The m mod n members
//     allowed ⌈m/n⌉ are those that held the most items before (ties by
//     name), so the items that move — those of departed members and a
//     member's surplus over its quota — are exactly the minimum any
//     balanced assignment must move;
//   - deterministic: a function of m, the set of members (order and
//     duplicates do not matter) and prev. Freed items go, lowest number
//     first, to the members below quota in name order.
//
// A member keeps its lowest-numbered items when it must give some up.
func Balance(m int, members []string, prev []string) []string {
	owner := make([]string, max(m, 0))
	ms := slices.Clone(members)
	slices.Sort(ms)
	ms = slices.Compact(ms)
	if len(ms) > 0 && ms[0] == "" {
		ms = ms[1:] // "" names no member
	}
	n := len(ms)
	if n == 0 || m <= 0 {
		return owner
	}
	alive := make(map[string]int, n)
	for i, name := range ms {
		alive[name] = i
	}
	cur := make([][]int, n) // each member's previous items, ascending
	for i := 0; i < m && i < len(prev); i++ {
		if k, ok := alive[prev[i]]; ok {
			cur[k] = append(cur[k], i)
		}
	}
	// The m mod n extra slots go to the members holding the most.
	q, r := m/n, m%n
	order := make([]int, n)
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool { return len(cur[order[a]]) > len(cur[order[b]]) })
	quota := make([]int, n)
	for rank, k := range order {
		quota[k] = q
		if rank < r {
			quota[k] = q + 1
		}
	}
	have := make([]int, n)
	for k, items := range cur {
		for _, i := range items[:min(len(items), quota[k])] {
			owner[i] = ms[k]
			have[k]++
		}
	}
	k := 0
	for i := range owner {
		if owner[i] != "" {
			continue
		}
		for have[k] >= quota[k] {
			k++
		}
		owner[i] = ms[k]
		have[k]++
	}
	return owner
}

// Moves counts the items whose owner differs between two assignments
// (an item missing from one has no owner there).
func Moves(prev, next []string) int {
	n := 0
	for i := range max(len(prev), len(next)) {
		var a, b string
		if i < len(prev) {
			a = prev[i]
		}
		if i < len(next) {
			b = next[i]
		}
		if a != b {
			n++
		}
	}
	return n
}
