package engine

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

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

// RoleFile is one file of a role a playbook uses.
type RoleFile struct {
	Role    string // the reference, e.g. cni/flannel
	Where   string // for messages
	Data    []byte
	Builtin bool // from the built-in roles
}

// RoleFiles returns the file name (e.g. "meta/main.yaml") of every role the
// playbook uses that has one, in role order, as the run reads them: a
// fork's copy of a role, not the built-in one.
func (pb *Playbook) RoleFiles(name string) ([]RoleFile, error) {
	var out []RoleFile
	for _, ref := range slices.Sorted(maps.Keys(pb.roleDirs)) {
		f := pb.roleDirs[ref].join(name)
		if !f.isFile() {
			continue
		}
		data, err := f.read()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		out = append(out, RoleFile{Role: ref, Where: f.String(), Data: data, Builtin: f.builtin})
	}
	return out, nil
}
