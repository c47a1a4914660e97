// Package playbook is the engine's model of a loaded playbook: its plays,
// tasks, variables as written, the files it was read from (source) and the
// options it was loaded with, and what both the loader and the run ask of
// it (host patterns, tag selection, role lookups, the keyword value rules).
// It imports no other room of the engine: engine/load builds it, engine/run
// runs it, and a dynamic include reaches the loader only through the load
// function the loader left on it (Include.Load).
package playbook

import (
	"slices"
	"time"

	"github.com/mensylisir/kubexm/engine/eval"

	"github.com/mensylisir/kubexm/engine/step"
)

// Playbook is a loaded, checked playbook.
type Playbook struct {
	Name    string
	Version string
	// Requires maps a program name ("kubexm") to a semver constraint.
	Requires map[string]string
	// NeedsCluster is set by the header's `inventory: cluster`: the playbook
	// reads the cluster's variables, so its inventory must be a
	// cluster.yaml, not an Ansible-style host list.
	NeedsCluster bool
	// Path is where the playbook file was found, for messages.
	Path  string
	Plays []*Play
	// Hash identifies the content of every file the playbook was built from;
	// a resume journal is tied to it.
	Hash string

	Src     Source
	Options LoadOptions
	// Overlays are the directories searched first for a role's templates
	// and files, highest precedence first.
	Overlays []Source
	// ev is shared by the loader and every run, so templates and
	// expressions compile once.
	Eval *eval.Evaluator
	// RoleDirs are the directories of the roles the playbook uses, by
	// reference (cni/flannel).
	RoleDirs map[string]Source
}

// Play maps a host pattern to an ordered list of tasks.
type Play struct {
	Name  string
	Pos   Pos
	Hosts string
	Vars  VarList
	// Defaults are the playbook header's defaults_files: shared defaults
	// below every role's own, the lowest level a playbook can set.
	Defaults       VarList
	PreTasks       []*Task
	Roles          []*Task // one implicit block per role reference
	Tasks          []*Task
	PostTasks      []*Task
	Handlers       []*Task
	Serial         []any // batch sizes: numbers or "N%" strings
	Strategy       string
	AnyErrorsFatal bool
	ForceHandlers  bool
	// Connection "local" runs the play's hosts on the control machine, as
	// Ansible's connection: local; "" or "ssh" reach them as the inventory
	// says.
	Connection        string
	MaxFailPercentage float64 // < 0: not set
	GatherFacts       bool
	Tags              []string
	When              []Cond
	Become            bool
	// Phase names the part of the playbook the play belongs to (os,
	// network, ...), which hook playbooks run before and after.
	Phase string
	// Hook is "before-<phase>" or "after-<phase>" for a play of a hook
	// playbook, "" otherwise.
	Hook string

	Index int
	Src   Source
}

// Sections returns the play's task lists in the order they run, each followed
// by a handler flush.
func (p *Play) Sections() [][]*Task {
	main := append(append([]*Task{}, p.Roles...), p.Tasks...)
	return [][]*Task{p.PreTasks, main, p.PostTasks}
}

// TaskKind says what a task does.
type TaskKind int

const (
	// KindAction runs a builtin.
	KindAction TaskKind = iota
	// KindBlock runs Block, then Rescue on failure, then Always.
	KindBlock
	// KindInclude loads tasks (include_tasks, include_role) when it runs.
	KindInclude
	// KindMeta is a meta: action the engine implements (flush_handlers, ...).
	KindMeta
)

// Task is one entry of a task list.
type Task struct {
	Name   string
	Pos    Pos
	Kind   TaskKind
	Action string // builtin name, or the meta action
	Args   map[string]any

	When        []Cond // own and inherited conditions, all must hold
	Loop        any
	HasLoop     bool
	LoopVar     string
	IndexVar    string
	Label       string
	Register    string
	ChangedWhen []Cond
	FailedWhen  []Cond
	IgnoreErrs  bool
	Retries     int
	Delay       time.Duration
	Until       *Cond
	RunOnce     bool
	DelegateTo  string
	Notify      []string
	Tags        []string // own and inherited
	Vars        VarList
	Environment map[string]any
	Become      bool
	Timeout     time.Duration
	NoLog       bool
	// CheckMode, when set, overrides --check for this task: false runs a
	// read-only probe for real in a dry run, true never changes anything.
	CheckMode *bool
	Listen    []string

	Block, Rescue, Always []*Task
	// Implicit blocks come from roles and imports; they have no name of their
	// own and are not listed.
	Implicit bool

	Include *Include

	Role    *RoleInstance
	PosText string // Pos.String(), computed once
	Key     string // file:line:col with the file named independently of the working directory
	Scope   *Scope
	Spec    step.Spec
	Impl    step.Builtin
	Play    *Play
}

// Where returns file:line:col of the task.
func (t *Task) Where() string {
	if t.PosText == "" {
		return t.Pos.String()
	}
	return t.PosText
}

// RoleName returns the name of the role the task belongs to, or "".
func (t *Task) RoleName() string {
	if t.Role == nil {
		return ""
	}
	return t.Role.Name
}

// Cond is an expression with where it was written.
type Cond struct {
	Expr string
	Pos  Pos
}

// VarDef is one variable assignment in file order.
type VarDef struct {
	Name     string
	Val      any
	Pos      Pos
	Template bool // the value holds {{ }} somewhere
	// Inventory: set by the inventory (group_vars, host vars...). Its
	// template may read a variable only some plays have (a playbook's
	// shared defaults); where that is missing it is left out, not an error.
	Inventory bool
	Refs      []string // the names its templates may read (.name), for rendering order
}

type VarList []VarDef

// Scope is a level of variables: a role (defaults, vars, params), a block
// (vars) or an include_tasks (params). Each kind of list sits at its own
// Ansible precedence level; see (*playRun).vars.
type Scope struct {
	Parent   *Scope
	Role     bool
	Defaults VarList // role defaults/main.yaml
	Vars     VarList // role vars/main.yaml, or block vars
	Params   VarList // role parameters, or include_tasks/import_tasks vars
}

// Include is a dynamic include_tasks or include_role.
type Include struct {
	File   string // include_tasks: file, may be templated
	Role   string // include_role: role name
	Vars   VarList
	Static []*Task // preloaded when the reference has no template
	// Load loads the file or role the include names once it is rendered,
	// where the include was written: the run reaches the loader through
	// it alone.
	Load func(name string) ([]*Task, error)
}

type RoleInstance struct {
	Name string
	// Ref is the role's path under its roles directory (kubernetes/node),
	// where an overlay keeps its files.
	Ref string
	Dir Source
}

// Phases returns the phase names of the playbook in the order they run.
func (pb *Playbook) Phases() []string {
	var out []string
	for _, p := range pb.Plays {
		if p.Phase != "" && !slices.Contains(out, p.Phase) {
			out = append(out, p.Phase)
		}
	}
	return out
}

// OverlayFile returns the highest-precedence overlay of a role's
// kind/name file, and for a template, the overlay files of blocks above it
// (lowest precedence first), which replace named blocks of the template
// found (that overlay's, else the role's own): see TemplateOverlay.
func (pb *Playbook) OverlayFile(role *RoleInstance, kind, name string) (file Source, blocks []Source, ok bool) {
	for _, o := range pb.Overlays {
		c := o.Join("roles").Join(role.Ref).Join(kind).Join(name)
		if !c.IsFile() {
			continue
		}
		if kind == "templates" && IsBlocksFile(c) {
			blocks = append([]Source{c}, blocks...)
			continue
		}
		return c, blocks, true
	}
	return Source{}, blocks, false
}

// IsBlocksFile says whether an overlay template holds only
// {{ define "name" }} blocks: it replaces those blocks of the role's
// template instead of the whole file. A file that cannot be read or parsed
// is not one (it fails where it is used).
func IsBlocksFile(s Source) bool {
	data, err := s.Read()
	if err != nil {
		return false
	}
	_, only, err := eval.TemplateBlocks(string(data))
	return err == nil && only
}

// Batchable says whether a looped task's items may go to its builtin's
// RunBatch: until, timeout and delegate_to are decided per item.
func (t *Task) Batchable() (step.Batcher, bool) {
	b, ok := t.Impl.(step.Batcher)
	if !ok || t.Until != nil || t.Timeout > 0 || t.DelegateTo != "" {
		return nil, false
	}
	return b, true
}

// WalkTasks calls visit for every task of ts in the order they run (a
// block's own tasks, then its rescue, then its always; an include's tasks
// when the include names a file or role without a template), with the
// tasks that hold it. visit returns false to stop the walk; walkTasks then
// returns false too.
func WalkTasks(ts []*Task, parents []*Task, visit func(t *Task, parents []*Task) bool) bool {
	for _, t := range ts {
		if !visit(t, parents) {
			return false
		}
		inner := append(slices.Clone(parents), t)
		for _, sub := range [][]*Task{t.Block, t.Rescue, t.Always} {
			if !WalkTasks(sub, inner, visit) {
				return false
			}
		}
		if t.Include != nil && !WalkTasks(t.Include.Static, inner, visit) {
			return false
		}
	}
	return true
}

// TaskNames are the names --start-at-task matches a task by: its own, and
// for a role's task "role : name", as --list-tasks prints it.
func TaskNames(t *Task) []string {
	names := []string{t.Name}
	if role := t.RoleName(); role != "" {
		names = append(names, role+" : "+t.Name)
	}
	return names
}

// TagsSelected says whether a task with tags runs under --tags only and
// --skip-tags skip. "always" runs unless skipped by name, "never" only when
// asked for; "tagged", "untagged" and "all" work as in Ansible.
func TagsSelected(tags, only, skip []string) bool {
	has := func(t string) bool { return slices.Contains(tags, t) }
	for _, s := range skip {
		if has(s) || (s == "tagged" && len(tags) > 0) || (s == "untagged" && len(tags) == 0) {
			return false
		}
	}
	if has("never") {
		for _, t := range only {
			if has(t) {
				return true
			}
		}
		return false
	}
	if len(only) == 0 || has("always") {
		return true
	}
	for _, t := range only {
		switch {
		case t == "all", t == "tagged" && len(tags) > 0, t == "untagged" && len(tags) == 0, has(t):
			return true
		}
	}
	return false
}
