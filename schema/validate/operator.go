package validate

import "github.com/mensylisir/kubexm/schema"

// validateOperator refuses spec.operator.enabled for a cluster whose hosts
// the controller could not reach with its Secret's one key.
func validateOperator(c *schema.Cluster, ps *schema.Problems) {
	if !c.Spec.Operator.Enabled {
		return
	}
	if _, path, problem := c.OperatorKey(); problem != "" {
		ps.Add(path, "spec.operator.enabled gives the controller in the cluster one SSH private key (a Secret) for every host: "+
			"reach every remote host and bastion with the same privateKeyPath, unencrypted, without password or sudoPassword; "+
			"or leave spec.operator.enabled false and run kubexm controller on the control machine (docs/guide.md, operator mode)",
			"spec.operator.enabled: %s", problem)
	}
}
