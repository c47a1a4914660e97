package playbook

// What the loader is told: where playbooks, roles, builtins and hooks come
// from. The playbook keeps them, to find its roles' files when it runs.

import (
	"io/fs"

	"github.com/mensylisir/kubexm/engine/step"
)

// LoadOptions says where playbooks, roles and builtins come from.
type LoadOptions struct {
	// Builtins are the step types tasks may call, by name.
	Builtins map[string]step.Builtin
	// BuiltinFS holds the embedded playbooks/ and roles/ directories.
	BuiltinFS fs.FS
	// RolesPath lists directories searched for roles after the playbook's
	// own roles/ and before the built-in roles.
	RolesPath []string
	// Version is the running kubexm version, checked against a playbook's
	// `requires: {kubexm: ...}`; empty skips the check.
	Version string
	// Overlays are directories whose roles/<role>/templates/ and files/
	// replace single files of roles (a later one wins; see engine/load/overlay.go), and
	// whose hooks/<playbook>/ add hook plays (see engine/load/hooks.go).
	Overlays []string
	// Hooks are hook playbooks declared outside the playbook's tree.
	Hooks []Hook
}

// Hook is a hook playbook declared outside the playbook's tree.
type Hook struct {
	// Playbook is the name of the playbook whose phase is hooked; a hook of
	// another playbook is ignored, "" hooks every playbook.
	Playbook string
	Phase    string
	// When is "before" or "after".
	When string
	// File is the hook playbook's path on disk.
	File string
	// From says where the hook was declared (file:line:col), for messages.
	From string
}
