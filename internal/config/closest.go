package config

import "strings"

// Closest returns the candidate nearest to word by edit distance (case-insensitive), for "did you
// mean" hints on mistyped keys, variables, flags and commands; ok is false when none is near
// (more than a third of the word, at least 2 edits, differs).
func Closest(word string, candidates []string) (best string, ok bool) {
	w := strings.ToLower(word)
	bestD := -1
	for _, c := range candidates {
		d := EditDistance(w, strings.ToLower(c))
		if bestD < 0 || d < bestD {
			best, bestD = c, d
		}
	}
	return best, bestD >= 0 && bestD <= max(2, len(w)/3)
}

// EditDistance is the Levenshtein distance of a and b (bytes; keys and flags are ASCII).
func EditDistance(a, b string) int {
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
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
