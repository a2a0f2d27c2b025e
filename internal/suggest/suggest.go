// Package suggest finds the name a user most likely meant when one they
// typed is unknown, for "did you mean" hints in errors.
package suggest

import (
	"strconv"
	"strings"
)

// Closest returns the candidate nearest to s: the one with the fewest
// single-letter edits, if at most a third of s's length (at least 1) apart,
// or the only candidate s is a prefix of; "" when none is close.
func Closest(s string, candidates []string) string {
	best, bestDist := "", max(len(s)/3, 1)+1
	prefixed := ""
	nPrefixed := 0
	for _, c := range candidates {
		if d := editDistance(s, c); d < bestDist {
			best, bestDist = c, d
		}
		if len(s) >= 2 && strings.HasPrefix(c, s) {
			prefixed = c
			nPrefixed++
		}
	}
	if best == "" && nPrefixed == 1 {
		return prefixed
	}
	return best
}

// editDistance counts the single-letter insertions, deletions,
// substitutions and swaps of two neighbours that turn a into b (optimal
// string alignment distance, in bytes).
func editDistance(a, b string) int {
	d := make([][]int, len(a)+1)
	for i := range d {
		d[i] = make([]int, len(b)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(a); i++ {
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(a)][len(b)]
}

// Hint is `; did you mean "x"?` for the candidate closest to s, or "" when
// none is close: the tail of an error that names an unknown s.
func Hint(s string, candidates []string) string {
	if best := Closest(s, candidates); best != "" {
		return "; did you mean " + strconv.Quote(best) + "?"
	}
	return ""
}
