// Package hostrange expands the host ranges of roleGroups members
// (node[1:3] is node1, node2, node3), within bounds.
package hostrange

import (
	"fmt"
	"strconv"
	"strings"
)

// MaxRangeHosts caps one range so a typo such as node[1:100000000] is an
// error, not a hang.
const MaxRangeHosts = 10000

// MaxTotalRangeHosts caps the names all roleGroups members expand to
// together, checked before any is expanded: many ranges of MaxRangeHosts
// each would otherwise take minutes and gigabytes.
const MaxTotalRangeHosts = 30000

// Expand expands a roleGroups member. "node[5:6]" is node5, node6;
// "node[08:10]" keeps the zero padding of its start: node08, node09, node10.
// A member without brackets is returned as is. Text may follow the range
// ("rack[1:2]-a").
func Expand(member string) ([]string, error) {
	r, err := parseRange(member)
	if err != nil {
		return nil, err
	}
	if !r.isRange {
		return []string{member}, nil
	}
	out := make([]string, 0, r.end-r.start+1)
	for i := r.start; i <= r.end; i++ {
		out = append(out, fmt.Sprintf("%s%0*d%s", r.prefix, r.width, i, r.suffix))
	}
	return out, nil
}

// Size is how many names member expands to, without expanding it.
func Size(member string) (int, error) {
	r, err := parseRange(member)
	if err != nil || !r.isRange {
		return 1, err
	}
	return r.end - r.start + 1, nil
}

type hostRange struct {
	isRange        bool
	prefix, suffix string
	start, end     int
	width          int
}

func parseRange(member string) (hostRange, error) {
	open := strings.IndexByte(member, '[')
	closeIdx := strings.IndexByte(member, ']')
	if open < 0 && closeIdx < 0 {
		return hostRange{}, nil
	}
	if open < 0 || closeIdx < open {
		return hostRange{}, fmt.Errorf("%q: unbalanced brackets; a range looks like node[1:3]", member)
	}
	prefix, body, suffix := member[:open], member[open+1:closeIdx], member[closeIdx+1:]
	if strings.ContainsAny(suffix, "[]") || strings.ContainsAny(prefix, "]") {
		return hostRange{}, fmt.Errorf("%q: only one range is allowed per member", member)
	}
	lo, hi, ok := strings.Cut(body, ":")
	if !ok {
		return hostRange{}, fmt.Errorf("%q: a range needs start:end, e.g. node[1:3]", member)
	}
	start, err := rangeBound(member, lo)
	if err != nil {
		return hostRange{}, err
	}
	end, err := rangeBound(member, hi)
	if err != nil {
		return hostRange{}, err
	}
	if start > end {
		return hostRange{}, fmt.Errorf("%q: start %d is greater than end %d", member, start, end)
	}
	if end-start >= MaxRangeHosts {
		return hostRange{}, fmt.Errorf("%q: range of %d hosts is larger than the limit %d", member, end-start+1, MaxRangeHosts)
	}
	width := 0
	if len(lo) > 1 && lo[0] == '0' {
		width = len(lo)
	}
	return hostRange{isRange: true, prefix: prefix, suffix: suffix, start: start, end: end, width: width}, nil
}

func rangeBound(member, s string) (int, error) {
	if s == "" || strings.TrimLeft(s, "0123456789") != "" {
		return 0, fmt.Errorf("%q: range bound %q is not a number", member, s)
	}
	n, err := strconv.Atoi(s)
	// The length cap also bounds the zero padding copied into every name.
	if err != nil || len(s) > 9 {
		return 0, fmt.Errorf("%q: range bound %q is too large", member, s)
	}
	return n, nil
}
