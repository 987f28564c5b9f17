package main

import "strings"

// nearest returns the candidate closest to word, for "did you mean"
// messages: the one at the smallest edit distance (insertions, deletions,
// substitutions and swaps of neighbours count one each) if that distance is
// small for the word's length (and leaves something of the word), else the
// only candidate word is a prefix of.
// ok is false when nothing is close enough to be a useful guess.
func nearest(word string, candidates []string) (best string, ok bool) {
	if word == "" {
		return "", false
	}
	limit := 1
	if len(word) > 4 {
		limit = 2
	}
	bestD := limit + 1
	for _, c := range candidates {
		if d := editDistance(word, c); d < bestD {
			best, bestD = c, d
		}
	}
	if bestD <= limit && bestD < len(word) {
		return best, true
	}
	var prefixed []string
	for _, c := range candidates {
		if len(word) >= 2 && strings.HasPrefix(c, word) {
			prefixed = append(prefixed, c)
		}
	}
	if len(prefixed) == 1 {
		return prefixed[0], true
	}
	return "", false
}

// editDistance is the optimal-string-alignment distance between a and b
// (Levenshtein plus transposition of adjacent bytes).
func editDistance(a, b string) int {
	// d[i][j]: distance between a[:i] and b[:j]; three rows suffice.
	prev2 := make([]int, len(b)+1)
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(b)]
}
