// Package suggest finds the name a user most likely meant, for "did you
// mean" hints on unknown keys, builtins, variables and functions.
package suggest

import (
	"fmt"
	"strings"
)

// Closest returns the candidate most likely meant by got, or "" when none is
// close enough to be a typo: within a third of got's length (at least two
// edits), compared without case. Ties go to the candidate sharing more
// letters with got ("taks" is closer to "tasks" than to "tags"), then to the
// earlier one.
func Closest(got string, candidates []string) string {
	lg := strings.ToLower(got)
	best, bestD := "", -1
	for _, c := range candidates {
		lc := strings.ToLower(c)
		d := Distance(lg, lc)
		if bestD < 0 || d < bestD || (d == bestD && shared(lg, lc) > shared(lg, strings.ToLower(best))) {
			best, bestD = c, d
		}
	}
	if bestD < 0 || bestD > max(2, len([]rune(got))/3) {
		return ""
	}
	return best
}

// Distance is the optimal string alignment distance: Levenshtein plus a swap
// of neighbours as one edit, the commonest typo (prot for port).
func Distance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	// Three rolling rows: the swap rule looks two rows back.
	prev2 := make([]int, len(rb)+1)
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && ra[i-1] == rb[j-2] && ra[i-2] == rb[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(rb)]
}

// shared counts the letters of a also found in b.
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

// DidYouMean suggests the candidate closest to got, or "" when none is close
// enough to be a likely typo.
func DidYouMean(got string, candidates []string) string {
	best := Closest(got, candidates)
	if best == "" {
		return ""
	}
	return fmt.Sprintf("did you mean %q?", best)
}

// Command is the name got most likely stands for among a command's
// subcommand names and aliases: a typo of one (at most a third of got's
// letters wrong, so that kubectl's "pods" does not become "nodes"), else
// the one whose start got is, when every name got starts is the same
// subcommand (same says whether two names are); "" for none.
func Command(got string, names []string, same func(a, b string) bool) string {
	lg := strings.ToLower(got)
	best, bestD := "", -1
	for _, n := range names {
		if d := Distance(lg, n); d <= max(1, len(lg)/3) && (bestD < 0 || d < bestD) {
			best, bestD = n, d
		}
	}
	if best != "" {
		return best
	}
	for _, n := range names {
		if !strings.HasPrefix(n, lg) {
			continue
		}
		if best != "" && !same(best, n) {
			return "" // the start of two commands' names
		}
		if best == "" {
			best = n
		}
	}
	return best
}
