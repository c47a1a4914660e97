package engine

import (
	"fmt"
	"sort"

	"github.com/mensylisir/kubexm/engine/suggest"
)

// didYouMean returns ` (did you mean "x"?)` for the closest candidate, or ""
// when nothing is close.
func didYouMean(got string, candidates []string) string {
	best := suggest.Closest(got, candidates)
	if best == "" {
		return ""
	}
	return fmt.Sprintf(" (did you mean %q?)", best)
}

func keysOf[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
