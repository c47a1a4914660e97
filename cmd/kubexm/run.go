package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/mensylisir/kubexm/engine"
	"github.com/mensylisir/kubexm/engine/transport"
	"github.com/mensylisir/kubexm/engine/transport/local"
	"github.com/mensylisir/kubexm/inventory"
	"github.com/mensylisir/kubexm/lifecycle"
	"github.com/mensylisir/kubexm/service/client"
	"github.com/mensylisir/kubexm/service/jobstore"
)

type runCommandFlags struct {
	file       string
	nodes      []string
	groups     []string
	shell      bool
	become     bool
	becomeUser string
	timeout    time.Duration
	forks      int
	output     string
	rolesPath  []string
}

// newRunCommandCmd is `kubexm run command`: one command on many hosts at
// once, over the transports a run uses, without a playbook.
func newRunCommandCmd(a *app) *cobra.Command {
	var f runCommandFlags
	var remote clientFlags
	cmd := &cobra.Command{
		Use:   "command -f cluster.yaml (--nodes HOSTS | --group GROUP) -- COMMAND [ARG...]",
		Short: "Run a command on hosts of a cluster at once; output and exit status per host",
		Long: `Run COMMAND on the hosts chosen by --nodes (names or patterns, as --limit:
n1,n2  master-*  all  etcd:!n3) and --group (groups of cluster.yaml: master,
etcd, worker, k8s_cluster, ...), all at once (at most --forks), over the SSH
connection kubexm uses for a run, or directly for local hosts. Each host's
output and exit status is printed as it finishes; kubexm exits 2 when the
command failed on any host and 4 when a host could not be reached.

COMMAND and its arguments come after --, and are passed as they are, each as
one argument: nothing is interpreted by a shell on the host. For pipes and
redirections, give one argument and --shell (it runs with /bin/sh -c).
Secrets of cluster.yaml are masked in the output.`,
		Example: `  kubexm run command -f cluster.yaml --group master -- systemctl is-active kube-apiserver
  kubexm run command -f cluster.yaml --nodes n1,n2 --become -- journalctl -u kubelet -n 20
  kubexm run command -f cluster.yaml --nodes all --shell -- 'df -h / | tail -1'`,
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
	fl.BoolVar(&f.shell, "shell", false, "run the one argument after -- with /bin/sh -c")
	fl.BoolVarP(&f.become, "become", "b", false, "run as root (or --become-user) through sudo")
	fl.StringVar(&f.becomeUser, "become-user", "", "the user --become runs as (default root)")
	fl.DurationVar(&f.timeout, "timeout", 0, "stop the command on a host after this long (e.g. 30s); 0 waits")
	fl.IntVar(&f.forks, "forks", 50, "how many hosts run the command at once")
	fl.StringVarP(&f.output, "output", "o", "text", "text, or json: one JSON object per host and a summary")
	fl.StringSliceVar(&f.rolesPath, "roles-path", nil, "directories searched for roles (their support matrix checks the cluster file)")
	addServerFlags(fl, &remote, "run it from this kubexm server (URL) as a job: the file is registered there, its worker reaches the hosts, the output comes back here (docs/server.md)", "an operator's")
	return cmd
}

// hostRun is the outcome of the command on one host.
type hostRun struct {
	Kind       string `json:"kind"` // host_result
	Host       string `json:"host"`
	Status     string `json:"status"` // ok, failed, unreachable
	RC         int    `json:"rc"`
	Stdout     string `json:"stdout"`
	Stderr     string `json:"stderr"`
	Error      string `json:"error,omitempty"`
	Truncated  bool   `json:"truncated,omitempty"`
	DurationMS int64  `json:"duration_ms"`
}

// prepareCommand checks the flags and the command, and chooses the hosts
// of the cluster file.
func (a *app) prepareCommand(f runCommandFlags, args []string) (transport.Command, *inventory.Inventory, []string, error) {
	if f.output != "text" && f.output != "json" {
		return transport.Command{}, nil, nil, fmt.Errorf("--output must be text or json, not %q", f.output)
	}
	file, err := clusterFile(f.file)
	if err != nil {
		return transport.Command{}, nil, nil, err
	}
	f.file = file
	c := transport.Command{Argv: args, Become: f.become || f.becomeUser != "", BecomeUser: f.becomeUser, Timeout: f.timeout}
	switch {
	case f.shell && len(args) != 1:
		return c, nil, nil, fmt.Errorf("--shell runs one argument with /bin/sh -c; got %d: quote the whole command line as one", len(args))
	case f.shell:
		c = transport.Command{Script: args[0], Become: c.Become, BecomeUser: c.BecomeUser, Timeout: c.Timeout}
	case len(args) == 1 && strings.ContainsAny(args[0], " \t\n"):
		return c, nil, nil, fmt.Errorf("the command %q is one argument with spaces, which no program is named: split it (-- %s) or add --shell to run it with /bin/sh -c", args[0], args[0])
	}
	s, err := lifecycle.SupportFromRolesPath(f.rolesPath)
	if err != nil {
		return c, nil, nil, err
	}
	inv, err := a.loadInventory(lifecycle.ReadClusterFile(f.file), s)
	if err != nil {
		return c, nil, nil, err
	}
	hosts, err := selectHosts(inv, f.nodes, f.groups)
	return c, inv, hosts, err
}

func (a *app) runCommand(ctx context.Context, w io.Writer, f runCommandFlags, args []string) error {
	c, inv, hosts, err := a.prepareCommand(f, args)
	if err != nil {
		return err
	}
	redact := engine.Redactor(inv.Secrets())
	forks := max(f.forks, 1)
	slots := make(chan struct{}, forks)
	var mu sync.Mutex
	var results []hostRun
	var wg sync.WaitGroup
	for _, name := range hosts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			slots <- struct{}{}
			defer func() { <-slots }()
			r := a.runOn(ctx, inv, name, c)
			r.Stdout, r.Stderr, r.Error = redact(r.Stdout), redact(r.Stderr), redact(r.Error)
			mu.Lock()
			defer mu.Unlock()
			results = append(results, r)
			writeHostRun(w, f.output, r)
		}()
	}
	wg.Wait()
	return runSummary(w, f.output, results)
}

// runOn runs c on one host: local hosts (and the control machine) directly,
// the others over the run's SSH connector.
func (a *app) runOn(ctx context.Context, inv *inventory.Inventory, name string, c transport.Command) hostRun {
	r := hostRun{Kind: "host_result", Host: name, RC: -1}
	start := time.Now()
	defer func() { r.DurationMS = time.Since(start).Milliseconds() }()
	h, ok := inv.Host(name)
	var t transport.Transport
	var err error
	switch {
	case !ok: // localhost, which the file does not name: the control machine
		t = local.New(name)
	case h.Local:
		t = local.New(name, local.WithBecomePassword(cmp.Or(h.BecomePassword, h.Password)))
	case a.connect == nil:
		err = fmt.Errorf("this kubexm was built without a remote transport")
	default:
		t, err = a.connect(ctx, h)
	}
	if err != nil {
		r.Status, r.Error = "unreachable", err.Error()
		return r
	}
	defer t.Close()
	res, err := t.Run(ctx, c)
	r.Stdout, r.Stderr, r.Truncated = string(res.Stdout), string(res.Stderr), res.Truncated
	switch {
	case err != nil:
		r.Status, r.Error = "failed", err.Error()
	case res.ExitCode != 0:
		r.Status, r.RC = "failed", res.ExitCode
	default:
		r.Status, r.RC = "ok", 0
	}
	return r
}

// selectHosts resolves --nodes and --group to hosts of inv: every name or
// pattern must match a host, every group must be one of the file's.
func selectHosts(inv *inventory.Inventory, nodes, groups []string) ([]string, error) {
	if len(nodes) == 0 && len(groups) == 0 {
		return nil, errors.New("choose the hosts with --nodes (names or patterns, or all) or --group (master, etcd, worker, ...)")
	}
	var parts []string
	for _, g := range groups {
		base := g
		if i := strings.IndexByte(g, '['); i > 0 {
			base = g[:i] // master[0]: the first master
		}
		if _, ok := inv.Groups[base]; !ok {
			names := make([]string, 0, len(inv.Groups))
			for n := range inv.Groups {
				names = append(names, n)
			}
			slices.Sort(names)
			return nil, fmt.Errorf("--group %s: no such group in the cluster file; its groups: %s", g, strings.Join(names, ", "))
		}
		parts = append(parts, g)
	}
	parts = append(parts, nodes...)
	hosts, unknown, err := engine.MatchHosts(inv, strings.Join(parts, ","))
	if err != nil {
		return nil, err
	}
	if len(unknown) > 0 {
		names := make([]string, 0, len(inv.Hosts))
		for _, h := range inv.Hosts {
			names = append(names, h.Name)
		}
		return nil, fmt.Errorf("--nodes: %s matches no host of the cluster file; its hosts: %s", strings.Join(unknown, ", "), strings.Join(names, ", "))
	}
	if len(hosts) == 0 {
		return nil, fmt.Errorf("--nodes/--group %s: no host left", strings.Join(parts, ","))
	}
	return hosts, nil
}

func writeHostRun(w io.Writer, format string, r hostRun) {
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
// a run: 2 when the command failed somewhere, else 4 when a host was not
// reached.
func runSummary(w io.Writer, format string, results []hostRun) error {
	slices.SortFunc(results, func(x, y hostRun) int { return strings.Compare(x.Host, y.Host) })
	ok, failed, unreachable := []string{}, []string{}, []string{}
	for _, r := range results {
		switch r.Status {
		case "ok":
			ok = append(ok, r.Host)
		case "failed":
			failed = append(failed, r.Host)
		default:
			unreachable = append(unreachable, r.Host)
		}
	}
	if format == "json" {
		data, _ := json.Marshal(map[string]any{"kind": "summary", "ok": len(ok), "failed": failed, "unreachable": unreachable})
		fmt.Fprintf(w, "%s\n", data)
	} else {
		fmt.Fprintf(w, "\n%d hosts: %d ok, %d failed, %d unreachable\n", len(results), len(ok), len(failed), len(unreachable))
	}
	switch {
	case len(failed) > 0:
		return &lifecycle.ExitError{Err: fmt.Errorf("the command failed on %s", strings.Join(failed, ", ")), Code: 2}
	case len(unreachable) > 0:
		return &lifecycle.ExitError{Err: fmt.Errorf("not reached: %s", strings.Join(unreachable, ", ")), Code: 4}
	}
	return nil
}

// runCommandRemote runs the command as a job of a kubexm server: the
// flags, the command and the hosts are checked here as for a local run,
// the cluster file is registered there, and each host's outcome is
// printed as it comes back, as a local run prints it (the worker runs
// this same verb with -o json). A command job is never resumed: one that
// was interrupted may have run on some hosts.
func (a *app) runCommandRemote(cmd *cobra.Command, f runCommandFlags, args []string, remote clientFlags) error {
	if _, _, _, err := a.prepareCommand(f, args); err != nil {
		return err
	}
	jc := &jobstore.Command{Argv: args, Nodes: f.nodes, Groups: f.groups, Shell: f.shell, Become: f.become, BecomeUser: f.becomeUser, Forks: f.forks}
	if f.timeout > 0 {
		jc.Timeout = f.timeout.String()
	}
	c, id, err := queueRemote(cmd, jobstore.CommandPlaybook, playFlags{Inventory: f.file, Output: f.output}, remote, func(o *jobstore.Options) { o.Command = jc })
	if err != nil {
		return err
	}
	w, errw := cmd.OutOrStdout(), cmd.ErrOrStderr()
	var results []hostRun
	summary := false
	j, err := c.FollowEvents(cmd.Context(), id, func(data []byte) {
		stored, ok := client.ServiceEvent(data, errw)
		switch {
		case !ok:
		case stored.Kind == "summary":
			summary = true
		case stored.Kind == "host_result":
			var r hostRun
			if err := json.Unmarshal(stored.Data, &r); err != nil {
				fmt.Fprintf(errw, "event %d does not decode: %v\n", stored.ID, err)
				return
			}
			results = append(results, r)
			writeHostRun(w, f.output, r)
		}
	}, errw)
	if err != nil {
		return err
	}
	// The job fails when the command failed on a host; the summary says
	// so with the exit status of a local run. A job that ended without
	// one (cancelled, or the command never ran) says why itself.
	if !summary {
		if err := client.JobResult(j); err != nil {
			return err
		}
	}
	return runSummary(w, f.output, results)
}
