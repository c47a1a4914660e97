package engine

import "strings"

// FindRoleFile reports whether a file of a role ("cni/custom/tasks/main.yaml")
// is found where include_role looks for the role (for a name with a slash,
// the playbook's directory first, then its roles/, --roles-path and the
// built-in roles), and the directories it searched, for messages. A role
// named in cluster.yaml (network.customRole) is checked this way before any
// task runs.
func (pb *Playbook) FindRoleFile(file string) (found bool, searched []string) {
	role, _, _ := strings.Cut(file, "/tasks/")
	for _, d := range roleSearchDirs(pb.src.dir(), pb.opts, role) {
		searched = append(searched, d.String())
		if d.join(file).isFile() {
			return true, searched
		}
	}
	return false, searched
}
