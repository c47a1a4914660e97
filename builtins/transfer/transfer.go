// Package transfer provides the builtins that move artifacts: download
// (with checksums, mirrors and resume) onto the control machine, distribute
// from it to the hosts (relayed between hosts for large files), and
// unarchive there.
package transfer

import "github.com/mensylisir/kubexm/engine/step"

// Builtins returns the transfer builtins.
func Builtins() []step.Builtin {
	return []step.Builtin{newDownload(), unarchiveBuiltin{}, newDistribute()}
}
