// Package textdiff renders compact unified diffs of text files for --diff.
package textdiff

import (
	"bytes"
	"fmt"
	"strings"
)

// maxDiffCells bounds the LCS table (lines of old × lines of new after the
// common head and tail are trimmed) so a huge rewrite cannot exhaust memory.
const maxDiffCells = 4 << 20

// IsText is a cheap binary check: text has no NUL in its first 8 KiB.
func IsText(b []byte) bool {
	if len(b) > 8192 {
		b = b[:8192]
	}
	return bytes.IndexByte(b, 0) < 0
}

// Unified renders a compact unified diff (3 lines of context) from old
// to new. It returns "" when they are equal and a one-line note for binary
// content.
func Unified(path string, old, new []byte, oldExists bool) string {
	if bytes.Equal(old, new) && oldExists {
		return ""
	}
	if !IsText(old) || !IsText(new) {
		return fmt.Sprintf("Binary files %s differ\n", path)
	}
	a, b := diffLines(old), diffLines(new)
	ops := diffOps(a, b)
	from := "a/" + strings.TrimPrefix(path, "/")
	if !oldExists {
		from = "/dev/null"
	}
	var out strings.Builder
	fmt.Fprintf(&out, "--- %s\n+++ b/%s\n", from, strings.TrimPrefix(path, "/"))
	writeHunks(&out, ops, 3)
	return out.String()
}

func diffLines(b []byte) []string {
	if len(b) == 0 {
		return nil
	}
	s := string(b)
	lines := strings.SplitAfter(s, "\n")
	if lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	return lines
}

type diffOp struct {
	kind byte // ' ', '-', '+'
	line string
	aIdx int // line number in old (0-based) for ' ' and '-'
	bIdx int // line number in new for ' ' and '+'
}

// diffOps computes a line edit script with a longest-common-subsequence
// table over the part that differs.
func diffOps(a, b []string) []diffOp {
	pre := 0
	for pre < len(a) && pre < len(b) && a[pre] == b[pre] {
		pre++
	}
	suf := 0
	for suf < len(a)-pre && suf < len(b)-pre && a[len(a)-1-suf] == b[len(b)-1-suf] {
		suf++
	}
	var ops []diffOp
	for i := 0; i < pre; i++ {
		ops = append(ops, diffOp{' ', a[i], i, i})
	}
	ma, mb := a[pre:len(a)-suf], b[pre:len(b)-suf]
	n, m := len(ma), len(mb)
	if n*m > maxDiffCells {
		for i, l := range ma {
			ops = append(ops, diffOp{'-', l, pre + i, 0})
		}
		for j, l := range mb {
			ops = append(ops, diffOp{'+', l, 0, pre + j})
		}
	} else {
		// lcs[i][j] is the LCS length of ma[i:] and mb[j:].
		lcs := make([][]int32, n+1)
		for i := range lcs {
			lcs[i] = make([]int32, m+1)
		}
		for i := n - 1; i >= 0; i-- {
			for j := m - 1; j >= 0; j-- {
				if ma[i] == mb[j] {
					lcs[i][j] = lcs[i+1][j+1] + 1
				} else {
					lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
				}
			}
		}
		i, j := 0, 0
		for i < n || j < m {
			switch {
			case i < n && j < m && ma[i] == mb[j]:
				ops = append(ops, diffOp{' ', ma[i], pre + i, pre + j})
				i++
				j++
			case i < n && (j == m || lcs[i+1][j] >= lcs[i][j+1]):
				ops = append(ops, diffOp{'-', ma[i], pre + i, 0})
				i++
			default:
				ops = append(ops, diffOp{'+', mb[j], 0, pre + j})
				j++
			}
		}
	}
	for k := 0; k < suf; k++ {
		ops = append(ops, diffOp{' ', a[len(a)-suf+k], len(a) - suf + k, len(b) - suf + k})
	}
	return ops
}

// writeHunks groups changes with ctx lines of context into @@ hunks.
func writeHunks(out *strings.Builder, ops []diffOp, ctx int) {
	// Positions in old/new before each op, to number the hunks.
	aPos, bPos := make([]int, len(ops)+1), make([]int, len(ops)+1)
	for k, op := range ops {
		aPos[k+1], bPos[k+1] = aPos[k], bPos[k]
		if op.kind != '+' {
			aPos[k+1]++
		}
		if op.kind != '-' {
			bPos[k+1]++
		}
	}
	k := 0
	for k < len(ops) {
		for k < len(ops) && ops[k].kind == ' ' {
			k++
		}
		if k == len(ops) {
			return
		}
		start := max(k-ctx, 0)
		end := k
		// Extend while the next change is within 2*ctx unchanged lines.
		for end < len(ops) {
			if ops[end].kind != ' ' {
				end++
				continue
			}
			run := end
			for run < len(ops) && ops[run].kind == ' ' {
				run++
			}
			if run == len(ops) || run-end > 2*ctx {
				end = min(end+ctx, len(ops))
				break
			}
			end = run
		}
		aStart, bStart := aPos[start], bPos[start]
		aLen, bLen := aPos[end]-aStart, bPos[end]-bStart
		fmt.Fprintf(out, "@@ -%s +%s @@\n", hunkRange(aStart, aLen), hunkRange(bStart, bLen))
		for _, op := range ops[start:end] {
			out.WriteByte(op.kind)
			out.WriteString(op.line)
			if !strings.HasSuffix(op.line, "\n") {
				out.WriteString("\n\\ No newline at end of file\n")
			}
		}
		k = end
	}
}

func hunkRange(start, n int) string {
	if n == 0 {
		return fmt.Sprintf("%d,0", start)
	}
	if n == 1 {
		return fmt.Sprintf("%d", start+1)
	}
	return fmt.Sprintf("%d,%d", start+1, n)
}
