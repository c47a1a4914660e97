package schema

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/mensylisir/kubexm/internal/suggest"
	"github.com/mensylisir/kubexm/internal/ytree"
	"github.com/mensylisir/kubexm/schema/internal/valid"
)

// VarName is what a playbook can read as {{ .name }} and in expressions.
var VarName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// varSecrets lists the string values under secret-named variables.
func varSecrets(c *Cluster) []string {
	var out []string
	var walk func(v any, secret bool)
	walk = func(v any, secret bool) {
		switch x := v.(type) {
		case map[string]any:
			for k, e := range x {
				walk(e, secret || valid.SecretVarName.MatchString(k))
			}
		case VarMap:
			walk(map[string]any(x), secret)
		case []any:
			for _, e := range x {
				walk(e, secret)
			}
		case string:
			if secret && x != "" {
				out = append(out, x)
			}
		case nil:
		default:
			if secret {
				out = append(out, fmt.Sprint(x))
			}
		}
	}
	for _, m := range c.Spec.RoleGroupVars {
		walk(m, false)
	}
	// harbor.yml's values: its passwords under whatever names harbor
	// gives them; every value is one.
	walk(c.Spec.Registry.HarborConfig, true)
	for _, h := range c.Spec.Hosts {
		walk(h.Vars, false)
	}
	// A chart's values: a mapping, or KubeKey's key=value entries.
	for _, a := range c.Spec.Addons {
		if a.Sources == nil || a.Sources.Chart == nil {
			continue
		}
		if l, ok := a.Sources.Chart.Values.([]any); ok {
			for _, e := range l {
				if k, v, ok := strings.Cut(fmt.Sprint(e), "="); ok && v != "" && valid.SecretVarName.MatchString(k[strings.LastIndex(k, ".")+1:]) {
					out = append(out, v)
				}
			}
			continue
		}
		walk(a.Sources.Chart.Values, false)
	}
	return out
}

// maskVars returns a copy of vars with the values of secret-named
// variables (at any depth) replaced by Mask.
func maskVars(vars VarMap) VarMap { return maskVarsFrom(vars, false) }

// maskAll returns a copy of vars with every value masked.
func maskAll(vars VarMap) VarMap { return maskVarsFrom(vars, true) }

// maskVarsFrom masks the values under secret-named keys, or all of them.
func maskVarsFrom(vars VarMap, all bool) VarMap {
	if vars == nil {
		return nil
	}
	var mask func(v any, secret bool) any
	mask = func(v any, secret bool) any {
		switch x := v.(type) {
		case map[string]any:
			m := make(map[string]any, len(x))
			for k, e := range x {
				m[k] = mask(e, secret || valid.SecretVarName.MatchString(k))
			}
			return m
		case []any:
			l := make([]any, len(x))
			for i, e := range x {
				l[i] = mask(e, secret)
			}
			return l
		case nil:
			return nil
		}
		if secret {
			return Mask
		}
		return v
	}
	return VarMap(mask(map[string]any(vars), all).(map[string]any))
}

// LoadVarsDirs merges Ansible-style group_vars/<group>.yaml and
// host_vars/<host>.yaml beside the cluster file into spec.roleGroupVars and
// spec.hosts[].vars, a file's values over the inline ones, so that
// everything later (validation, config view, the inventory) sees one set.
func LoadVarsDirs(c *Cluster, ps *Problems) {
	if c.src == nil || c.src.abs == "" {
		return
	}
	base := filepath.Dir(c.src.abs)
	hostIdx := map[string]int{}
	for i, h := range c.Spec.Hosts {
		hostIdx[h.Name] = i
	}
	for name, vf := range readVarsDir(filepath.Join(base, "group_vars"), ps) {
		vars := vf.vars
		if c.Spec.RoleGroupVars == nil {
			c.Spec.RoleGroupVars = map[string]VarMap{}
		}
		m := c.Spec.RoleGroupVars[name]
		if m == nil {
			m = VarMap{}
		}
		maps.Copy(m, vars)
		c.Spec.RoleGroupVars[name] = m
		for k := range vars {
			ps.src.pos["spec.roleGroupVars."+name+"."+k] = vf.pos[k]
		}
	}
	for name, vf := range readVarsDir(filepath.Join(base, "host_vars"), ps) {
		vars := vf.vars
		i, ok := hostIdx[name]
		if !ok {
			ps.Add("", strings.TrimSpace("name the file after a host of spec.hosts; "+suggest.DidYouMean(name, slices.Collect(maps.Keys(hostIdx)))),
				"host_vars/%s: no host %q in the cluster file", name, name)
			continue
		}
		h := &c.Spec.Hosts[i]
		if h.Vars == nil {
			h.Vars = VarMap{}
		}
		maps.Copy(h.Vars, vars)
		for k := range vars {
			ps.src.pos[fmt.Sprintf("spec.hosts[%d].vars.%s", i, k)] = vf.pos[k]
		}
	}
}

// varsFile is what the vars files of one group or host set, and where.
type varsFile struct {
	vars VarMap
	pos  map[string]Pos
}

// readVarsDir reads dir/<name>.yaml (or .yml) files into variables by name.
// A missing directory is no variables.
func readVarsDir(dir string, ps *Problems) map[string]varsFile {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		ps.Add("", "", "%s: %v", dir, err)
		return nil
	}
	out := map[string]varsFile{}
	for _, e := range entries {
		ext := filepath.Ext(e.Name())
		if e.IsDir() || ext != ".yaml" && ext != ".yml" {
			continue
		}
		file := filepath.Join(dir, e.Name())
		data, err := os.ReadFile(file)
		if err != nil {
			ps.Add("", "", "%s: %v", file, err)
			continue
		}
		root, _, err := parseTree(file, data)
		if err != nil {
			ps.Add("", "", "%v", err)
			continue
		}
		if root.IsNull() {
			continue
		}
		if root.Kind != ytree.Map {
			ps.List = append(ps.List, Problem{Pos: root.TokPos, Message: "a vars file is a mapping of variable names to values"})
			continue
		}
		vars, _ := generic(root).(map[string]any)
		name := strings.TrimSuffix(e.Name(), ext)
		vf, ok := out[name]
		if !ok {
			vf = varsFile{vars: VarMap{}, pos: map[string]Pos{}}
			out[name] = vf
		}
		maps.Copy(vf.vars, vars)
		for _, k := range root.Keys {
			vf.pos[k.Text] = k.Pos
		}
	}
	return out
}
