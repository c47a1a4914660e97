package lifecycle

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/mensylisir/kubexm/engine"
	"github.com/mensylisir/kubexm/engine/transport"
	"github.com/mensylisir/kubexm/engine/transport/local"
	"github.com/mensylisir/kubexm/inventory"
)

// CommandRequest is `kubexm run command`: one command on hosts of a
// cluster at once, over the transports a run uses, without a playbook.
type CommandRequest struct {
	// Inventory is the cluster file; RolesPath the role directories
	// whose support matrix checks it.
	Inventory string
	RolesPath []string
	// Nodes are host names or patterns (as --limit), Groups groups of the
	// cluster file (master, master[0], worker, ...).
	Nodes  []string
	Groups []string
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
	Hosts   []string
	forks   int
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
	hosts, err := SelectHosts(inv, req.Nodes, req.Groups)
	if err != nil {
		return nil, err
	}
	return &CommandRun{Command: c, Inv: inv, Hosts: hosts, forks: max(req.Forks, 1)}, nil
}

// RunCommand runs a prepared command on its hosts, at most Forks at once,
// and tells each host's outcome to each as it finishes (one call at a
// time), with the cluster file's secrets masked. It returns every outcome.
func (r Runner) RunCommand(ctx context.Context, cr *CommandRun, each func(HostRun)) []HostRun {
	redact := engine.Redactor(cr.Inv.Secrets())
	slots := make(chan struct{}, cr.forks)
	var mu sync.Mutex
	var results []HostRun
	var wg sync.WaitGroup
	for _, name := range cr.Hosts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			slots <- struct{}{}
			defer func() { <-slots }()
			res := r.runOn(ctx, cr.Inv, name, cr.Command)
			res.Stdout, res.Stderr, res.Error = redact(res.Stdout), redact(res.Stderr), redact(res.Error)
			mu.Lock()
			defer mu.Unlock()
			results = append(results, res)
			if each != nil {
				each(res)
			}
		}()
	}
	wg.Wait()
	return results
}

// runOn runs c on one host: local hosts (and the control machine) directly,
// the others over the run's SSH connector.
func (r Runner) runOn(ctx context.Context, inv *inventory.Inventory, name string, c transport.Command) HostRun {
	out := HostRun{Kind: "host_result", Host: name, RC: -1}
	start := time.Now()
	defer func() { out.DurationMS = time.Since(start).Milliseconds() }()
	h, ok := inv.Host(name)
	var t transport.Transport
	var err error
	switch {
	case !ok: // localhost, which the file does not name: the control machine
		t = local.New(name)
	case h.Local:
		t = local.New(name, local.WithBecomePassword(cmp.Or(h.BecomePassword, h.Password)))
	case r.Connect == nil:
		err = fmt.Errorf("this kubexm was built without a remote transport")
	default:
		t, err = r.Connect(ctx, h)
	}
	if err != nil {
		out.Status, out.Error = "unreachable", err.Error()
		return out
	}
	defer t.Close()
	res, err := t.Run(ctx, c)
	out.Stdout, out.Stderr, out.Truncated = string(res.Stdout), string(res.Stderr), res.Truncated
	switch {
	case err != nil:
		out.Status, out.Error = "failed", err.Error()
	case res.ExitCode != 0:
		out.Status, out.RC = "failed", res.ExitCode
	default:
		out.Status, out.RC = "ok", 0
	}
	return out
}

// SelectHosts resolves --nodes and --group to hosts of inv: every name or
// pattern must match a host, every group must be one of the file's.
func SelectHosts(inv *inventory.Inventory, nodes, groups []string) ([]string, error) {
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
