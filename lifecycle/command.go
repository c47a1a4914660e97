package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/mensylisir/kubexm/engine"
	"github.com/mensylisir/kubexm/engine/model"
	"github.com/mensylisir/kubexm/engine/step"
	"github.com/mensylisir/kubexm/engine/transport"
	"github.com/mensylisir/kubexm/inventory"
)

// CommandRequest is `kubexm run command`: one command on hosts of a
// cluster at once, run as a play of one task (as Ansible's ad-hoc mode).
type CommandRequest struct {
	// Inventory is the cluster file; RolesPath the role directories
	// whose support matrix checks it.
	Inventory string
	RolesPath []string
	// Nodes are host names or patterns (as --limit), Groups groups of the
	// cluster file (master, master[0], worker, ...).
	Nodes  []string
	Groups []string
	// Limit further restricts the hosts, as kubexm play's --limit.
	Limit string
	// Argv is the command, each item one argument; with Shell it is one
	// script run by /bin/sh -c.
	Argv       []string
	Shell      bool
	Become     bool
	BecomeUser string
	// Timeout stops the command on a host after this long (0: waits).
	Timeout time.Duration
	// Forks is how many hosts run the command at once (at least 1).
	Forks int
	// WorkDir holds the run's journal (default .kubexm/<cluster name>).
	WorkDir string
}

// HostRun is the outcome of the command on one host, as `run command -o
// json` prints it and a server's worker stores it.
type HostRun struct {
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

// CommandRun is a checked request: the command, the cluster's inventory
// and the hosts chosen, ready to run.
type CommandRun struct {
	Command transport.Command
	Inv     *inventory.Inventory
	// Hosts are the hosts the command runs on: those --nodes and --group
	// chose, less those --limit leaves out.
	Hosts   []string
	chosen  []string // by --nodes and --group: the play's hosts
	limit   string
	forks   int
	workDir string
}

// PrepareCommand checks the command of req and chooses its hosts in the
// cluster file, before anything runs (also for a run on a server, which
// must be refused here as it would be there).
func (r Runner) PrepareCommand(req CommandRequest) (*CommandRun, error) {
	args := req.Argv
	c := transport.Command{Argv: args, Become: req.Become || req.BecomeUser != "", BecomeUser: req.BecomeUser, Timeout: req.Timeout}
	switch {
	case req.Shell && len(args) != 1:
		return nil, fmt.Errorf("--shell runs one argument with /bin/sh -c; got %d: quote the whole command line as one", len(args))
	case req.Shell:
		c = transport.Command{Script: args[0], Become: c.Become, BecomeUser: c.BecomeUser, Timeout: c.Timeout}
	case len(args) == 1 && strings.ContainsAny(args[0], " \t\n"):
		return nil, fmt.Errorf("the command %q is one argument with spaces, which no program is named: split it (-- %s) or add --shell to run it with /bin/sh -c", args[0], args[0])
	}
	if r.LoadInventory == nil {
		return nil, errors.New("this kubexm was built without an inventory loader")
	}
	s, err := SupportFromRolesPath(req.RolesPath)
	if err != nil {
		return nil, err
	}
	inv, err := r.LoadInventory(ReadClusterFile(req.Inventory), s)
	if err != nil {
		return nil, err
	}
	chosen, err := selectHosts(inv, req.Nodes, req.Groups)
	if err != nil {
		return nil, err
	}
	hosts, err := limitHosts(inv, chosen, req.Limit)
	if err != nil {
		return nil, err
	}
	workDir, err := workDirOf(inv, Request{WorkDir: req.WorkDir, Inventory: req.Inventory})
	if err != nil {
		return nil, err
	}
	return &CommandRun{Command: c, Inv: inv, Hosts: hosts, chosen: chosen, limit: req.Limit, forks: max(req.Forks, 1), workDir: workDir}, nil
}

// limitHosts are the hosts of chosen that limit (a pattern, as kubexm
// play's --limit) keeps, refused as the run would refuse them.
func limitHosts(inv *inventory.Inventory, chosen []string, limit string) ([]string, error) {
	if limit == "" {
		return chosen, nil
	}
	if err := engine.CheckLimit(inv, limit); err != nil {
		return nil, err
	}
	kept, _, err := engine.MatchHosts(inv, limit)
	if err != nil {
		return nil, fmt.Errorf("--limit: %w", err)
	}
	hosts := slices.DeleteFunc(slices.Clone(chosen), func(h string) bool { return !slices.Contains(kept, h) })
	if len(hosts) == 0 {
		return nil, fmt.Errorf("--limit %s leaves none of the hosts --nodes/--group chose (%s)", limit, strings.Join(chosen, ", "))
	}
	return hosts, nil
}

// CommandPlaybook is the playbook name a command's run is journaled under:
// the cluster views leave such runs out of what they say of the cluster.
const CommandPlaybook = "run-command"

// commandPlaybook is the play a command runs as. It holds nothing of the
// request: the play's hosts are set on the loaded play and the command is
// the step's own, so nothing the user typed is templated or read as YAML.
const commandPlaybook = `name: ` + CommandPlaybook + `
plays:
  - name: run command
    hosts: all
    tasks:
      - name: command
        run_command: {}
`

// RunCommand runs a prepared command on its hosts as a play of one task
// through the engine, at most Forks hosts at once, journaled in the work
// directory as every run is. It tells each host's outcome to each as it
// finishes (one call at a time), with the cluster file's secrets masked by
// the run, and returns every outcome. The error says why the command did
// not run everywhere it should have (cancelled: exit status 130); a
// command that failed on hosts is not one: their outcomes say so.
func (r Runner) RunCommand(ctx context.Context, cr *CommandRun, each func(HostRun)) ([]HostRun, error) {
	if ctx.Err() != nil {
		return nil, &ExitError{Err: fmt.Errorf("stopped before the command ran: %w", context.Cause(ctx)), Code: 130}
	}
	st := &commandStep{cmd: cr.Command, ran: map[string]transport.Result{}}
	pb, err := engine.LoadBytes(ctx, CommandPlaybook, []byte(commandPlaybook), engine.LoadOptions{
		Builtins: map[string]step.Builtin{"run_command": st}, Version: r.Version})
	if err != nil {
		return nil, err
	}
	pb.Plays[0].Hosts = strings.Join(cr.chosen, ",")
	var results []HostRun
	sink := model.SinkFunc(func(e model.Event) {
		if e.Kind != model.EventHostResult {
			return
		}
		res := st.hostRun(e)
		results = append(results, res)
		if each != nil {
			each(res)
		}
	})
	// No lock of the work directory or the hosts: a command is how one
	// looks at hosts while a play runs on them (and is stuck there).
	// Verbosity 1 puts each host's output in its result event.
	rc, err := engine.Run(ctx, pb, cr.Inv, engine.RunOptions{Connect: r.Connect, Forks: cr.forks, Limit: cr.limit,
		WorkDir: cr.workDir, Output: sink, Verbosity: 1, Version: r.Version})
	switch {
	case err == nil, errors.Is(err, engine.ErrFailed) && !rc.Cancelled:
		return results, nil
	case rc != nil && rc.Cancelled:
		return results, &ExitError{Err: err, Code: 130}
	}
	return results, err
}

// commandStep runs the command of a CommandRun on a host: the run_command
// step of commandPlaybook. It keeps what the result event does not carry
// (the exit status, and whether the output was cut), by host.
type commandStep struct {
	cmd transport.Command
	mu  sync.Mutex
	ran map[string]transport.Result
}

func (s *commandStep) Spec() step.Spec {
	return step.Spec{Name: "run_command", Summary: "Run the command of kubexm run command on the host."}
}

func (s *commandStep) Run(ctx context.Context, env *step.Env, _ step.Args) (step.Result, error) {
	res, err := env.Target.Run(ctx, s.cmd)
	data := map[string]any{"stdout": string(res.Stdout), "stderr": string(res.Stderr)}
	if err != nil {
		return step.Result{Data: data}, err
	}
	s.mu.Lock()
	s.ran[env.Host] = res
	s.mu.Unlock()
	data["rc"] = res.ExitCode
	out := step.Result{Changed: true, Data: data}
	if res.ExitCode != 0 {
		out.Failed, out.Msg = true, fmt.Sprintf("non-zero return code %d", res.ExitCode)
	}
	return out, nil
}

// hostRun is the outcome a host's result event e tells, with the exit
// status the step kept: failed with an error when the command could not
// run to its end (the transport failed, or it timed out), failed with its
// exit status when that is not 0.
func (s *commandStep) hostRun(e model.Event) HostRun {
	out := HostRun{Kind: "host_result", Host: e.Host, RC: -1, Stdout: e.Stdout, Stderr: e.Stderr, DurationMS: e.DurationMS}
	s.mu.Lock()
	res, ran := s.ran[e.Host]
	s.mu.Unlock()
	out.Truncated = res.Truncated
	switch {
	case e.Status == model.StatusUnreachable:
		out.Status, out.Error = "unreachable", e.Message
	case !ran:
		out.Status, out.Error = "failed", e.Message
	case res.ExitCode != 0:
		out.Status, out.RC = "failed", res.ExitCode
	default:
		out.Status, out.RC = "ok", 0
	}
	return out
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

// CommandSummary is what a command did over its hosts: the hosts by
// outcome, each list sorted by name.
type CommandSummary struct {
	OK, Failed, Unreachable []string
}

// SummarizeCommand sorts results by host and counts them.
func SummarizeCommand(results []HostRun) CommandSummary {
	slices.SortFunc(results, func(x, y HostRun) int { return strings.Compare(x.Host, y.Host) })
	s := CommandSummary{OK: []string{}, Failed: []string{}, Unreachable: []string{}}
	for _, r := range results {
		switch r.Status {
		case "ok":
			s.OK = append(s.OK, r.Host)
		case "failed":
			s.Failed = append(s.Failed, r.Host)
		default:
			s.Unreachable = append(s.Unreachable, r.Host)
		}
	}
	return s
}

// Err is the exit status a command's outcome means, as a run's: 2 when
// it failed somewhere, else 4 when a host was not reached; nil when it
// succeeded everywhere.
func (s CommandSummary) Err() error {
	switch {
	case len(s.Failed) > 0:
		return &ExitError{Err: fmt.Errorf("the command failed on %s", strings.Join(s.Failed, ", ")), Code: 2}
	case len(s.Unreachable) > 0:
		return &ExitError{Err: fmt.Errorf("not reached: %s", strings.Join(s.Unreachable, ", ")), Code: 4}
	}
	return nil
}
