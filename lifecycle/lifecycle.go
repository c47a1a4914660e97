// Package lifecycle runs a playbook against a cluster: the support matrix,
// the inventory, the work directory and its lock, the offline bundle, the
// event sink and the exit status of a run, as one call. The CLI (kubexm
// play and the verbs) calls it; it knows no flag and no command line.
package lifecycle

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/mensylisir/kubexm/schema/matrix"
	"github.com/mensylisir/kubexm/schema/rolevars"

	"github.com/mensylisir/kubexm/engine/model"

	"github.com/mensylisir/kubexm/builtins"
	"github.com/mensylisir/kubexm/bundle"
	"github.com/mensylisir/kubexm/engine"
	"github.com/mensylisir/kubexm/engine/output"
	"github.com/mensylisir/kubexm/engine/step"
	"github.com/mensylisir/kubexm/engine/transport"
	"github.com/mensylisir/kubexm/inventory"
)

// Runner holds what a run needs from the program that wires it.
type Runner struct {
	// LoadInventory reads a cluster file, refusing the choices the support
	// matrix s (of the playbook's tree) marks as not supported yet.
	LoadInventory func(f *ClusterFile, s *matrix.Support) (*inventory.Inventory, error)
	Builtins      map[string]step.Builtin
	Connect       func(ctx context.Context, h *inventory.Host) (transport.Transport, error)
	BuiltinFS     fs.FS // holds playbooks/ and roles/
	// Version is the running kubexm's, for the loader and the journal.
	Version string
	// TextSink is the human view of a run on w (-o text), made only when
	// the run begins; stop ends it.
	TextSink func(w io.Writer, verbosity int) (sink model.Sink, stop func())
}

// Request is one run: the playbook, the cluster and every option of
// `kubexm play`.
type Request struct {
	// Playbook is a directory holding playbook.yaml, a YAML file, or the
	// name of a built-in playbook.
	Playbook  string
	Inventory string
	Tags      []string
	SkipTags  []string
	StartAt   string
	Limit     string
	Check     bool
	Diff      bool
	ExtraVars []string
	Forks     int
	ListTasks bool
	ListHosts bool
	ListTags  bool
	Syntax    bool
	Resume    string
	// ResumeRerunsControl: a resume runs again the tasks whose product is
	// on the control machine (operator mode's new leader, whose work
	// directory is not the interrupted run's; engine.RunOptions).
	ResumeRerunsControl bool
	// Output is text or json.
	Output    string
	Verbose   int
	RolesPath []string
	// Overlays replace single files of roles and add hook plays
	// (docs/playbooks.md#forking-for-your-site).
	Overlays  []string
	WorkDir   string
	NoJournal bool
	// LockWait and BreakLock: how long to wait for the hosts' kubexm lock,
	// and whether to end a run that holds it.
	LockWait  time.Duration
	BreakLock bool
	// ReadOnly runs a playbook that changes no host (get kubeconfig): no
	// lock, no journal, as Check, but its writes to the work directory are
	// made.
	ReadOnly bool
	// ForceHandlers runs notified handlers on hosts that failed.
	ForceHandlers bool
	// OfflineBundle is a bundle of `kubexm artifact export` to install from.
	OfflineBundle string
	// Backup is the archive the restore playbook reads (backup_file).
	Backup string
	// Loaded, when set, is told the cluster of the run once its file is
	// loaded and checked, before the lock is taken and anything runs (not
	// for a listing or a syntax check): a verb asks its confirmation
	// there, from the run's own decoding of the file. An error stops the
	// run with nothing changed.
	Loaded func(Cluster) error
	// Sink, when set, receives the run's events instead of the view Output
	// chooses: for callers that present a run their own way.
	Sink model.Sink
	// Stdout receives the listings, the events and the messages of the
	// run; Stderr the bundle's messages under -o json (os.Stderr if nil).
	Stdout io.Writer
	Stderr io.Writer
}

// ExitError carries the process exit status: 2 when hosts failed, 4 when
// some were unreachable, 130 when interrupted.
type ExitError struct {
	Err  error
	Code int
}

func (e *ExitError) Error() string { return e.Err.Error() }
func (e *ExitError) Unwrap() error { return e.Err }
func (e *ExitError) ExitCode() int { return e.Code }

// Run loads req's playbook and, unless req only asks to check or list it,
// runs it against req's inventory. The recap is nil when nothing ran.
func (r Runner) Run(ctx context.Context, req Request) (*model.Recap, error) {
	w := req.Stdout
	if req.Output != "text" && req.Output != "json" {
		return nil, fmt.Errorf("--output must be text or json, not %q", req.Output)
	}
	reg := r.Builtins
	if req.OfflineBundle != "" {
		reg = builtins.Offline(reg)
	}
	// The cluster file is read and decoded once: its hooks load with the
	// playbook, and the playbook's support matrix then checks it.
	var file *ClusterFile
	if req.Inventory != "" {
		file = ReadClusterFile(req.Inventory)
	}
	pb, err := engine.Load(ctx, req.Playbook, r.LoadOptions(file, req.RolesPath, req.Overlays, reg))
	if err != nil {
		return nil, err
	}
	switch {
	case req.Syntax:
		fmt.Fprintf(w, "playbook: %s (%s): syntax OK, %d plays\n", pb.Name, pb.Path, len(pb.Plays))
		return nil, nil
	case req.ListTasks:
		return nil, pb.ListTasks(w, req.Tags, req.SkipTags)
	case req.ListTags:
		return nil, pb.ListTags(w)
	}
	inv, roleVars, err := r.inventory(pb, file, req)
	if err != nil {
		return nil, err
	}
	if req.ListHosts {
		return nil, pb.ListHosts(w, inv, req.Limit)
	}
	extra, err := extraVars(pb, inv, roleVars, req)
	if err != nil {
		return nil, err
	}
	workDir, err := workDirOf(inv, req)
	if err != nil {
		return nil, err
	}
	if req.Loaded != nil {
		if err := req.Loaded(clusterOf(inv, workDir)); err != nil {
			return nil, err
		}
	}
	// A run that changes the cluster holds its work directory: two at once
	// would interleave their changes and their journals.
	if !req.Check && !req.ReadOnly {
		lock, err := LockWorkDir(workDir, "play "+req.Playbook)
		if err != nil {
			return nil, err
		}
		defer lock.Release()
	}
	if req.OfflineBundle != "" {
		// Verified (and unpacked once) before anything runs.
		dir, _, err := bundle.Open(ctx, req.OfflineBundle, workDir, bundleLogf(req))
		if err != nil {
			return nil, err
		}
		extra["offline_bundle_dir"] = dir
		// The bundle itself, for the roles that send it on (the in-cluster
		// controller's runs install from it too: roles/kubexm-controller);
		// Open unpacked it under its sha256.
		abs, err := filepath.Abs(req.OfflineBundle)
		if err != nil {
			return nil, fmt.Errorf("--offline-bundle: %w", err)
		}
		extra["offline_bundle_file"], extra["offline_bundle_sha256"] = abs, filepath.Base(dir)
	}
	return r.run(ctx, pb, inv, extra, workDir, req)
}

// run runs the loaded playbook with the sink req asks for, and gives its
// failure the exit status it means.
func (r Runner) run(ctx context.Context, pb *engine.Playbook, inv *inventory.Inventory, extra map[string]any, workDir string, req Request) (*model.Recap, error) {
	w := req.Stdout
	// A signal that came while the files were read stops here, before
	// anything runs.
	if ctx.Err() != nil {
		return nil, &ExitError{Err: fmt.Errorf("stopped before the run began: %w", context.Cause(ctx)), Code: 130}
	}
	if req.Output != "json" && req.Sink == nil {
		// What a run keeps (its journal, the cluster's PKI, the admin
		// kubeconfig) is there: say where, since it follows the directory.
		fmt.Fprintf(w, "work directory: %s\n", workDir)
	}
	sink, stop := r.Sink(w, req)
	defer stop()
	// The running binary, for plays that install kubexm itself on a host
	// (the autoRenewCerts timer); "" when the system cannot say.
	exe, _ := os.Executable()
	// The host keys kubexm trusts, for plays that hand them on (the
	// in-cluster controller's Secret); "" when there is no state directory.
	knownHosts := ""
	if dir, err := StateDir(); err == nil {
		knownHosts = filepath.Join(dir, "known_hosts")
	}
	rc, err := engine.Run(ctx, pb, inv, engine.RunOptions{
		Defaults: map[string]any{"kubexm_executable": exe, "kubexm_os": runtime.GOOS, "kubexm_arch": runtime.GOARCH, "kubexm_known_hosts": knownHosts},
		Connect:  r.Connect, Forks: req.Forks, Check: req.Check, Diff: req.Diff, Tags: req.Tags, SkipTags: req.SkipTags,
		StartAt: req.StartAt, Limit: req.Limit, ExtraVars: extra, WorkDir: workDir, Resume: req.Resume, ResumeRerunsControl: req.ResumeRerunsControl,
		Output: sink, Verbosity: req.Verbose, Version: r.Version, NoJournal: req.NoJournal || req.Check || req.ReadOnly, HostLock: !req.Check && !req.ReadOnly,
		LockFirst: firstOf(inv.Groups["master"]), LockWait: req.LockWait, BreakLock: req.BreakLock,
		ForceHandlers: req.ForceHandlers,
	})
	if err == nil {
		return rc, nil
	}
	switch {
	case rc != nil && rc.Cancelled:
		return rc, &ExitError{Err: err, Code: 130}
	case errors.Is(err, engine.ErrFailed):
		code := 2
		for _, s := range rc.Hosts {
			if s.Unreachable > 0 && s.Failed == 0 {
				code = 4
			}
		}
		return rc, &ExitError{Err: err, Code: code}
	}
	return rc, err
}

// Sink is the view of a run on w that req asks for: its own Sink, the
// JSON events (-o json) or the text for people; stop ends it. A run on a
// kubexm server is shown through it as a local one is.
func (r Runner) Sink(w io.Writer, req Request) (sink model.Sink, stop func()) {
	switch {
	case req.Sink != nil:
		return req.Sink, func() {}
	case req.Output == "json":
		return output.NewJSON(w), func() {}
	case r.TextSink != nil:
		return r.TextSink(w, req.Verbose)
	}
	return output.NewText(w, req.Verbose), func() {}
}

// inventory is the run's inventory and the role variables -e values are
// checked against (set for a cluster; an Ansible-style inventory's run is
// the user's own).
func (r Runner) inventory(pb *engine.Playbook, file *ClusterFile, req Request) (*inventory.Inventory, rolevars.RoleVars, error) {
	// Without -i only the control machine exists: enough for playbooks that
	// prepare bundles or work on localhost.
	inv := &inventory.Inventory{Groups: map[string][]string{"all": {}}, Vars: map[string]any{"cluster_name": "localhost"}}
	if file == nil {
		if pb.NeedsCluster {
			return nil, nil, fmt.Errorf("no inventory: playbook %s needs a cluster (its header says inventory: cluster); pass the cluster description with -i cluster.yaml", pb.Name)
		}
		for _, p := range pb.Plays {
			if p.Hosts != inventory.Localhost {
				return nil, nil, fmt.Errorf("no inventory: play %q targets %q; pass -i cluster.yaml, or -i with an Ansible-style inventory (YAML or INI) for a playbook that is not about a cluster", p.Name, p.Hosts)
			}
		}
		return inv, nil, nil
	}
	if r.LoadInventory == nil {
		return nil, nil, errors.New("this kubexm was built without an inventory loader")
	}
	// The cluster file is checked against the matrix of the tree the
	// roles come from, before any task runs (also under --check).
	s, err := SupportForPlaybook(pb)
	if err != nil {
		return nil, nil, err
	}
	if inv, err = r.LoadInventory(file, s); err != nil {
		return nil, nil, err
	}
	var roleVars rolevars.RoleVars
	if inv.Cluster {
		if roleVars, err = s.RoleVars(); err != nil {
			return nil, nil, err
		}
	}
	if pb.NeedsCluster && !inv.Cluster {
		return nil, nil, fmt.Errorf("%s is an Ansible-style inventory, but playbook %s needs a cluster (its header says inventory: cluster): pass a cluster.yaml with -i (kubexm create config writes a sample)", req.Inventory, pb.Name)
	}
	return inv, roleVars, nil
}

// extraVars are the run's -e values, checked, with --backup's file.
func extraVars(pb *engine.Playbook, inv *inventory.Inventory, roleVars rolevars.RoleVars, req Request) (map[string]any, error) {
	extra, err := engine.ParseExtraVars(req.ExtraVars)
	if err != nil {
		return nil, err
	}
	if err := roleVars.CheckExtraVars(extra); err != nil {
		return nil, err
	}
	if err := engine.CheckStartAt(pb, inv, req.StartAt); err != nil {
		return nil, err
	}
	if req.Backup != "" {
		// Absolute: the playbook reads it on the control machine, where a
		// relative path would be taken under the work directory.
		abs, err := filepath.Abs(req.Backup)
		if err != nil {
			return nil, fmt.Errorf("--backup: %w", err)
		}
		if _, ok := extra["backup_file"]; ok {
			return nil, fmt.Errorf("--backup and -e backup_file both name the backup; give one")
		}
		extra["backup_file"] = abs
	}
	return extra, nil
}

// workDirOf is the run's work directory, absolute, so that
// `{{ .work_dir }}` means the same in a command run on localhost as in a
// builtin, whatever directory a task runs in.
func workDirOf(inv *inventory.Inventory, req Request) (string, error) {
	workDir := req.WorkDir
	if workDir == "" {
		name, _ := inv.Vars["cluster_name"].(string)
		workDir = DefaultWorkDir(name, req.Inventory)
	}
	workDir, err := filepath.Abs(workDir)
	if err != nil {
		return "", fmt.Errorf("work dir: %w", err)
	}
	return workDir, nil
}

// bundleLogf prints bundle messages with the run's output; JSON output
// keeps stdout to events, so they go to stderr then.
func bundleLogf(req Request) func(string, ...any) {
	w := req.Stdout
	if req.Output == "json" {
		w = req.Stderr
		if w == nil {
			w = os.Stderr
		}
	}
	return func(format string, args ...any) { fmt.Fprintf(w, format+"\n", args...) }
}

// LoadOptions are the loader's options of a run: where roles and
// overlays come from, and the hooks of the cluster file (nil: none).
func (r Runner) LoadOptions(file *ClusterFile, rolesPath, overlays []string, reg map[string]step.Builtin) engine.LoadOptions {
	return engine.LoadOptions{Builtins: reg, BuiltinFS: r.BuiltinFS, RolesPath: rolesPath, Version: r.Version,
		Overlays: overlays, Hooks: file.hooks()}
}

// hooks are spec.hooks of a cluster file for the loader, which needs them
// before the inventory is loaded. An Ansible-style inventory has none; a
// cluster file that does not decode has its problems reported when the
// inventory is loaded.
func (f *ClusterFile) hooks() []engine.Hook {
	if f == nil || f.decoded == nil {
		return nil
	}
	c := f.decoded.Cluster()
	if c == nil {
		return nil
	}
	var out []engine.Hook
	for i, h := range c.Spec.Hooks {
		file, at := c.HookFile(i)
		out = append(out, engine.Hook{Playbook: h.Playbook, Phase: h.Phase, When: h.When, File: file, From: at.String()})
	}
	return out
}

// DefaultWorkDir is a cluster's work directory when --workdir is not given:
// .kubexm/<cluster name>, or .kubexm/<inventory file name> for an inventory
// that names no cluster.
func DefaultWorkDir(clusterName, inventoryPath string) string {
	if clusterName == "" {
		clusterName = strings.TrimSuffix(filepath.Base(inventoryPath), filepath.Ext(inventoryPath))
	}
	return filepath.Join(".kubexm", clusterName)
}

// firstOf is a list's first element, or "" for none: the host whose lock a
// cluster's run takes first (its first master).
func firstOf(hosts []string) string {
	if len(hosts) == 0 {
		return ""
	}
	return hosts[0]
}

// SetVar passes a verb's flag to the playbook as the variable name; the
// same variable given with -e too is an error rather than a silent choice.
func (r *Request) SetVar(flag, name string, value any) error {
	extra, err := engine.ParseExtraVars(r.ExtraVars)
	if err != nil {
		return err
	}
	if _, ok := extra[name]; ok {
		return fmt.Errorf("--%s and -e %s both set %s; give one", flag, name, name)
	}
	data, err := json.Marshal(map[string]any{name: value})
	if err != nil {
		return err
	}
	r.ExtraVars = append(r.ExtraVars, string(data))
	return nil
}
