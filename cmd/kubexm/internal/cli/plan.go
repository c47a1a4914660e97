package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/mensylisir/kubexm/engine/output"
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
			if remote.server != "" {
				if err := refuseLocalFlags(cmd, "roles-path", "overlay", "workdir"); err != nil {
					return err
				}
			}
			return a.planCluster(cmd, f, remote)
		},
	}
	fl := cmd.Flags()
	addClusterFileFlag(fl, &f.Inventory)
	fl.StringSliceVarP(&f.Tags, "tags", "t", nil, "plan only tasks with these tags")
	fl.StringSliceVar(&f.SkipTags, "skip-tags", nil, "leave out tasks with these tags")
	fl.StringVarP(&f.Limit, "limit", "l", "", "plan only for these hosts (pattern)")
	fl.StringArrayVarP(&f.ExtraVars, "extra-vars", "e", nil, "set a variable: name=value, @file.yaml or a {...} mapping (repeatable)")
	fl.StringVarP(&f.Output, "output", "o", "text", "text or json")
	fl.StringSliceVar(&f.RolesPath, "roles-path", nil, "directories searched for roles before the built-in ones")
	addOverlayFlag(fl, &f.Overlays)
	fl.StringVar(&f.WorkDir, "workdir", "", "work directory (default .kubexm/<cluster name>)")
	addOfflineBundleFlag(fl, &f)
	addServerFlags(fl, &remote, "plan on this kubexm server (URL): the file is registered there and the check run is a job of its workers (docs/server.md)", "an operator's (the plan is a job)")
	return cmd
}

func (a *app) planCluster(cmd *cobra.Command, f playFlags, remote clientFlags) error {
	if f.Output != "text" && f.Output != "json" {
		return fmt.Errorf("--output must be text or json, not %q", f.Output)
	}
	w := cmd.OutOrStdout()
	p := lifecycle.NewPlan(cmd.ErrOrStderr())
	if f.Output == "json" {
		p.Next = output.NewJSON(w)
	}
	f.Check, f.Diff = true, true
	var runErr error
	if remote.server != "" {
		// The same check run as a job: its events come back through the
		// job's stream into the same plan.
		var c *apiClient
		var id string
		if c, id, runErr = queueRemote(cmd, "create-cluster", f, remote); runErr != nil {
			return runErr
		}
		runErr = c.FollowJob(cmd.Context(), id, p, cmd.ErrOrStderr())
	} else {
		f.Sink, f.Forks = p, 50
		runErr = a.play(cmd.Context(), w, "create-cluster", f)
	}
	sum := p.Summary()
	hosts, change, same, skipped := sum.Hosts, sum.ToChange, sum.Unchanged, sum.Skipped
	if f.Output == "json" {
		data, err := json.Marshal(sum)
		if err != nil {
			return err
		}
		fmt.Fprintf(w, "%s\n", data)
		return runErr
	}
	writePlan(w, hosts)
	if runErr != nil {
		fmt.Fprintf(w, "\nThe plan is incomplete: the check run stopped (%v).\n", runErr)
		return runErr
	}
	if skipped > 0 {
		fmt.Fprintf(w, "%d tasks skipped: they do not apply, or their check needs an earlier change made first.\n", skipped)
	}
	fmt.Fprintf(w, "Plan: %d to change, %d unchanged.\n", change, same)
	return nil
}

func writePlan(w io.Writer, hosts []*lifecycle.HostPlan) {
	for _, h := range hosts {
		if len(h.Changes) == 0 && len(h.Failed) == 0 {
			fmt.Fprintf(w, "%s: no changes (%d unchanged)\n", h.Host, h.Unchanged)
			continue
		}
		fmt.Fprintf(w, "%s: %d to change, %d unchanged\n", h.Host, len(h.Changes), h.Unchanged)
		for _, c := range h.Changes {
			fmt.Fprintf(w, "  ~ %s\n", c.Task)
			if c.Diff != "" {
				for _, line := range strings.Split(strings.TrimRight(c.Diff, "\n"), "\n") {
					fmt.Fprintf(w, "      %s\n", line)
				}
			}
		}
		for _, c := range h.Failed {
			fmt.Fprintf(w, "  ! %s (%s): %s\n", c.Task, c.Pos, c.Message)
		}
	}
	fmt.Fprintln(w)
}
