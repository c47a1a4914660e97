package run

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/mensylisir/kubexm/engine/eval"
	"github.com/mensylisir/kubexm/engine/playbook"
	"github.com/mensylisir/kubexm/engine/variables"
)

// splitInventory moves a host's templated inventory variables (group_vars,
// host_vars, roleGroupVars, a host's vars: holding {{ }}) from h.inv into
// h.invTmpl, rendered lazily like the variables of every other layer, so
// that `{{ .flannel_version }}` in group_vars/all.yaml reads the shared
// default. A template that does not parse is an error before any task runs.
//
// A secret's value (inventory.Secrets: passwords, secret-named variables)
// is data too: it is used as written, and a "{{" in it never reaches an
// error message.
func (r *runner) splitInventory(h *hostState, secrets map[string]bool) error {
	var tmpl playbook.VarList
	var sig strings.Builder
	for _, name := range slices.Sorted(maps.Keys(h.inv)) {
		if slices.Contains(variables.InventoryData, name) {
			continue
		}
		v := h.inv[name]
		found, err := r.inventoryTemplates(v, secrets)
		if err != nil {
			return fmt.Errorf("%s: host %s: variable %s: %w", r.inv.Source, h.name, name, err)
		}
		if !found {
			continue
		}
		d := playbook.VarDef{Name: name, Val: v, Pos: playbook.Pos{File: r.inv.Source}, Template: true, Inventory: true, Refs: playbook.AppendTemplateRefs(r.ev.Refs, v, nil)}
		tmpl = append(tmpl, d)
		fmt.Fprintf(&sig, "%s=%#v\n", name, v)
	}
	if len(tmpl) == 0 {
		return nil
	}
	plain := maps.Clone(h.inv)
	for _, d := range tmpl {
		delete(plain, d.Name)
	}
	h.inv, h.invTmpl, h.invKey = plain, tmpl, sig.String()
	return nil
}

// inventoryTemplates reports whether v holds a {{ }} template anywhere, and
// checks each one's syntax.
func (r *runner) inventoryTemplates(v any, secrets map[string]bool) (bool, error) {
	switch x := v.(type) {
	case string:
		if !strings.Contains(x, "{{") || secrets[x] {
			return false, nil
		}
		return true, r.ev.CheckTemplate(x)
	case []any:
		found := false
		for _, e := range x {
			f, err := r.inventoryTemplates(e, secrets)
			if err != nil {
				return false, err
			}
			found = found || f
		}
		return found, nil
	case map[string]any:
		found := false
		for _, k := range slices.Sorted(maps.Keys(x)) {
			f, err := r.inventoryTemplates(x[k], secrets)
			if err != nil {
				return false, err
			}
			found = found || f
		}
		return found, nil
	}
	return false, nil
}

// renderPending renders the queued templated variables into v in order. An
// inventory variable whose template reads a variable this task does not
// have, or passes a bound of eval's, is left out and its reason recorded
// under eval.Unrendered, as Ansible renders such a variable only where it
// is used. The text the inventory's templates make for one task-host is
// bounded as a whole too: each one's bound alone would let many variables
// just under it take that much each, for every task running at once.
func (r *runner) renderPending(v map[string]any, pending []*playbook.VarDef, need func(string) bool) error {
	var unrendered map[string]string
	leave := func(name, why string) {
		delete(v, name)
		if unrendered == nil {
			unrendered = map[string]string{}
		}
		unrendered[name] = why
		v[eval.Unrendered] = unrendered
	}
	invText := 0
	for _, d := range pending {
		if need != nil && !need(d.Name) {
			continue
		}
		err := r.renderVar(v, d)
		if err == nil {
			if s, ok := v[d.Name].(string); ok && d.Inventory {
				if invText += len(s); invText > eval.MaxOutput {
					leave(d.Name, fmt.Sprintf("with the other inventory variables it would make more than the %d MiB of text the inventory's templates may make for one host", eval.MaxOutput>>20))
				}
			}
			continue
		}
		// A template bomb (eval.ErrLimit) in a variable nobody reads must not
		// stop the run either: it fails the task that reads it.
		var ee *eval.Error
		if !d.Inventory || !errors.As(err, &ee) || (ee.Missing == "" && !errors.Is(err, eval.ErrLimit)) {
			return err
		}
		leave(d.Name, ee.Error())
	}
	return nil
}
