package playbook

import (
	"fmt"
	"path"
	"regexp"
	"strconv"
	"strings"

	"github.com/mensylisir/kubexm/inventory"
)

// Host patterns follow Ansible: parts separated by ":" or ",", each a group,
// a host, "all" or a glob, optionally subscripted (web[0], web[-1],
// web[1:3], web[2:]); "&part" intersects and "!part" excludes.

func splitPattern(p string) []string {
	var out []string
	depth, start := 0, 0
	add := func(s string) {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	for i, c := range p {
		switch {
		case c == '[':
			depth++
		case c == ']' && depth > 0:
			depth--
		case (c == ':' || c == ',') && depth == 0:
			add(p[start:i])
			start = i + 1
		}
	}
	add(p[start:])
	return out
}

// subscriptRe matches a part with an Ansible subscript: name[i] or
// name[a:b] with optional, possibly negative, bounds.
var subscriptRe = regexp.MustCompile(`^(.+)\[(-?\d*)(:(-?\d*))?\]$`)

// subscript applies [i] or [a:b] (end excluded, as in Python and Ansible)
// to hosts.
func subscript(hosts []string, from, colon, to string) []string {
	n := len(hosts)
	idx := func(s string, def int) int {
		if s == "" {
			return def
		}
		i, _ := strconv.Atoi(s)
		if i < 0 {
			i += n
		}
		return max(0, min(i, n))
	}
	if colon == "" {
		i, _ := strconv.Atoi(from)
		if i < 0 {
			i += n
		}
		if i < 0 || i >= n {
			return nil
		}
		return hosts[i : i+1]
	}
	a, b := idx(from, 0), idx(to, n)
	if a >= b {
		return nil
	}
	return hosts[a:b]
}

func CheckPattern(p string) error {
	parts := splitPattern(p)
	if len(parts) == 0 {
		return fmt.Errorf("empty host pattern")
	}
	for _, s := range parts {
		name := strings.TrimLeft(s, "&!")
		if name == "" || len(s)-len(name) > 1 {
			return fmt.Errorf("bad part %q in host pattern %q", s, p)
		}
		if m := subscriptRe.FindStringSubmatch(name); m != nil && (m[2] != "" || m[3] != "") {
			name = m[1]
		}
		if _, err := path.Match(name, ""); err != nil {
			return fmt.Errorf("bad glob %q in host pattern %q", name, p)
		}
	}
	return nil
}

// MatchHosts resolves a pattern to host names in inventory order. Names that
// are neither hosts nor groups are returned in unknown, so callers can warn.
func MatchHosts(inv *inventory.Inventory, pattern string) (hosts, unknown []string, err error) {
	if err := CheckPattern(pattern); err != nil {
		return nil, nil, err
	}
	all := AllHostNames(inv)
	var union []string
	inUnion := map[string]bool{}
	var inter []map[string]bool
	excl := map[string]bool{}
	for _, part := range splitPattern(pattern) {
		op := byte(0)
		if part[0] == '&' || part[0] == '!' {
			op, part = part[0], part[1:]
		}
		set, known := matchOne(inv, all, part)
		if !known {
			unknown = append(unknown, part)
		}
		switch op {
		case '&':
			m := map[string]bool{}
			for _, h := range set {
				m[h] = true
			}
			inter = append(inter, m)
		case '!':
			for _, h := range set {
				excl[h] = true
			}
		default:
			for _, h := range set {
				if !inUnion[h] {
					inUnion[h] = true
					union = append(union, h)
				}
			}
		}
	}
	// Keep inventory order, whatever the order of the pattern.
	order := map[string]int{}
	for i, h := range all {
		order[h] = i
	}
	for _, h := range all {
		if !inUnion[h] || excl[h] {
			continue
		}
		ok := true
		for _, m := range inter {
			if !m[h] {
				ok = false
				break
			}
		}
		if ok {
			hosts = append(hosts, h)
		}
	}
	return hosts, unknown, nil
}

// AllHostNames lists the inventory hosts, plus localhost, which is always
// addressable.
func AllHostNames(inv *inventory.Inventory) []string {
	out := make([]string, 0, len(inv.Hosts)+1)
	hasLocal := false
	for _, h := range inv.Hosts {
		out = append(out, h.Name)
		if h.Name == inventory.Localhost {
			hasLocal = true
		}
	}
	if !hasLocal {
		out = append(out, inventory.Localhost)
	}
	return out
}

func matchOne(inv *inventory.Inventory, all []string, part string) ([]string, bool) {
	if m := subscriptRe.FindStringSubmatch(part); m != nil && (m[2] != "" || m[3] != "") {
		if set, known := matchOne(inv, all, m[1]); known {
			return subscript(set, m[2], m[3], m[4]), true
		}
	}
	if part == "all" || part == "*" {
		// all means the inventory's hosts; localhost joins only when named.
		var out []string
		for _, h := range inv.Hosts {
			out = append(out, h.Name)
		}
		return out, true
	}
	if g, ok := inv.Groups[part]; ok {
		return g, true
	}
	if part == inventory.Localhost {
		return []string{part}, true
	}
	if _, ok := inv.Host(part); ok {
		return []string{part}, true
	}
	if strings.ContainsAny(part, "*?[") {
		seen := map[string]bool{}
		var out []string
		for _, h := range inv.Hosts {
			if ok, _ := path.Match(part, h.Name); ok && !seen[h.Name] {
				seen[h.Name] = true
				out = append(out, h.Name)
			}
		}
		for g, members := range inv.Groups {
			if ok, _ := path.Match(part, g); ok {
				for _, h := range members {
					if !seen[h] {
						seen[h] = true
						out = append(out, h)
					}
				}
			}
		}
		return out, true
	}
	return nil, false
}

// CheckLimit refuses a --limit pattern that is malformed or matches no host.
func CheckLimit(inv *inventory.Inventory, limit string) error {
	if limit == "" {
		return nil
	}
	if err := CheckPattern(limit); err != nil {
		return fmt.Errorf("--limit: %w", err)
	}
	if hosts, _, err := MatchHosts(inv, limit); err != nil {
		return fmt.Errorf("--limit: %w", err)
	} else if len(hosts) == 0 {
		return fmt.Errorf("--limit %q matches no host of the inventory (hosts: %s); `--list-hosts` shows what each play targets",
			limit, strings.Join(AllHostNames(inv), ", "))
	}
	return nil
}
