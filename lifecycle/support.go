package lifecycle

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"

	"github.com/mensylisir/kubexm/schema/matrix"
	"github.com/mensylisir/kubexm/schema/rolevars"

	"github.com/mensylisir/kubexm"
	"github.com/mensylisir/kubexm/engine"
)

// SupportForPlaybook returns the matrix of the tree a playbook's roles come
// from (a fork's own support.yaml, else the built-in one), as that
// playbook applies it.
func SupportForPlaybook(pb *engine.Playbook) (*matrix.Support, error) {
	data, where, ok, err := pb.RolesFile(filepath.Base(matrix.SupportFile))
	if err != nil {
		return nil, fmt.Errorf("support matrix: %w", err)
	}
	var s *matrix.Support
	if ok {
		s, err = matrix.ParseSupport(where, data)
	} else {
		s, err = matrix.BuiltinSupport()
	}
	if err != nil {
		return nil, err
	}
	rv, err := roleVarsForPlaybook(pb)
	if err != nil {
		return nil, err
	}
	return s.ForPlaybook(pb.Name).WithRoles(pb.FindRoleFile).WithRoleVars(rv), nil
}

// roleVarsForPlaybook returns the role variables cluster.yaml's variables
// are checked against: the built-in roles', with those of a fork's roles
// the playbook uses in their place.
func roleVarsForPlaybook(pb *engine.Playbook) (rolevars.RoleVars, error) {
	builtin, err := rolevars.BuiltinRoleVars()
	if err != nil {
		return nil, err
	}
	files, err := pb.RoleFiles("meta/main.yaml")
	if err != nil {
		return nil, err
	}
	rv := maps.Clone(builtin)
	for _, f := range files {
		if f.Builtin {
			continue
		}
		decls, err := rolevars.ParseRoleVars(f.Where, f.Data)
		if err != nil {
			return nil, err
		}
		for name, d := range decls {
			d.Role = f.Role
			rv[name] = d
		}
	}
	return rv, nil
}

// SupportFromRolesPath returns the matrix of the first directory holding
// support.yaml, else the built-in one; a role a choice names (a custom
// network plugin's) is looked for in dirs, then in the built-in roles.
func SupportFromRolesPath(dirs []string) (*matrix.Support, error) {
	s, err := readSupportFromRolesPath(dirs)
	if err != nil {
		return nil, err
	}
	builtin, err := rolevars.BuiltinRoleVars()
	if err != nil {
		return nil, err
	}
	// The first directory holding a role wins, as when the roles run.
	rv := maps.Clone(builtin)
	for _, d := range slices.Backward(dirs) {
		own, err := rolevars.ReadRoleVars(os.DirFS(d), ".")
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", d, err)
		}
		maps.Copy(rv, own)
	}
	s = s.WithRoleVars(rv)
	return s.WithRoles(func(file string) (bool, []string) {
		var searched []string
		for _, d := range dirs {
			searched = append(searched, d)
			if st, err := os.Stat(filepath.Join(d, filepath.FromSlash(file))); err == nil && !st.IsDir() {
				return true, searched
			}
		}
		searched = append(searched, "the built-in roles")
		_, err := fs.Stat(kubexm.Content(), path.Join("roles", file))
		return err == nil, searched
	}), nil
}

func readSupportFromRolesPath(dirs []string) (*matrix.Support, error) {
	for _, d := range dirs {
		p := filepath.Join(d, filepath.Base(matrix.SupportFile))
		data, err := os.ReadFile(p)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("support matrix: %w", err)
		}
		return matrix.ParseSupport(p, data)
	}
	return matrix.BuiltinSupport()
}
