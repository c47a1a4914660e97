package schema

import (
	"fmt"
	"strconv"
	"strings"
)

// maxRangeHosts caps one range so a typo such as node[1:100000000] is an
// error, not a hang.
const maxRangeHosts = 10000

// ExpandRange expands a roleGroups member. "node[5:6]" is node5, node6;
// "node[08:10]" keeps the zero padding of its start: node08, node09, node10.
// A member without brackets is returned as is. Text may follow the range
// ("rack[1:2]-a").
func ExpandRange(member string) ([]string, error) {
	open := strings.IndexByte(member, '[')
	closeIdx := strings.IndexByte(member, ']')
	if open < 0 && closeIdx < 0 {
		return []string{member}, nil
	}
	if open < 0 || closeIdx < open {
		return nil, fmt.Errorf("%q: unbalanced brackets; a range looks like node[1:3]", member)
	}
	prefix, body, suffix := member[:open], member[open+1:closeIdx], member[closeIdx+1:]
	if strings.ContainsAny(suffix, "[]") || strings.ContainsAny(prefix, "]") {
		return nil, fmt.Errorf("%q: only one range is allowed per member", member)
	}
	lo, hi, ok := strings.Cut(body, ":")
	if !ok {
		return nil, fmt.Errorf("%q: a range needs start:end, e.g. node[1:3]", member)
	}
	start, err := rangeBound(member, lo)
	if err != nil {
		return nil, err
	}
	end, err := rangeBound(member, hi)
	if err != nil {
		return nil, err
	}
	if start > end {
		return nil, fmt.Errorf("%q: start %d is greater than end %d", member, start, end)
	}
	if end-start >= maxRangeHosts {
		return nil, fmt.Errorf("%q: range of %d hosts is larger than the limit %d", member, end-start+1, maxRangeHosts)
	}
	width := 0
	if len(lo) > 1 && lo[0] == '0' {
		width = len(lo)
	}
	out := make([]string, 0, end-start+1)
	for i := start; i <= end; i++ {
		out = append(out, fmt.Sprintf("%s%0*d%s", prefix, width, i, suffix))
	}
	return out, nil
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
