package cli

import (
	"errors"

	"github.com/spf13/cobra"

	"github.com/mensylisir/kubexm/internal/printers"
	"github.com/mensylisir/kubexm/lifecycle"
)

// newRunCommandCmd is `kubexm run command`: one command on many hosts at
// once, as a play of one task (lifecycle.RunCommand), or as a job of a
// kubexm server with --server. Each host's outcome is printed as it comes
// (the server's worker runs this same verb with -o json). A command job is
// never resumed: one that was interrupted may have run on some hosts.
func newRunCommandCmd(a *app) *cobra.Command {
	var f clusterFlags
	var req lifecycle.CommandRequest
	var remote clientFlags
	cmd := &cobra.Command{
		Use:   "command -f cluster.yaml (--nodes HOSTS | --group GROUP) -- COMMAND [ARG...]",
		Short: "Run a command on hosts of a cluster at once; output and exit status per host",
		RunE: func(cmd *cobra.Command, args []string) error {
			if cmd.ArgsLenAtDash() != 0 || len(args) == 0 {
				return errors.New("give the command after --: kubexm run command -f cluster.yaml --nodes n1 -- uptime")
			}
			if err := printers.OneOf(f.output, "text", "json"); err != nil {
				return err
			}
			var err error
			if req.Inventory, err = clusterFile(f.file); err != nil {
				return err
			}
			req.Argv, req.RolesPath, req.WorkDir = args, f.rolesPath, f.workDir
			cr, err := a.Runner.PrepareCommand(req)
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			each := func(r lifecycle.HostRun) { r.Write(w, f.output) }
			x, err := a.executor(cmd, remote, f.output)
			if err != nil {
				return err
			}
			results, err := x.Command(cmd.Context(), req, cr, each)
			if err != nil && results == nil {
				return err
			}
			// Interrupted: the hosts that answered, then why the others
			// did not.
			if serr := lifecycle.WriteCommandSummary(w, f.output, results); err == nil {
				err = serr
			}
			return err
		},
	}
	addClusterFlags(cmd, &f, "")
	fl := cmd.Flags()
	fl.StringSliceVar(&req.Nodes, "nodes", nil, "hosts: names or patterns (comma separated)")
	fl.StringSliceVar(&req.Groups, "group", nil, "groups of the cluster file (comma separated)")
	fl.StringVarP(&req.Limit, "limit", "l", "", "further limit the hosts to a pattern, as kubexm play's --limit")
	fl.BoolVar(&req.Shell, "shell", false, "run the one argument after -- with /bin/sh -c")
	fl.BoolVarP(&req.Become, "become", "b", false, "run as root (or --become-user) through sudo")
	fl.StringVar(&req.BecomeUser, "become-user", "", "the user --become runs as (default root)")
	fl.DurationVar(&req.Timeout, "timeout", 0, "stop the command on a host after this long (e.g. 30s); 0 waits")
	fl.IntVar(&req.Forks, "forks", 50, "how many hosts run the command at once")
	fl.StringVarP(&f.output, "output", "o", "text", "text, or json: one JSON object per host and a summary")
	addServerFlags(fl, &remote, "run it from this kubexm server (URL) as a job: the file is registered there, its worker reaches the hosts, the output comes back here (docs/server.md)", "an operator's")
	return cmd
}
