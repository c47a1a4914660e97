// Package step is the contract between the engine and the builtin step types.
// A builtin declares its arguments in a Spec (so the engine can check a task
// at load time and `kubexm doc builtins` can document it) and runs against an
// Env the engine prepares for one host.
package step

import (
	"context"

	"github.com/mensylisir/kubexm/engine/transport"
)

// Type is the type of an argument value after templating.
type Type string

const (
	String   Type = "string"
	Int      Type = "int"
	Bool     Type = "bool"
	List     Type = "list" // a list of any values
	Map      Type = "map"  // string keys
	Any      Type = "any"
	Mode     Type = "mode"     // file mode: "0644" or 420
	Duration Type = "duration" // "30s", "5m", or a number of seconds
)

// Arg documents and constrains one argument.
type Arg struct {
	Name     string
	Type     Type
	Required bool
	Default  any
	Choices  []string // allowed values for a string argument
	Aliases  []string
	Doc      string
}

// Spec is what a builtin says about itself.
type Spec struct {
	Name    string
	Summary string // one line
	Doc     string // markdown, may be several paragraphs
	Args    []Arg
	// FreeForm names the argument that takes the task's value when it is a
	// plain string instead of a map (`command: ls -l` sets FreeForm="cmd").
	FreeForm string
	// Control builtins run on the control machine once per host (download,
	// gen_cert): Env.Target is still the task's host, for facts and messages.
	Control bool
	// ControlProduct builtins run on the host but write on the control
	// machine (fetch, sync_dir's pull): like Control ones, they run again
	// when a run is resumed with RunOptions.ResumeRerunsControl, whose work
	// directory may not hold what they wrote.
	ControlProduct bool
	// Report says the result's message is what the user asked to see
	// (debug): it is shown at the default verbosity.
	Report bool
	// Examples are YAML task snippets for the docs.
	Examples []string
}

// Builtin is one step type.
type Builtin interface {
	Spec() Spec
	// Run does the work for one host. It returns an error only for a failure
	// (the task fails on this host); expected outcomes such as "nothing to do"
	// are Results. In check mode (env.Check) it changes nothing and reports
	// what it would change.
	Run(ctx context.Context, env *Env, args Args) (Result, error)
}

// Env is everything a builtin may use for one host and one task.
type Env struct {
	Host    string              // inventory name of the host
	Target  transport.Transport // the host the task acts on (after delegate_to)
	Control transport.Transport // the control machine
	Check   bool
	Diff    bool
	Become  bool
	// Environment holds the task's `environment:` variables; every process a
	// builtin starts on the target gets them (proxies, KUBECONFIG, ...).
	Environment map[string]string
	// Vars are all variables visible to the task on this host (read only).
	Vars map[string]any
	// Render expands {{ }} in text against vars; Eval evaluates an expression.
	Render func(text string, vars map[string]any) (string, error)
	Eval   func(expr string, vars map[string]any) (any, error)
	// FindFile resolves a relative name of kind "files" or "templates" against
	// the current role, then the playbook directory, and returns a path on the
	// control machine.
	FindFile func(kind, name string) (string, error)
	// RenderTemplate renders text, the template FindFile found for a
	// relative name under templates/, with the named blocks the overlays
	// replace ({{ define "name" }} files of an overlay); nil where nothing
	// can be overlaid.
	RenderTemplate func(name, text string, vars map[string]any) (string, error)
	// WorkDir is the cluster's work directory on the control machine
	// (.kubexm/<cluster>).
	WorkDir string
	// Logf prints verbose progress (shown with -v).
	Logf func(format string, args ...any)
	// Verbosity is the run's -v count (debug's verbosity argument).
	Verbosity int
}

// Result is the outcome on one host. The engine registers it as a map with
// the keys changed, failed, skipped, msg, diff, plus everything in Data.
type Result struct {
	Changed bool
	Failed  bool // the builtin decided the task failed (assert, fail, rc != 0)
	Skipped bool
	Msg     string
	Diff    string // unified diff, shown with --diff
	// Data holds builtin-specific results, e.g. rc, stdout, stderr for command.
	Data map[string]any
	// Facts are variables to set on the host for the rest of the run
	// (set_fact, setup).
	Facts map[string]any
}

// BatchItem is one loop item handed to a Batcher: its own Env (the item's
// variables) and rendered arguments. Every item of a batch has the same
// Target.
type BatchItem struct {
	Env  *Env
	Args Args
}

// Batcher is implemented by builtins whose loop items can share round trips
// to the host: a 10-item `file` loop reads the 10 paths' metadata in one
// command instead of ten. The engine calls RunBatch instead of Run for a
// looped task's items on one host when the task has no until, timeout or
// delegate_to (those are per item), and only when more than one item runs.
// RunBatch must have the effect and results of calling Run on each item in
// order: an item that changes the host must not leave a later item acting on
// stale knowledge. It returns one Result and one error per item, in order.
type Batcher interface {
	RunBatch(ctx context.Context, items []BatchItem) ([]Result, []error)
}
