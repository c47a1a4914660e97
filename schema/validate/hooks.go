package validate

import (
	"github.com/mensylisir/kubexm/internal/suggest"
	"github.com/mensylisir/kubexm/schema"

	"cmp"
	"os"
	"regexp"
	"strings"

	"github.com/mensylisir/kubexm/schema/internal/fieldpath"
)

// phaseName is what a playbook may call a phase (the engine's rule).
var phaseName = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]*$`)

// validateHooks checks spec.hooks: every field given and the file present.
// Whether the playbook has the phase is known only with the playbook: kubexm
// play refuses an unknown phase before anything runs.
func validateHooks(c *schema.Cluster, ps *schema.Problems) {
	for i, h := range c.Spec.Hooks {
		p := fieldpath.Index("spec.hooks", i)
		if h.Playbook == "" {
			ps.Add(fieldpath.Child(p, "playbook"), "e.g. playbook: create-cluster", "a hook names the playbook it hooks")
		}
		switch {
		case h.Phase == "":
			ps.Add(fieldpath.Child(p, "phase"), "kubexm play "+cmp.Or(h.Playbook, "PLAYBOOK")+" --list-tasks lists the phases", "a hook names the phase it runs beside")
		case !phaseName.MatchString(h.Phase):
			ps.Add(fieldpath.Child(p, "phase"), "lowercase letters, digits, - and _, e.g. network", "%q is not a phase name", h.Phase)
		}
		// Not an enum field: the support matrix lists what is installed,
		// and a hook installs nothing of kubexm's.
		switch h.When {
		case "before", "after":
		case "":
			ps.Add(fieldpath.Child(p, "when"), "before or after", "a hook says when it runs")
		default:
			ps.Add(fieldpath.Child(p, "when"), strings.TrimSpace("before or after "+suggest.DidYouMean(h.When, []string{"before", "after"})), "invalid value %q", h.When)
		}
		if h.File == "" {
			ps.Add(fieldpath.Child(p, "file"), "a playbook file relative to the cluster file", "a hook names its playbook file")
			continue
		}
		if st, err := os.Stat(c.ResolvePath(h.File)); err != nil || st.IsDir() {
			ps.Add(fieldpath.Child(p, "file"), "a playbook file (a list of plays) relative to the cluster file", "hook playbook %s not found", c.ResolvePath(h.File))
		}
	}
}
