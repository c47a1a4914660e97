package pki

import (
	"fmt"
	"strings"
)

// maxDiffCells bounds the LCS table; past it the whole old file is shown
// removed and the new one added.
const maxDiffCells = 1 << 20

// lineDiff renders old -> new as one unified-diff hunk with full context:
// kubeconfigs are a few dozen lines, so hunking would hide little.
func lineDiff(path string, old, new []byte, oldExists bool) string {
	a, b := splitLines(old), splitLines(new)
	from := "a/" + strings.TrimPrefix(path, "/")
	if !oldExists {
		from = "/dev/null"
	}
	var out strings.Builder
	fmt.Fprintf(&out, "--- %s\n+++ b/%s\n@@ -%d,%d +%d,%d @@\n", from, strings.TrimPrefix(path, "/"),
		min(1, len(a)), len(a), min(1, len(b)), len(b))
	for _, l := range diffLines(a, b) {
		out.WriteString(l)
		if !strings.HasSuffix(l, "\n") {
			out.WriteString("\n\\ No newline at end of file\n")
		}
	}
	return out.String()
}

func splitLines(b []byte) []string {
	if len(b) == 0 {
		return nil
	}
	lines := strings.SplitAfter(string(b), "\n")
	if lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	return lines
}

// diffLines returns the lines of a and b prefixed with ' ', '-' or '+',
// following a longest common subsequence.
func diffLines(a, b []string) []string {
	var out []string
	if len(a)*len(b) > maxDiffCells {
		for _, l := range a {
			out = append(out, "-"+l)
		}
		for _, l := range b {
			out = append(out, "+"+l)
		}
		return out
	}
	// lcs[i][j] is the LCS length of a[i:] and b[j:].
	lcs := make([][]int, len(a)+1)
	for i := range lcs {
		lcs[i] = make([]int, len(b)+1)
	}
	for i := len(a) - 1; i >= 0; i-- {
		for j := len(b) - 1; j >= 0; j-- {
			if a[i] == b[j] {
				lcs[i][j] = lcs[i+1][j+1] + 1
			} else {
				lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
			}
		}
	}
	i, j := 0, 0
	for i < len(a) || j < len(b) {
		switch {
		case i < len(a) && j < len(b) && a[i] == b[j]:
			out = append(out, " "+a[i])
			i++
			j++
		case i < len(a) && (j == len(b) || lcs[i+1][j] >= lcs[i][j+1]):
			out = append(out, "-"+a[i])
			i++
		default:
			out = append(out, "+"+b[j])
			j++
		}
	}
	return out
}
