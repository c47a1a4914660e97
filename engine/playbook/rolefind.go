package playbook

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
	for _, d := range RoleSearchDirs(pb.Src.Dir(), pb.Options, role) {
		searched = append(searched, d.String())
		if d.Join(file).IsFile() {
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
	for _, ref := range slices.Sorted(maps.Keys(pb.RoleDirs)) {
		f := pb.RoleDirs[ref].Join(name)
		if !f.IsFile() {
			continue
		}
		data, err := f.Read()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		out = append(out, RoleFile{Role: ref, Where: f.String(), Data: data, Builtin: f.Builtin})
	}
	return out, nil
}

// RolesFile reads the file name from the first role directory holding it,
// searched as roles are, so that a fork's copy of a file shared by its
// roles wins over the built-in one. where names the file for messages; ok
// is false when no directory has it.
func (pb *Playbook) RolesFile(name string) (data []byte, where string, ok bool, err error) {
	f, ok := RolesFile(pb.Src.Dir(), pb.Options, name)
	if !ok {
		return nil, "", false, nil
	}
	if data, err = f.Read(); err != nil {
		return nil, f.String(), true, fmt.Errorf("%s: %w", f, err)
	}
	return data, f.String(), true, nil
}

// RolesFile finds a file relative to the role directories, as roleRoots
// lists them.
func RolesFile(pbDir Source, opts LoadOptions, name string) (Source, bool) {
	for _, d := range RoleRoots(pbDir, opts) {
		if f := d.Join(name); f.IsFile() {
			return f, true
		}
	}
	return Source{}, false
}

// RoleRoots lists the directories roles are looked for in, first match
// wins: the playbook's roles/, the roles/ beside its playbooks/ directory,
// --roles-path, then the built-in roles.
func RoleRoots(pbDir Source, opts LoadOptions) []Source {
	var dirs []Source
	dirs = append(dirs, pbDir.Join("roles"))
	if pbDir.Dir().Base() == "playbooks" && !pbDir.Builtin {
		dirs = append(dirs, pbDir.Dir().Dir().Join("roles"))
	}
	for _, p := range opts.RolesPath {
		if s, err := DiskSource(p); err == nil {
			dirs = append(dirs, s)
		}
	}
	if opts.BuiltinFS != nil {
		dirs = append(dirs, Source{Fsys: opts.BuiltinFS, Name: "roles", Builtin: true})
	}
	return dirs
}

// RoleSearchDirs lists where a role of this name is looked for: roleRoots, after
// the playbook's own directory for a name with a slash (cni/flannel).
func RoleSearchDirs(pbDir Source, opts LoadOptions, name string) []Source {
	dirs := RoleRoots(pbDir, opts)
	if strings.Contains(name, "/") {
		dirs = append([]Source{pbDir}, dirs...)
	}
	return dirs
}
