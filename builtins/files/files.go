// Package files provides the builtins that put files on a host and keep
// them as a task says: copy, template, fetch, file, lineinfile, blockinfile,
// htpasswd and sync_dir (they compare before they write, show a diff, and
// change nothing in check mode); and slurp, which reads one.
package files

import "github.com/mensylisir/kubexm/engine/step"

// Builtins returns the file builtins.
func Builtins() []step.Builtin {
	return []step.Builtin{
		copyBuiltin{}, templateBuiltin{}, fetchBuiltin{},
		File{}, LineInFile{}, blockinfileBuiltin{},
		htpasswdBuiltin{}, syncDirBuiltin{}, slurpBuiltin{},
	}
}
