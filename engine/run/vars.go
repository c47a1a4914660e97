package run

import (
	"maps"
	"sync"
	"sync/atomic"

	"github.com/mensylisir/kubexm/engine/playbook"
	"github.com/mensylisir/kubexm/inventory"
)

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

	// Run-level state, guarded by runner.mu.
	failed      bool
	unreachable bool
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
