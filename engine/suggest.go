package engine

import (
	"fmt"
	"sort"
)

// didYouMean returns ` (did you mean "x"?)` for the closest candidate, or ""
// when nothing is close.
func didYouMean(got string, candidates []string) string {
	best, bestD := "", 1<<30
	for _, c := range candidates {
		d := editDistance(got, c)
		if d < bestD || (d == bestD && shared(got, c) > shared(got, best)) {
			best, bestD = c, d
		}
	}
	limit := len(got) / 3
	if limit < 2 {
		limit = 2
	}
	if best == "" || bestD > limit {
		return ""
	}
	return fmt.Sprintf(" (did you mean %q?)", best)
}

func editDistance(a, b string) int {
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

func keysOf[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// shared counts the letters of a also found in b, to break ties between
// equally distant candidates ("taks" is closer to "tasks" than to "tags").
func shared(a, b string) int {
	counts := map[rune]int{}
	for _, r := range b {
		counts[r]++
	}
	n := 0
	for _, r := range a {
		if counts[r] > 0 {
			counts[r]--
			n++
		}
	}
	return n
}
