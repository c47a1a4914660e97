package cli

import (
	"github.com/spf13/cobra"

	"github.com/mensylisir/kubexm/engine/output"
	"github.com/mensylisir/kubexm/internal/printers"
	"github.com/mensylisir/kubexm/lifecycle"
)

// newPlanClusterCmd is `kubexm plan cluster`: create-cluster under --check
// --diff, shown as a plan per host. It takes no lock and writes no journal
// (a check run), so it can run beside anything.
func newPlanClusterCmd(a *app) *cobra.Command {
	var f playFlags
	var remote clientFlags
	cmd := &cobra.Command{
		Use:   "cluster",
		Short: "What create cluster would change on each host, changing nothing",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var err error
			if f.Inventory, err = clusterFile(f.Inventory); err != nil {
				return err
			}
			if remote.Server != "" {
				if err := refuseLocalFlags(cmd, "roles-path", "overlay", "workdir"); err != nil {
					return err
				}
			}
			if err := printers.OneOf(f.Output, "text", "json"); err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			p := lifecycle.NewPlan(cmd.ErrOrStderr())
			if f.Output == "json" {
				p.Next = output.NewJSON(w)
			}
			// With --server the same check run is a job: its events come
			// back through the job's stream into the same plan.
			f.Check, f.Diff, f.Sink, f.Forks = true, true, p, 50
			err = a.playOn(cmd, "create-cluster", f, remote)
			return p.Summary().Write(w, f.Output, err)
		},
	}
	fl := cmd.Flags()
	addClusterFileFlag(fl, &f.Inventory)
	fl.StringSliceVarP(&f.Tags, "tags", "t", nil, "plan only tasks with these tags")
	fl.StringSliceVar(&f.SkipTags, "skip-tags", nil, "leave out tasks with these tags")
	fl.StringVarP(&f.Limit, "limit", "l", "", "plan only for these hosts (pattern)")
	addExtraVarsFlag(fl, &f.ExtraVars)
	fl.StringVarP(&f.Output, "output", "o", "text", "text or json")
	addRolesPathFlag(cmd, &f.RolesPath)
	addOverlayFlag(fl, &f.Overlays)
	fl.StringVar(&f.WorkDir, "workdir", "", "work directory (default .kubexm/<cluster name>)")
	addOfflineBundleFlag(fl, &f)
	addServerFlags(fl, &remote, "plan on this kubexm server (URL): the file is registered there and the check run is a job of its workers (docs/server.md)", "an operator's (the plan is a job)")
	return cmd
}
