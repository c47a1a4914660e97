package schema

import (
	"github.com/mensylisir/kubexm/schema/internal/fieldpath"
)

// HookFile returns the absolute path of spec.hooks[i].file and where the
// hook was written, for the playbook loader.
func (c *Cluster) HookFile(i int) (file string, at Pos) {
	p := fieldpath.Index("spec.hooks", i)
	return c.ResolvePath(c.Spec.Hooks[i].File), c.PosOf(p)
}
