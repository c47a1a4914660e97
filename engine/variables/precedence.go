// Package variables holds what the run's variables are built from, apart from
// the run's state: the order of the levels, the order in which templated
// variables render (by what they read), -e extra variables, and the value
// a task registers.
//
// Variable precedence follows Ansible's table, lowest to highest (the
// numbers are Ansible's; levels kubexm has no counterpart for are left out):
//
//	    built-in defaults (kubexm_version, run_id, ...), below everything
//	2   role defaults: the playbook's defaults_files, then each role's
//	    defaults/main.yaml, outer role to inner
//	3-7 inventory vars: the cluster.yaml spec, then group vars
//	8-10 host vars
//	11  facts
//	12  play vars (playbook header vars, then the play's vars)
//	14  play vars_files
//	15  role vars (vars/main.yaml), outer to inner
//	16  block vars, outer to inner
//	17  task vars
//	19  set_fact and register
//	20  role parameters (roles: [{role: r, vars: ...}], include_role vars)
//	21  include parameters (include_tasks/import_tasks vars, and the loop
//	    variable of a looped include)
//	22  -e extra vars
//
// The magic names inventory_hostname, groups, hostvars, play_name,
// role_name and the loop variables are always set by the engine.
package variables

import (
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"

	"github.com/goccy/go-yaml"
	"github.com/mensylisir/kubexm/engine/playbook"
	"github.com/mensylisir/kubexm/engine/step"
)

// ScopeChain lists a task's scopes outer to inner.
func ScopeChain(s *playbook.Scope) []*playbook.Scope {
	var chain []*playbook.Scope
	for ; s != nil; s = s.Parent {
		chain = append(chain, s)
	}
	slices.Reverse(chain)
	return chain
}

// ParseExtraVars turns -e arguments into variables: `k=v` (v parsed as a YAML
// scalar, so numbers and booleans keep their type), `@file.yaml`, or an
// inline YAML/JSON mapping. Later arguments win.
func ParseExtraVars(args []string) (map[string]any, error) {
	out := map[string]any{}
	for _, a := range args {
		switch {
		case strings.HasPrefix(a, "@"):
			file := a[1:]
			data, err := os.ReadFile(file)
			if err != nil {
				return nil, fmt.Errorf("-e %s: %w", a, err)
			}
			m, err := extraVarsMapping(file, data)
			if err != nil {
				return nil, fmt.Errorf("-e %s: %w", a, err)
			}
			maps.Copy(out, m)
		case strings.HasPrefix(strings.TrimSpace(a), "{"):
			m, err := extraVarsMapping("-e", []byte(a))
			if err != nil {
				return nil, fmt.Errorf("-e %q: not a valid mapping: %w", a, err)
			}
			maps.Copy(out, m)
		default:
			k, v, ok := strings.Cut(a, "=")
			k = strings.TrimSpace(k)
			if !ok || !playbook.IdentRe.MatchString(k) {
				return nil, fmt.Errorf("-e %q: expected name=value, @file.yaml or a {...} mapping", a)
			}
			var val any
			if err := yaml.Unmarshal([]byte(v), &val); err != nil || isCollection(val) {
				val = v
			}
			out[k] = normalize(val)
		}
	}
	return out, nil
}

// maxExtraVarsNodes bounds the values an -e file or mapping expands to:
// aliases are expanded into plain values, so a few hundred bytes of nested
// aliases could otherwise take gigabytes.
const maxExtraVarsNodes = 100_000

// extraVarsMapping parses an -e file or mapping with the bounds of playbook
// files, and a lower bound on the values it expands to.
func extraVarsMapping(file string, data []byte) (map[string]any, error) {
	n, err := playbook.ParseYAMLLimited(file, data, maxExtraVarsNodes)
	if err != nil {
		return nil, err
	}
	switch v := normalize(n.Value()).(type) {
	case map[string]any:
		return v, nil
	case nil:
		return map[string]any{}, nil
	default:
		return nil, fmt.Errorf("%s: the document is a %s, not a mapping of variable names to values", file, playbook.TypeName(v))
	}
}

func isCollection(v any) bool {
	switch v.(type) {
	case map[string]any, []any:
		return true
	}
	return false
}

// normalize turns decoded YAML into the value shapes used everywhere:
// map[string]any, []any, int, float64, string, bool.
func normalize(v any) any {
	switch x := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = normalize(e)
		}
		return out
	case map[any]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[fmt.Sprint(k)] = normalize(e)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = normalize(e)
		}
		return out
	case int64:
		return int(x)
	case uint64:
		return int(x)
	case float32:
		return float64(x)
	}
	return v
}

type VarOrder struct {
	Defs []*playbook.VarDef
	Err  error
}

// OrderVars sorts templated variables so that each comes after those it
// reads, whatever the order they were written in. Variables that read each
// other, directly or through others, have no value: that is an error naming
// the cycle, as in Ansible.
func OrderVars(pending []*playbook.VarDef) ([]*playbook.VarDef, error) {
	byName := make(map[string]*playbook.VarDef, len(pending))
	for _, d := range pending {
		byName[d.Name] = d
	}
	const visiting, done = 1, 2
	state := make(map[*playbook.VarDef]int, len(pending))
	out := make([]*playbook.VarDef, 0, len(pending))
	var stack []*playbook.VarDef
	var visit func(d *playbook.VarDef) error
	visit = func(d *playbook.VarDef) error {
		switch state[d] {
		case done:
			return nil
		case visiting:
			i := slices.Index(stack, d)
			var names []string
			for _, s := range stack[i:] {
				names = append(names, s.Name)
			}
			names = append(names, d.Name)
			return fmt.Errorf("%s: variable %s refers to itself (%s): a variable cannot be defined in terms of itself; give the value another name",
				d.Pos, d.Name, strings.Join(names, " -> "))
		}
		state[d] = visiting
		stack = append(stack, d)
		for _, name := range d.Refs {
			if dep, ok := byName[name]; ok {
				if err := visit(dep); err != nil {
					return err
				}
			}
		}
		stack = stack[:len(stack)-1]
		state[d] = done
		out = append(out, d)
		return nil
	}
	for _, d := range pending {
		if err := visit(d); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// SetLayer sets a layer's plain values and queues its templated ones; a
// later layer's value replaces a queued template of the same name.
func SetLayer(v map[string]any, vl playbook.VarList, pending []*playbook.VarDef) []*playbook.VarDef {
	for i := range vl {
		d := &vl[i]
		pending = slices.DeleteFunc(pending, func(p *playbook.VarDef) bool { return p.Name == d.Name })
		if d.Template {
			v[d.Name] = d.Val
			pending = append(pending, d)
			continue
		}
		v[d.Name] = d.Val
	}
	return pending
}

// SetScopes sets one kind of list of every scope: the roles' (outer to
// inner) below the blocks' and includes' (outer to inner), as Ansible ranks
// role vars below block vars and role params below include params.
func SetScopes(v map[string]any, chain []*playbook.Scope, list func(*playbook.Scope) playbook.VarList, pending []*playbook.VarDef) []*playbook.VarDef {
	for _, role := range []bool{true, false} {
		for _, s := range chain {
			if s.Role == role {
				pending = SetLayer(v, list(s), pending)
			}
		}
	}
	return pending
}

// SetMap sets a layer of plain values; each replaces a queued template of
// the same name.
func SetMap(v, m map[string]any, pending []*playbook.VarDef) []*playbook.VarDef {
	if len(m) == 0 {
		return pending
	}
	maps.Copy(v, m)
	return slices.DeleteFunc(pending, func(p *playbook.VarDef) bool {
		_, ok := m[p.Name]
		return ok
	})
}

// NamesVar reports whether expr mentions name as an identifier.
func NamesVar(expr, name string) bool {
	for i := 0; ; {
		j := strings.Index(expr[i:], name)
		if j < 0 {
			return false
		}
		start, end := i+j, i+j+len(name)
		if (start == 0 || !isIdentByte(expr[start-1])) && (end == len(expr) || !isIdentByte(expr[end])) {
			return true
		}
		i = end
	}
}

func isIdentByte(b byte) bool {
	return b == '_' || b >= '0' && b <= '9' || b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z'
}

// Registered is the map a task registers, built from the builtin's result.
func Registered(res step.Result, err error) map[string]any {
	m := make(map[string]any, len(res.Data)+8)
	maps.Copy(m, res.Data)
	m["changed"] = res.Changed
	m["failed"] = res.Failed || err != nil
	m["skipped"] = res.Skipped
	msg := res.Msg
	if err != nil {
		if msg == "" {
			msg = err.Error()
		} else {
			msg += ": " + err.Error()
		}
	}
	m["msg"] = msg
	if res.Diff != "" {
		m["diff"] = res.Diff
	}
	for _, k := range []string{"stdout", "stderr"} {
		if s, ok := m[k].(string); ok {
			if _, has := m[k+"_lines"]; !has {
				m[k+"_lines"] = lines(s)
			}
		}
	}
	return m
}

// LastSeen describes a registered result for an until that gave up: its
// message, or else its exit status and the end of its output.
func LastSeen(reg map[string]any) string {
	if msg, _ := reg["msg"].(string); msg != "" {
		return msg
	}
	var parts []string
	if rc, ok := reg["rc"]; ok {
		parts = append(parts, fmt.Sprintf("rc=%v", rc))
	}
	for _, k := range []string{"stderr", "stdout"} {
		if s, _ := reg[k].(string); strings.TrimSpace(s) != "" {
			ls := strings.Split(strings.TrimSpace(s), "\n")
			if len(ls) > 3 {
				ls = ls[len(ls)-3:]
			}
			parts = append(parts, k+": "+strings.Join(ls, " | "))
		}
	}
	if len(parts) == 0 {
		return "no message and no output"
	}
	return strings.Join(parts, ", ")
}

func lines(s string) []any {
	s = strings.TrimRight(s, "\n")
	if s == "" {
		return []any{}
	}
	parts := strings.Split(s, "\n")
	out := make([]any, len(parts))
	for i, p := range parts {
		out[i] = p
	}
	return out
}

// InventoryData are the inventory variables that hold the cluster's own
// data, never templates: the spec (whose strings, passwords among them, are
// the user's values as written), the cluster's name and file, and its
// Cluster resource.
var InventoryData = []string{"spec", "cluster_name", "cluster_file", "cluster_resource"}

// OrderKey keys renderOrder's cache: the task (or play) and the host's set
// of templated inventory variables, since that set is part of the queue.
type OrderKey struct {
	Key any
	Inv string
}
