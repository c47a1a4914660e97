package lifecycle

import (
	"fmt"
	"maps"
	"path/filepath"

	"github.com/mensylisir/kubexm/engine"
	"github.com/mensylisir/kubexm/schema"
)

// SupportForPlaybook returns the matrix of the tree a playbook's roles come
// from (a fork's own support.yaml, else the built-in one), as that
// playbook applies it.
func SupportForPlaybook(pb *engine.Playbook) (*schema.Support, error) {
	data, where, ok, err := pb.RolesFile(filepath.Base(schema.SupportFile))
	if err != nil {
		return nil, fmt.Errorf("support matrix: %w", err)
	}
	var s *schema.Support
	if ok {
		s, err = schema.ParseSupport(where, data)
	} else {
		s, err = schema.BuiltinSupport()
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
func roleVarsForPlaybook(pb *engine.Playbook) (schema.RoleVars, error) {
	builtin, err := schema.BuiltinRoleVars()
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
		decls, err := schema.ParseRoleVars(f.Where, f.Data)
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
