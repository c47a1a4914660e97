package validate

import (
	"github.com/mensylisir/kubexm/schema"
	"github.com/mensylisir/kubexm/schema/rolevars"

	"fmt"
	"maps"
	"slices"

	"github.com/mensylisir/kubexm/schema/internal/fieldpath"
)

// validateRoleVars checks the cluster file's variables against rv;
// confined: the file came to kubexm server, whose machine is the control
// machine.
func validateRoleVars(c *schema.Cluster, rv rolevars.RoleVars, confined bool, ps *schema.Problems) {
	check := func(vars schema.VarMap, p string) {
		for _, k := range slices.Sorted(maps.Keys(vars)) {
			if !schema.VarName.MatchString(k) {
				continue // validateVars says so
			}
			kp := p + "." + k
			msg, hint := rv.Check(k, vars[k], true)
			if msg == "" && confined {
				msg, hint = rv.CheckLocal(k)
			}
			if msg != "" {
				if i := rv.BadItem(k, vars[k]); i >= 0 {
					kp = fieldpath.Index(kp, i) // at the item where the file has its line
				}
				ps.Add(kp, hint, "%s", msg)
			} else if n := rv.Probable(k); n != "" {
				ps.Add(kp, fmt.Sprintf("did you mean %s (role %s)? A variable of your own playbooks needs a name no role variable is that close to", n, rv[n].Role),
					"unknown variable %q, close to role variable %s", k, n)
			}
		}
	}
	for _, g := range slices.Sorted(maps.Keys(c.Spec.RoleGroupVars)) {
		check(c.Spec.RoleGroupVars[g], "spec.roleGroupVars."+g)
	}
	for i, h := range c.Spec.Hosts {
		check(h.Vars, fmt.Sprintf("spec.hosts[%d].vars", i))
	}
}
