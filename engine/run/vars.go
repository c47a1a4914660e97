package run

import (
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/goccy/go-yaml"

	"github.com/mensylisir/kubexm/engine/playbook"
	"github.com/mensylisir/kubexm/inventory"
)

// Variable precedence follows Ansible's table, lowest to highest (the
// numbers are Ansible's; levels kubexm has no counterpart for are left out):
//
//	     built-in defaults (kubexm_version, run_id, ...), below everything
//	 2   role defaults: the playbook's defaults_files, then each role's
//	     defaults/main.yaml, outer role to inner
//	 3-7 inventory vars: the cluster.yaml spec, then group vars
//	 8-10 host vars
//	 11  facts
//	 12  play vars (playbook header vars, then the play's vars)
//	 14  play vars_files
//	 15  role vars (vars/main.yaml), outer to inner
//	 16  block vars, outer to inner
//	 17  task vars
//	 19  set_fact and register
//	 20  role parameters (roles: [{role: r, vars: ...}], include_role vars)
//	 21  include parameters (include_tasks/import_tasks vars, and the loop
//	     variable of a looped include)
//	 22  -e extra vars
//
// The magic names inventory_hostname, groups, hostvars, play_name,
// role_name and the loop variables are always set by the engine.

// hostState is what the run knows about one host.
type hostState struct {
	name string
	host *inventory.Host // nil for localhost when the inventory does not list it
	// builtin holds the engine's defaults, below role defaults; inv the
	// inventory levels (spec, group vars, host vars), above them. base is
	// both merged, what other hosts see in hostvars.
	builtin, inv map[string]any
	base         map[string]any
	// invTmpl are the inventory variables holding templates (rendered per
	// task, like the other layers'); invKey names that set for
	// renderOrder's cache ("" when there is none).
	invTmpl playbook.VarList
	invKey  string

	mu       sync.Mutex
	facts    map[string]any // gathered by setup, under the name `facts`
	dyn      map[string]any // set_fact and register; replaced, never changed in place
	view     map[string]any // base+facts+dyn for hostvars, rebuilt when stale
	version  uint64         // bumped whenever facts or dyn change
	changes  *atomic.Uint64 // the run-wide change counter, bumped too
	gathered bool
	occ      map[string]int // how often each task ran on this host, for journal keys

	connOnce sync.Once
	conn     hostConn

	// Run-level state, guarded by runner.mu.
	failed      bool
	unreachable bool
}

type hostConn interface {
	Close() error
}

func newHostState(name string, h *inventory.Host, inv *inventory.Inventory, defaults map[string]any) *hostState {
	iv := make(map[string]any, len(inv.Vars)+8)
	maps.Copy(iv, inv.Vars)
	// Group vars apply in inventory group order sorted by name, so the
	// result does not depend on map iteration.
	for _, g := range playbook.KeysOf(inv.Groups) {
		for _, m := range inv.Groups[g] {
			if m == name {
				maps.Copy(iv, inv.GroupVars[g])
				break
			}
		}
	}
	if h != nil {
		maps.Copy(iv, h.Vars)
	}
	base := make(map[string]any, len(defaults)+len(iv))
	maps.Copy(base, defaults)
	maps.Copy(base, iv)
	return &hostState{name: name, host: h, builtin: defaults, inv: iv, base: base, facts: map[string]any{}, dyn: map[string]any{}, occ: map[string]int{}}
}

// setDyn records set_fact/register values without changing maps others may
// be reading.
func (h *hostState) setDyn(kv map[string]any) {
	if len(kv) == 0 {
		return
	}
	h.mu.Lock()
	next := make(map[string]any, len(h.dyn)+len(kv))
	maps.Copy(next, h.dyn)
	maps.Copy(next, kv)
	h.dyn = next
	h.view = nil
	h.version++
	h.mu.Unlock()
	h.bump()
}

func (h *hostState) setFacts(f map[string]any) {
	if f == nil {
		f = map[string]any{}
	}
	h.mu.Lock()
	h.facts = f
	h.gathered = true
	h.view = nil
	h.version++
	h.mu.Unlock()
	h.bump()
}

func (h *hostState) bump() {
	if h.changes != nil {
		h.changes.Add(1)
	}
}

func (h *hostState) snapshot() (facts, dyn map[string]any) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.facts, h.dyn
}

// hostView is the host's variables as other hosts see them in hostvars.
func (h *hostState) hostView() map[string]any {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.view == nil {
		v := make(map[string]any, len(h.base)+len(h.dyn)+2)
		maps.Copy(v, h.base)
		v["facts"] = h.facts
		maps.Copy(v, h.dyn)
		v["inventory_hostname"] = h.name
		h.view = v
	}
	return h.view
}

// hostvarsCache holds the hostvars map. It is rebuilt only when some host's
// variables changed since, and a task takes one snapshot for all its hosts,
// so a task on N hosts costs O(N), not O(N²).
type hostvarsCache struct {
	mu      sync.Mutex
	hosts   []*hostState
	version atomic.Uint64
	built   uint64
	m       map[string]any
}

func (c *hostvarsCache) get() map[string]any {
	c.mu.Lock()
	defer c.mu.Unlock()
	v := c.version.Load()
	if c.m != nil && v == c.built {
		return c.m
	}
	m := make(map[string]any, len(c.hosts))
	for _, h := range c.hosts {
		m[h.name] = h.hostView()
	}
	c.m, c.built = m, v
	return c.m
}

// scopeChain lists a task's scopes outer to inner.
func scopeChain(s *playbook.Scope) []*playbook.Scope {
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
