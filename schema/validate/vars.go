package validate

import (
	"github.com/mensylisir/kubexm/internal/suggest"
	"github.com/mensylisir/kubexm/schema"

	"fmt"
	"maps"
	"slices"
	"strings"
)

// reservedVars are set by kubexm for every host; a site variable of the
// same name would hide them, so it is refused with the field to use.
var reservedVars = map[string]string{
	"spec": "", "cluster_name": "metadata.name", "cluster_file": "", "cluster_resource": "", "kubexm_controller_ssh_key_file": "spec.operator", "address": "spec.hosts[].address",
	"arch": "spec.hosts[].arch", "internal_address": "spec.hosts[].internalAddress",
	"internal_address_v6": "spec.hosts[].internalAddress", "labels": "spec.hosts[].labels", "roles": "spec.roleGroups",
	"inventory_hostname": "", "groups": "spec.roleGroups", "hostvars": "", "facts": "", "play_name": "", "role_name": "",
	"kubexm_version": "", "playbook_name": "", "playbook_version": "", "run_id": "", "check_mode": "", "work_dir": "",
	"kubexm_known_hosts": "",
}

// validateVars checks the names of spec.roleGroupVars and hosts' vars.
func validateVars(c *schema.Cluster, ps *schema.Problems) {
	groups := []string{"all", "control_plane", "k8s_cluster"}
	for _, g := range c.Spec.RoleGroups.All() {
		groups = append(groups, g.Name)
	}
	slices.Sort(groups)
	for _, g := range slices.Sorted(maps.Keys(c.Spec.RoleGroupVars)) {
		path := "spec.roleGroupVars." + g
		if !slices.Contains(groups, g) {
			ps.Add(path, strings.TrimSpace("groups are "+strings.Join(groups, ", ")+"; "+suggest.DidYouMean(g, groups)), "unknown group %q", g)
			continue
		}
		checkVarNames(c.Spec.RoleGroupVars[g], path, ps)
	}
	for i, h := range c.Spec.Hosts {
		checkVarNames(h.Vars, fmt.Sprintf("spec.hosts[%d].vars", i), ps)
	}
}

func checkVarNames(vars schema.VarMap, path string, ps *schema.Problems) {
	for _, k := range slices.Sorted(maps.Keys(vars)) {
		p := path + "." + k
		if !schema.VarName.MatchString(k) {
			ps.Add(p, "a variable name is letters, digits and _, not starting with a digit", "%q is not a variable name", k)
			continue
		}
		if field, ok := reservedVars[k]; ok {
			hint := "kubexm sets it for every host; choose another name"
			if field != "" {
				hint = "set " + field + " instead"
			}
			ps.Add(p, hint, "variable %q is reserved", k)
		}
	}
}
