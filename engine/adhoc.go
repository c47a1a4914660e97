package engine

import "github.com/mensylisir/kubexm/inventory"

// What a command that reaches hosts without a playbook (kubexm run command)
// shares with a run: the same host patterns and the same masking.

// MatchHosts resolves an Ansible host pattern (groups, names, globs,
// subscripts, &intersections and !exclusions, as --limit and a play's
// hosts) to host names in inventory order; unknown lists the parts that
// name neither a host nor a group.
func MatchHosts(inv *inventory.Inventory, pattern string) (hosts, unknown []string, err error) {
	return matchHosts(inv, pattern)
}

// Redactor returns the function that masks secrets (and their escaped,
// quoted and encoded forms) in text, as a run masks its events: for output
// that reaches a caller some other way (run command's, the error a
// `kubexm play` child of a server's worker printed).
func Redactor(secrets []string) func(string) string {
	return newRedactor(secrets).str
}
