// Package kubexm holds the built-in playbooks and roles, embedded in the
// binary so that `kubexm play create-cluster` works from any directory.
// A copy on disk (see `kubexm playbook export`) overrides them.
package kubexm

import (
	"embed"
	"io/fs"
)

//go:embed playbooks roles
var content embed.FS

// Content returns the built-in tree: playbooks/<name>/... and roles/<name>/...
func Content() fs.FS { return content }
