package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/mensylisir/kubexm/lifecycle"
	"github.com/mensylisir/kubexm/service/client"
	"github.com/mensylisir/kubexm/service/jobstore"
)

type runCommandFlags struct {
	file       string
	nodes      []string
	groups     []string
	limit      string
	shell      bool
	become     bool
	becomeUser string
	timeout    time.Duration
	forks      int
	output     string
	rolesPath  []string
	workDir    string
}

// newRunCommandCmd is `kubexm run command`: one command on many hosts at
// once, as a play of one task.
func newRunCommandCmd(a *app) *cobra.Command {
	var f runCommandFlags
	var remote clientFlags
	cmd := &cobra.Command{
		Use:   "command -f cluster.yaml (--nodes HOSTS | --group GROUP) -- COMMAND [ARG...]",
		Short: "Run a command on hosts of a cluster at once; output and exit status per host",
		RunE: func(cmd *cobra.Command, args []string) error {
			if cmd.ArgsLenAtDash() != 0 || len(args) == 0 {
				return errors.New("give the command after --: kubexm run command -f cluster.yaml --nodes n1 -- uptime")
			}
			if remote.server != "" {
				return a.runCommandRemote(cmd, f, args, remote)
			}
			return a.runCommand(cmd.Context(), cmd.OutOrStdout(), f, args)
		},
	}
	fl := cmd.Flags()
	addClusterFileFlag(fl, &f.file)
	fl.StringSliceVar(&f.nodes, "nodes", nil, "hosts: names or patterns (comma separated)")
	fl.StringSliceVar(&f.groups, "group", nil, "groups of the cluster file (comma separated)")
	fl.StringVarP(&f.limit, "limit", "l", "", "further limit the hosts to a pattern, as kubexm play's --limit")
	fl.BoolVar(&f.shell, "shell", false, "run the one argument after -- with /bin/sh -c")
	fl.BoolVarP(&f.become, "become", "b", false, "run as root (or --become-user) through sudo")
	fl.StringVar(&f.becomeUser, "become-user", "", "the user --become runs as (default root)")
	fl.DurationVar(&f.timeout, "timeout", 0, "stop the command on a host after this long (e.g. 30s); 0 waits")
	fl.IntVar(&f.forks, "forks", 50, "how many hosts run the command at once")
	fl.StringVarP(&f.output, "output", "o", "text", "text, or json: one JSON object per host and a summary")
	fl.StringSliceVar(&f.rolesPath, "roles-path", nil, "directories searched for roles (their support matrix checks the cluster file)")
	fl.StringVar(&f.workDir, "workdir", "", "work directory holding run journals (default .kubexm/<cluster name>)")
	addServerFlags(fl, &remote, "run it from this kubexm server (URL) as a job: the file is registered there, its worker reaches the hosts, the output comes back here (docs/server.md)", "an operator's")
	return cmd
}

// prepareCommand checks the flags and the command, and chooses the hosts
// of the cluster file; the request carries the file -f resolves to.
func (a *app) prepareCommand(f runCommandFlags, args []string) (*lifecycle.CommandRun, lifecycle.CommandRequest, error) {
	req := lifecycle.CommandRequest{Nodes: f.nodes, Groups: f.groups, Limit: f.limit, Argv: args, Shell: f.shell, Become: f.become,
		BecomeUser: f.becomeUser, Timeout: f.timeout, Forks: f.forks, RolesPath: f.rolesPath, WorkDir: f.workDir}
	if f.output != "text" && f.output != "json" {
		return nil, req, fmt.Errorf("--output must be text or json, not %q", f.output)
	}
	var err error
	if req.Inventory, err = clusterFile(f.file); err != nil {
		return nil, req, err
	}
	cr, err := a.runner().PrepareCommand(req)
	return cr, req, err
}

func (a *app) runCommand(ctx context.Context, w io.Writer, f runCommandFlags, args []string) error {
	cr, _, err := a.prepareCommand(f, args)
	if err != nil {
		return err
	}
	results, err := a.runner().RunCommand(ctx, cr, func(r lifecycle.HostRun) { writeHostRun(w, f.output, r) })
	if err != nil && results == nil {
		return err
	}
	// Interrupted: the hosts that answered, then why the others did not.
	if serr := runSummary(w, f.output, results); err == nil {
		err = serr
	}
	return err
}

func writeHostRun(w io.Writer, format string, r lifecycle.HostRun) {
	if format == "json" {
		data, _ := json.Marshal(r)
		fmt.Fprintf(w, "%s\n", data)
		return
	}
	switch r.Status {
	case "unreachable":
		fmt.Fprintf(w, "%s | UNREACHABLE | %s\n", r.Host, r.Error)
		return
	case "failed":
		if r.Error != "" {
			fmt.Fprintf(w, "%s | FAILED | %s\n", r.Host, r.Error)
		} else {
			fmt.Fprintf(w, "%s | FAILED | rc=%d >>\n", r.Host, r.RC)
		}
	default:
		fmt.Fprintf(w, "%s | ok | rc=0 >>\n", r.Host)
	}
	if r.Stdout != "" {
		fmt.Fprintln(w, strings.TrimRight(r.Stdout, "\n"))
	}
	if r.Stderr != "" {
		fmt.Fprintln(w, "stderr:")
		fmt.Fprintln(w, strings.TrimRight(r.Stderr, "\n"))
	}
	if r.Truncated {
		fmt.Fprintln(w, "(output truncated)")
	}
}

// runSummary prints the counts and turns failures into the exit status of
// a run (lifecycle.CommandSummary.Err).
func runSummary(w io.Writer, format string, results []lifecycle.HostRun) error {
	s := lifecycle.SummarizeCommand(results)
	if format == "json" {
		data, _ := json.Marshal(map[string]any{"kind": "summary", "ok": len(s.OK), "failed": s.Failed, "unreachable": s.Unreachable})
		fmt.Fprintf(w, "%s\n", data)
	} else {
		fmt.Fprintf(w, "\n%d hosts: %d ok, %d failed, %d unreachable\n", len(results), len(s.OK), len(s.Failed), len(s.Unreachable))
	}
	return s.Err()
}

// runCommandRemote runs the command as a job of a kubexm server: the
// flags, the command and the hosts are checked here as for a local run,
// the cluster file is registered there, and each host's outcome is
// printed as it comes back, as a local run prints it (the worker runs
// this same verb with -o json). A command job is never resumed: one that
// was interrupted may have run on some hosts.
func (a *app) runCommandRemote(cmd *cobra.Command, f runCommandFlags, args []string, remote clientFlags) error {
	_, req, err := a.prepareCommand(f, args)
	if err != nil {
		return err
	}
	jc := client.CommandJob(req)
	c, id, err := queueRemote(cmd, jobstore.CommandPlaybook, playFlags{Inventory: req.Inventory, Output: f.output}, remote, func(o *jobstore.Options) { o.Command = jc })
	if err != nil {
		return err
	}
	w := cmd.OutOrStdout()
	results, err := c.FollowCommand(cmd.Context(), id, func(r lifecycle.HostRun) { writeHostRun(w, f.output, r) }, cmd.ErrOrStderr())
	if err != nil {
		return err
	}
	return runSummary(w, f.output, results)
}
