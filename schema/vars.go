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

	"github.com/mensylisir/kubexm/internal/ytree"
)

// varName is what a playbook can read as {{ .name }} and in expressions.
var varName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// secretVarName marks variables whose values are secrets: masked by
// `config view` and in every output and journal of a run.
var secretVarName = regexp.MustCompile(`(?i)password|passwd|passphrase|secret|token|private_?key|api_?key|credential|(^|[_.-])(pass|pwd|auth)([_.-]|$)`)

// reservedVars are set by kubexm for every host; a site variable of the
// same name would hide them, so it is refused with the field to use.
var reservedVars = map[string]string{
	"spec": "", "cluster_name": "metadata.name", "cluster_file": "", "cluster_resource": "", "kubexm_controller_ssh_key_file": "spec.operator", "address": "spec.hosts[].address",
	"arch": "spec.hosts[].arch", "internal_address": "spec.hosts[].internalAddress",
	"internal_address_v6": "spec.hosts[].internalAddress", "labels": "spec.hosts[].labels", "roles": "spec.roleGroups",
	"inventory_hostname": "", "groups": "spec.roleGroups", "hostvars": "", "facts": "", "play_name": "", "role_name": "",
	"kubexm_version": "", "playbook_name": "", "playbook_version": "", "run_id": "", "check_mode": "", "work_dir": "",
}

// loadVarsDirs merges Ansible-style group_vars/<group>.yaml and
// host_vars/<host>.yaml beside the cluster file into spec.roleGroupVars and
// spec.hosts[].vars, a file's values over the inline ones, so that
// everything later (validation, config view, the inventory) sees one set.
func loadVarsDirs(c *Cluster, ps *problems) {
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
			ps.add("", strings.TrimSpace("name the file after a host of spec.hosts; "+didYouMean(name, slices.Collect(maps.Keys(hostIdx)))),
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
func readVarsDir(dir string, ps *problems) map[string]varsFile {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		ps.add("", "", "%s: %v", dir, err)
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
			ps.add("", "", "%s: %v", file, err)
			continue
		}
		root, _, err := parseTree(file, data)
		if err != nil {
			ps.add("", "", "%v", err)
			continue
		}
		if root.IsNull() {
			continue
		}
		if root.Kind != ytree.Map {
			ps.list = append(ps.list, Problem{Pos: root.TokPos, Message: "a vars file is a mapping of variable names to values"})
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

// validateVars checks the names of spec.roleGroupVars and hosts' vars.
func validateVars(c *Cluster, ps *problems) {
	groups := []string{"all", "control_plane", "k8s_cluster"}
	for _, g := range c.Spec.RoleGroups.all() {
		groups = append(groups, g.name)
	}
	slices.Sort(groups)
	for _, g := range slices.Sorted(maps.Keys(c.Spec.RoleGroupVars)) {
		path := "spec.roleGroupVars." + g
		if !slices.Contains(groups, g) {
			ps.add(path, strings.TrimSpace("groups are "+strings.Join(groups, ", ")+"; "+didYouMean(g, groups)), "unknown group %q", g)
			continue
		}
		checkVarNames(c.Spec.RoleGroupVars[g], path, ps)
	}
	for i, h := range c.Spec.Hosts {
		checkVarNames(h.Vars, fmt.Sprintf("spec.hosts[%d].vars", i), ps)
	}
}

func checkVarNames(vars VarMap, path string, ps *problems) {
	for _, k := range slices.Sorted(maps.Keys(vars)) {
		p := path + "." + k
		if !varName.MatchString(k) {
			ps.add(p, "a variable name is letters, digits and _, not starting with a digit", "%q is not a variable name", k)
			continue
		}
		if field, ok := reservedVars[k]; ok {
			hint := "kubexm sets it for every host; choose another name"
			if field != "" {
				hint = "set " + field + " instead"
			}
			ps.add(p, hint, "variable %q is reserved", k)
		}
	}
}

// varSecrets lists the string values under secret-named variables.
func varSecrets(c *Cluster) []string {
	var out []string
	var walk func(v any, secret bool)
	walk = func(v any, secret bool) {
		switch x := v.(type) {
		case map[string]any:
			for k, e := range x {
				walk(e, secret || secretVarName.MatchString(k))
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
				if k, v, ok := strings.Cut(fmt.Sprint(e), "="); ok && v != "" && secretVarName.MatchString(k[strings.LastIndex(k, ".")+1:]) {
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
				m[k] = mask(e, secret || secretVarName.MatchString(k))
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
