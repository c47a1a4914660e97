// Package engine loads kubexm playbooks and runs them against an inventory:
// the loader turns YAML into checked plays and tasks, the executor runs them
// on hosts in parallel, journals every outcome for --resume, and reports
// typed events to an output sink.
//
// This package is the engine's front door and holds no logic of its own: the
// work sits in rooms, each a package, which meet only through the model:
//   - the model: engine/playbook (playbook, play, task, sources, host
//     patterns, the keyword value rules) and engine/model (the events,
//     statuses and recap a run reports);
//   - loading, engine/load: parsing, the keyword tables, includes and roles,
//     hooks, overlays, fork diffs;
//   - running, engine/run: the strategies, task execution, variables and
//     their precedence (the levels and render order in engine/variables),
//     host locks (engine/hostlock), --start-at-task; it reaches the loader
//     only through the load function a dynamic include carries;
//   - the journal, engine/journal: the run's records for --resume, the
//     masking of secrets, and the runs a work directory holds.
//
// TestLayering (module root) keeps the rooms apart.
package engine

import (
	"context"

	"github.com/mensylisir/kubexm/engine/journal"
	"github.com/mensylisir/kubexm/engine/load"
	"github.com/mensylisir/kubexm/engine/model"
	"github.com/mensylisir/kubexm/engine/playbook"
	"github.com/mensylisir/kubexm/engine/run"
	"github.com/mensylisir/kubexm/engine/variables"
	"github.com/mensylisir/kubexm/inventory"
)

// The model, as the engine's callers name it.
type (
	Playbook    = playbook.Playbook
	Play        = playbook.Play
	Task        = playbook.Task
	TaskKind    = playbook.TaskKind
	Pos         = playbook.Pos
	LoadOptions = playbook.LoadOptions
	Hook        = playbook.Hook
	RoleFile    = playbook.RoleFile
	ForkDiff    = load.ForkDiff
	FileDiff    = load.FileDiff
	RunOptions  = run.RunOptions
	RunInfo     = journal.RunInfo
	LogEntry    = journal.LogEntry
)

// What a task does.
const (
	KindAction  = playbook.KindAction
	KindBlock   = playbook.KindBlock
	KindInclude = playbook.KindInclude
	KindMeta    = playbook.KindMeta
)

// ErrFailed is returned by Run when a host failed.
var ErrFailed = run.ErrFailed

// Load reads the playbook ref names (a built-in name, a file or a
// directory), its roles, includes, hooks and overlays, and checks every task.
func Load(ctx context.Context, ref string, opts LoadOptions) (*Playbook, error) {
	return load.Load(ctx, ref, opts)
}

// LoadBytes loads a playbook from data, named name in messages.
func LoadBytes(ctx context.Context, name string, data []byte, opts LoadOptions) (*Playbook, error) {
	return load.LoadBytes(ctx, name, data, opts)
}

// DiffFork compares a fork of the built-in playbooks (kubexm playbook
// export) with the built-ins it came from.
func DiffFork(dir string, opts LoadOptions) (*ForkDiff, error) { return load.DiffFork(dir, opts) }

// Run runs pb on inv and returns the recap.
func Run(ctx context.Context, pb *Playbook, inv *inventory.Inventory, opts RunOptions) (*model.Recap, error) {
	return run.Run(ctx, pb, inv, opts)
}

// CheckStartAt refuses a --start-at-task that names no task of pb, as Run
// does, for a caller with slow work to do before the run (an offline bundle
// to unpack): what it selects is worked out on the model.
func CheckStartAt(pb *Playbook, inv *inventory.Inventory, startAt string) error {
	_, err := playbook.SelectTasks(pb, inv.Vars, playbook.SelectOptions{StartAt: startAt})
	return err
}

// CheckLimit refuses a --limit that is not a host pattern or matches no
// host of inv, as Run does, for a caller that checks its request before
// anything runs (kubexm run command, before it queues a job on a server).
func CheckLimit(inv *inventory.Inventory, limit string) error { return playbook.CheckLimit(inv, limit) }

// ParseExtraVars parses -e arguments (key=value, JSON or YAML, @file).
func ParseExtraVars(args []string) (map[string]any, error) { return variables.ParseExtraVars(args) }

// Runs lists the runs of a work directory, newest first.
func Runs(workDir string) ([]RunInfo, error) { return journal.Runs(workDir) }

// RunLog reads one run of a work directory and its log.
func RunLog(workDir, id string) (RunInfo, []LogEntry, error) { return journal.RunLog(workDir, id) }

// MatchHosts resolves an Ansible host pattern (groups, names, globs,
// subscripts, &intersections and !exclusions, as --limit and a play's
// hosts) to host names in inventory order; unknown lists the parts that
// name neither a host nor a group.
func MatchHosts(inv *inventory.Inventory, pattern string) (hosts, unknown []string, err error) {
	return playbook.MatchHosts(inv, pattern)
}
