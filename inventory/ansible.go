package inventory

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/goccy/go-yaml"
)

// Ansible-style inventories, for playbooks that are not about a cluster:
// the YAML form (all: {hosts, vars, children}) and the INI form ([group],
// [group:vars], [group:children]). Connection settings come from the
// ansible_* variables of the host, its groups or all.

// connection variables, and the secret ones kept out of the variables.
var secretVars = map[string]bool{
	"ansible_password": true, "ansible_ssh_pass": true, "ansible_become_password": true,
	"ansible_become_pass": true, "ansible_ssh_private_key_passphrase": true,
}

// builder collects groups and hosts in declaration order.
type builder struct {
	name      string
	hosts     []string
	hostVars  map[string]map[string]any
	groups    []string
	members   map[string][]string // own hosts
	children  map[string][]string
	groupVars map[string]map[string]any
}

func newBuilder(name string) *builder {
	return &builder{name: name, hostVars: map[string]map[string]any{}, members: map[string][]string{},
		children: map[string][]string{}, groupVars: map[string]map[string]any{}}
}

func (b *builder) group(g string) {
	if !slices.Contains(b.groups, g) {
		b.groups = append(b.groups, g)
	}
}

func (b *builder) host(g, h string, vars map[string]any) {
	if _, ok := b.hostVars[h]; !ok {
		b.hosts = append(b.hosts, h)
		b.hostVars[h] = map[string]any{}
	}
	maps.Copy(b.hostVars[h], vars)
	b.group(g)
	if !slices.Contains(b.members[g], h) {
		b.members[g] = append(b.members[g], h)
	}
}

func (b *builder) child(parent, child string) {
	b.group(parent)
	b.group(child)
	if !slices.Contains(b.children[parent], child) {
		b.children[parent] = append(b.children[parent], child)
	}
}

func (b *builder) vars(g string, vars map[string]any) {
	b.group(g)
	if b.groupVars[g] == nil {
		b.groupVars[g] = map[string]any{}
	}
	maps.Copy(b.groupVars[g], vars)
}

// depths gives each group its distance from all: top-level groups are 1,
// their children 2, and a group reached by several paths takes the longest.
func (b *builder) depths() map[string]int {
	d := map[string]int{"all": 0}
	var visit func(g string, n int)
	visit = func(g string, n int) {
		if old, ok := d[g]; (ok && old >= n) || n > 50 {
			return
		}
		d[g] = n
		for _, c := range b.children[g] {
			visit(c, n+1)
		}
	}
	for _, g := range b.groups {
		if g != "all" {
			visit(g, 1)
		}
	}
	for _, c := range b.children["all"] {
		visit(c, 1)
	}
	return d
}

// flatten lists a group's hosts, its children's included, in order.
func (b *builder) flatten(g string, seen map[string]bool) []string {
	if seen[g] {
		return nil
	}
	seen[g] = true
	out := slices.Clone(b.members[g])
	for _, c := range b.children[g] {
		for _, h := range b.flatten(c, seen) {
			if !slices.Contains(out, h) {
				out = append(out, h)
			}
		}
	}
	return out
}

func (b *builder) inventory() (*Inventory, error) {
	if len(b.hosts) == 0 {
		return nil, fmt.Errorf("%s: the inventory lists no host", b.name)
	}
	inv := &Inventory{Groups: map[string][]string{}, GroupVars: map[string]map[string]any{}, Vars: map[string]any{}, Source: b.name}
	maps.Copy(inv.Vars, b.groupVars["all"])
	depth := b.depths()
	grouped := map[string]bool{}
	for g, hs := range b.members {
		if g != "ungrouped" && g != "all" {
			for _, h := range hs {
				grouped[h] = true
			}
		}
	}
	// As in Ansible, ungrouped holds the hosts of no other group.
	b.members["ungrouped"] = slices.DeleteFunc(b.members["ungrouped"], func(h string) bool { return grouped[h] })
	for _, g := range b.groups {
		if g == "all" {
			continue
		}
		inv.Groups[g] = b.flatten(g, map[string]bool{})
	}
	// Ansible orders group variables by depth (a child group overrides its
	// parent), then by name; the engine applies GroupVars by name only, so
	// each host gets its groups' variables resolved here, below its own.
	order := slices.Clone(b.groups)
	slices.SortStableFunc(order, func(x, y string) int {
		if depth[x] != depth[y] {
			return depth[x] - depth[y]
		}
		return strings.Compare(x, y)
	})
	for _, name := range b.hosts {
		vars := map[string]any{}
		for _, g := range order {
			if g != "all" && slices.Contains(inv.Groups[g], name) {
				maps.Copy(vars, b.groupVars[g])
			}
		}
		maps.Copy(vars, b.hostVars[name])
		h := Host{Name: name, Address: name, Vars: vars}
		// The connection settings as the host sees them: all, its groups,
		// then its own.
		eff := maps.Clone(inv.Vars)
		maps.Copy(eff, h.Vars)
		if err := connection(&h, eff); err != nil {
			return nil, fmt.Errorf("%s: host %s: %w", b.name, name, err)
		}
		inv.Hosts = append(inv.Hosts, h)
	}
	for k := range secretVars {
		delete(inv.Vars, k)
	}
	for _, h := range inv.Hosts {
		for k := range secretVars {
			delete(h.Vars, k)
		}
	}
	return inv, nil
}

func str(v any) string {
	if v == nil {
		return ""
	}
	return fmt.Sprint(v)
}

// connection reads the ansible_* connection variables.
func connection(h *Host, v map[string]any) error {
	if a := str(v["ansible_host"]); a != "" {
		h.Address = a
	}
	if p, ok := v["ansible_port"]; ok {
		n, err := strconv.Atoi(str(p))
		if err != nil || n < 1 || n > 65535 {
			return fmt.Errorf("ansible_port %q is not a port number", str(p))
		}
		h.Port = n
	}
	h.User = str(v["ansible_user"])
	h.Password = cmpOr(str(v["ansible_password"]), str(v["ansible_ssh_pass"]))
	h.PrivateKeyPath = cmpOr(str(v["ansible_ssh_private_key_file"]), str(v["ansible_private_key_file"]))
	h.Passphrase = str(v["ansible_ssh_private_key_passphrase"])
	h.BecomePassword = cmpOr(str(v["ansible_become_password"]), str(v["ansible_become_pass"]))
	h.CredentialsHint = "set ansible_ssh_private_key_file (with ansible_ssh_private_key_passphrase when it is " +
		"encrypted) or ansible_password for this host in the inventory, its host_vars or group_vars"
	switch c := str(v["ansible_connection"]); c {
	case "", "ssh", "smart", "paramiko":
	case "local":
		h.Local = true
	default:
		return fmt.Errorf("ansible_connection %q: kubexm reaches hosts over ssh or runs them locally (local)", c)
	}
	return nil
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// IsAnsibleYAML says whether data is a YAML inventory in Ansible's form (a
// mapping of groups, each with hosts, vars or children), rather than a
// cluster.yaml (apiVersion, kind).
func IsAnsibleYAML(data []byte) bool {
	var m map[string]any
	if err := yaml.Unmarshal(data, &m); err != nil || len(m) == 0 {
		return false
	}
	if _, ok := m["apiVersion"]; ok {
		return false
	}
	if _, ok := m["kind"]; ok {
		return false
	}
	for _, v := range m {
		g, ok := v.(map[string]any)
		if v == nil {
			continue
		}
		if !ok {
			return false
		}
		for k := range g {
			if k != "hosts" && k != "vars" && k != "children" {
				return false
			}
		}
	}
	return true
}

// LooksLikeINI says whether data is no YAML mapping but has INI sections or
// host lines: what Ansible's INI inventories look like.
func LooksLikeINI(data []byte) bool {
	var m map[string]any
	if yaml.Unmarshal(data, &m) == nil && m != nil {
		return false
	}
	for _, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || line[0] == '#' || line[0] == ';' {
			continue
		}
		return strings.HasPrefix(line, "[") || !strings.Contains(line, ":")
	}
	return false
}

// ParseAnsibleYAML reads an Ansible YAML inventory; name is used in
// messages and as the inventory's Source.
func ParseAnsibleYAML(name string, data []byte) (*Inventory, error) {
	var m yaml.MapSlice
	if err := yaml.UnmarshalWithOptions(data, &m, yaml.UseOrderedMap()); err != nil {
		return nil, fmt.Errorf("%s: %s", name, yaml.FormatError(err, false, true))
	}
	b := newBuilder(name)
	var walk func(g string, v any, depth int) error
	walk = func(g string, v any, depth int) error {
		if depth > 50 {
			return fmt.Errorf("%s: groups nested deeper than 50 levels", name)
		}
		b.group(g)
		if v == nil {
			return nil
		}
		body, ok := v.(yaml.MapSlice)
		if !ok {
			return fmt.Errorf("%s: group %s must be a mapping with hosts, vars and children", name, g)
		}
		for _, kv := range body {
			k := str(kv.Key)
			switch k {
			case "hosts":
				hosts, ok := kv.Value.(yaml.MapSlice)
				if !ok && kv.Value != nil {
					return fmt.Errorf("%s: %s.hosts must be a mapping of host names to their variables", name, g)
				}
				for _, h := range hosts {
					vars, err := plain(h.Value)
					if err != nil {
						return fmt.Errorf("%s: host %s: %w", name, str(h.Key), err)
					}
					names, err := expandRange(str(h.Key))
					if err != nil {
						return fmt.Errorf("%s: %w", name, err)
					}
					for _, n := range names {
						b.host(g, n, maps.Clone(vars))
					}
				}
			case "vars":
				vars, err := plain(kv.Value)
				if err != nil {
					return fmt.Errorf("%s: %s.vars: %w", name, g, err)
				}
				b.vars(g, vars)
			case "children":
				children, ok := kv.Value.(yaml.MapSlice)
				if !ok && kv.Value != nil {
					return fmt.Errorf("%s: %s.children must be a mapping of groups", name, g)
				}
				for _, c := range children {
					b.child(g, str(c.Key))
					if err := walk(str(c.Key), c.Value, depth+1); err != nil {
						return err
					}
				}
			default:
				return fmt.Errorf("%s: group %s: unknown key %q; a group has hosts, vars and children", name, g, k)
			}
		}
		return nil
	}
	for _, kv := range m {
		if err := walk(str(kv.Key), kv.Value, 0); err != nil {
			return nil, err
		}
	}
	return b.inventory()
}

// plain turns a decoded YAML value into map[string]any with plain values.
func plain(v any) (map[string]any, error) {
	if v == nil {
		return map[string]any{}, nil
	}
	data, err := yaml.Marshal(v)
	if err != nil {
		return nil, err
	}
	var m map[string]any
	if err := yaml.Unmarshal(data, &m); err != nil {
		return nil, errors.New("variables must be a mapping")
	}
	return normalize(m).(map[string]any), nil
}

func normalize(v any) any {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			x[k] = normalize(e)
		}
		return x
	case []any:
		for i, e := range x {
			x[i] = normalize(e)
		}
		return x
	case int64:
		return int(x)
	case uint64:
		return int(x)
	}
	return v
}

// ParseAnsibleINI reads an Ansible INI inventory.
func ParseAnsibleINI(name string, data []byte) (*Inventory, error) {
	b := newBuilder(name)
	section, kind := "ungrouped", ""
	sc := bufio.NewScanner(bytes.NewReader(data))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' || line[0] == ';' {
			continue
		}
		where := fmt.Sprintf("%s:%d", name, n)
		if line[0] == '[' {
			if !strings.HasSuffix(line, "]") {
				return nil, fmt.Errorf("%s: section %q is not closed with ]", where, line)
			}
			section, kind, _ = strings.Cut(line[1:len(line)-1], ":")
			if section == "" || (kind != "" && kind != "vars" && kind != "children") {
				return nil, fmt.Errorf("%s: %s: a section is [group], [group:vars] or [group:children]", where, line)
			}
			b.group(section)
			continue
		}
		fields, err := iniFields(line)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", where, err)
		}
		switch kind {
		case "vars":
			k, v, ok := strings.Cut(line, "=")
			if !ok {
				return nil, fmt.Errorf("%s: expected name=value in [%s:vars]", where, section)
			}
			// Ansible reads a [group:vars] value as the string written, quotes
			// included, unlike a host line's values: http_port=80 is "80", so
			// `when: http_port == "80"` holds as it does there.
			b.vars(section, map[string]any{strings.TrimSpace(k): strings.TrimSpace(v)})
		case "children":
			b.child(section, fields[0])
		default:
			if strings.Contains(fields[0], "=") {
				return nil, fmt.Errorf("%s: a host line starts with the host name, then name=value variables", where)
			}
			names, err := expandRange(fields[0])
			if err != nil {
				return nil, fmt.Errorf("%s: %w", where, err)
			}
			vars := map[string]any{}
			for _, f := range fields[1:] {
				k, v, ok := strings.Cut(f, "=")
				if !ok {
					return nil, fmt.Errorf("%s: %q: host variables are name=value", where, f)
				}
				vars[k] = iniValue(v)
			}
			for _, h := range names {
				b.host(section, h, maps.Clone(vars))
			}
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return b.inventory()
}

// iniFields splits a line on spaces, keeping quoted values together and
// dropping a trailing # comment.
func iniFields(line string) ([]string, error) {
	var out []string
	var cur strings.Builder
	quote := rune(0)
	for _, c := range line {
		switch {
		case quote != 0:
			if c == quote {
				quote = 0
			}
			cur.WriteRune(c)
		case c == '"' || c == '\'':
			quote = c
			cur.WriteRune(c)
		case c == '#' && cur.Len() == 0:
			return out, nil
		case c == ' ' || c == '\t':
			if cur.Len() > 0 {
				out = append(out, cur.String())
				cur.Reset()
			}
		default:
			cur.WriteRune(c)
		}
	}
	if quote != 0 {
		return nil, fmt.Errorf("unclosed quote in %q", line)
	}
	if cur.Len() > 0 {
		out = append(out, cur.String())
	}
	return out, nil
}

// iniValue reads a host line's value as a YAML scalar (numbers and
// booleans keep their type, as Ansible's Python literals do), without its
// quotes.
func iniValue(s string) any {
	if len(s) >= 2 && (s[0] == '"' || s[0] == '\'') && s[len(s)-1] == s[0] {
		return s[1 : len(s)-1]
	}
	var v any
	if err := yaml.Unmarshal([]byte(s), &v); err != nil {
		return s
	}
	switch v.(type) {
	case map[string]any, []any, nil:
		return s
	}
	return normalize(v)
}

// rangeRe finds a host range: [01:10], [a:f], [1:10:2].
var rangeRe = regexp.MustCompile(`\[([0-9]+|[a-z]):([0-9]+|[a-z])(?::([0-9]+))?\]`)

// maxRange bounds how many hosts one range line makes.
const maxRange = 10000

// expandRange expands Ansible host ranges: web[01:03] is web01, web02,
// web03 (leading zeros keep the width), db-[a:c] is db-a, db-b, db-c, and
// [1:9:2] steps by 2. A name may hold several ranges.
func expandRange(name string) ([]string, error) {
	loc := rangeRe.FindStringSubmatchIndex(name)
	if loc == nil {
		if strings.ContainsAny(name, "[]") {
			return nil, fmt.Errorf("host %q: a range is [01:10], [a:f] or [1:10:2]", name)
		}
		return []string{name}, nil
	}
	prefix, suffix := name[:loc[0]], name[loc[1]:]
	from, to := name[loc[2]:loc[3]], name[loc[4]:loc[5]]
	step := 1
	if loc[6] >= 0 {
		step, _ = strconv.Atoi(name[loc[6]:loc[7]])
	}
	var items []string
	switch {
	case step < 1:
		return nil, fmt.Errorf("host %q: the step of a range must be at least 1", name)
	case from[0] >= 'a' && to[0] >= 'a':
		for c := from[0]; c <= to[0]; c += byte(step) {
			items = append(items, string(c))
			if int(c)+step > 'z' {
				break
			}
		}
	case from[0] <= '9' && to[0] <= '9':
		a, _ := strconv.Atoi(from)
		z, err := strconv.Atoi(to)
		if err != nil || z-a > maxRange {
			return nil, fmt.Errorf("host %q: a range makes at most %d hosts", name, maxRange)
		}
		width := 0
		if len(from) > 1 && from[0] == '0' {
			width = len(from)
		}
		for i := a; i <= z; i += step {
			items = append(items, fmt.Sprintf("%0*d", width, i))
		}
	default:
		return nil, fmt.Errorf("host %q: a range is numbers or letters, not both", name)
	}
	if len(items) == 0 {
		return nil, fmt.Errorf("host %q: the range is empty", name)
	}
	rest, err := expandRange(suffix)
	if err != nil {
		return nil, err
	}
	if len(items)*len(rest) > maxRange {
		return nil, fmt.Errorf("host %q: a range makes at most %d hosts", name, maxRange)
	}
	var out []string
	for _, it := range items {
		for _, r := range rest {
			out = append(out, prefix+it+r)
		}
	}
	return out, nil
}
