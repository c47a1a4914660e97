package load

import (
	"fmt"
	"maps"
	"path"
	"slices"
	"strings"

	"github.com/mensylisir/kubexm/engine/playbook"
	"github.com/mensylisir/kubexm/engine/step"
	"github.com/mensylisir/kubexm/internal/ytree"
)

// taskCtx is what a task list inherits from where it is written.
type taskCtx struct {
	src     playbook.Source // the file holding the tasks
	parent  *playbook.Task  // attributes inherited by the tasks: when, tags, become...
	play    *playbook.Play
	role    *playbook.RoleInstance
	scope   *playbook.Scope
	handler bool
	roles   []string // role names being expanded, for dependency cycles
}

// anyArg, as the name of a builtin's argument, lets the builtin take
// arguments of any name (set_fact: the names are the variables to set).
const anyArg = "*"

var engineActions = map[string]bool{
	"import_tasks": true, "include_tasks": true, "import_role": true, "include_role": true, "meta": true,
}

var metaActions = map[string]bool{"flush_handlers": true, "end_play": true, "end_host": true, "clear_facts": true, "noop": true}

func (ld *loader) taskList(n *ytree.Node, ctx taskCtx, what string) []*playbook.Task {
	if n.IsNull() {
		return nil
	}
	if n.Kind != ytree.List {
		ld.errorf(n.Pos, "%s must be a list of tasks, not %s", what, n.KindName())
		return nil
	}
	var out []*playbook.Task
	for _, tn := range n.List {
		if t := ld.task(tn, ctx); t != nil {
			out = append(out, t)
		}
	}
	return out
}

func (ld *loader) task(n *ytree.Node, ctx taskCtx) *playbook.Task {
	if n.Kind != ytree.Map {
		ld.errorf(n.Pos, "a task must be a mapping such as {name: ..., command: ...}, not %s", n.KindName())
		return nil
	}
	name, _ := n.Get("name").Str()
	t := &playbook.Task{Name: name, Pos: n.Pos, PosText: n.Pos.String(), Role: ctx.role, Scope: ctx.scope, Play: ctx.play, LoopVar: "item", Delay: defaultDelay,
		Key: fmt.Sprintf("%s:%d:%d", ld.stable(ctx.src), n.Pos.Line, n.Pos.Col)}
	actions := ld.actionKeys(n, name, ctx.handler)
	isBlock := n.Get("block") != nil
	if isBlock {
		ld.checkBlockKeys(n, name)
	} else if !ld.oneAction(n, name, actions) {
		return nil
	}
	ld.taskCommon(t, n, ctx)
	child := ctx
	child.parent = t
	if len(t.Vars) > 0 {
		// As in Ansible, vars: on an include or import are include
		// parameters, above set_fact; on a block they are block vars.
		if len(actions) == 1 && actions[0].KeyString() != "meta" && engineActions[actions[0].KeyString()] {
			child.scope = &playbook.Scope{Parent: ctx.scope, Params: t.Vars}
		} else {
			child.scope = &playbook.Scope{Parent: ctx.scope, Vars: t.Vars}
		}
	}
	if isBlock {
		t.Kind = playbook.KindBlock
		if t.Name == "" {
			t.Name = "block"
		}
		t.Block = ld.taskList(n.Get("block"), child, "block")
		t.Rescue = ld.taskList(n.Get("rescue"), child, "rescue")
		t.Always = ld.taskList(n.Get("always"), child, "always")
		t.Vars = nil // moved into the children's scope
		return t
	}
	action := actions[0].KeyString()
	if engineActions[action] {
		return ld.engineTask(t, n, action, n.Get(action), ctx, child)
	}
	return ld.builtinTask(t, n, actions[0])
}

// actionKeys returns a task's keys that are no task keyword: its action,
// or what a misspelt keyword looks like.
func (ld *loader) actionKeys(n *ytree.Node, name string, handler bool) []*ytree.Node {
	var actions []*ytree.Node
	for _, k := range n.Keys {
		ks := k.KeyString()
		if taskKeys[ks] {
			if handlerOnly[ks] && !handler {
				ld.taskErrorf(k.Pos, name, "%s is only valid on handlers", ks)
			}
			continue
		}
		actions = append(actions, k)
	}
	return actions
}

func (ld *loader) checkBlockKeys(n *ytree.Node, name string) {
	for _, k := range n.Keys {
		if ks := k.KeyString(); !blockKeys[ks] {
			hint := playbook.AnsibleHint(ks)
			if hint == "" {
				hint = playbook.DidYouMean(ks, playbook.KeysOf(blockKeys))
			}
			ld.taskErrorf(k.Pos, name, "%q is not valid on a block%s", ks, hint)
		}
	}
}

// oneAction reports whether a task that is no block has exactly one
// action, saying what is wrong when it does not.
func (ld *loader) oneAction(n *ytree.Node, name string, actions []*ytree.Node) bool {
	for _, k := range []string{"rescue", "always"} {
		if kn := n.Get(k); kn != nil {
			ld.taskErrorf(kn.Pos, name, "%s without block", k)
		}
	}
	switch len(actions) {
	case 0:
		ld.taskErrorf(n.Pos, name, "no action: a task needs exactly one builtin (such as command) or block/include")
		return false
	case 1:
		return true
	}
	// A key that is neither a builtin nor an engine keyword is most likely a
	// misspelt task key (regster:): say so, instead of calling it a second
	// action.
	unknown := false
	for _, a := range actions {
		ks := a.KeyString()
		if _, ok := ld.opts.Builtins[ks]; !ok && !engineActions[ks] {
			hint := playbook.AnsibleHint(ks)
			if hint == "" {
				hint = playbook.DidYouMean(ks, append(playbook.KeysOf(taskKeys), playbook.KeysOf(ld.opts.Builtins)...))
			}
			ld.taskErrorf(a.Pos, name, "unknown task key or builtin %q%s", ks, hint)
			unknown = true
		}
	}
	if unknown {
		return false
	}
	var names []string
	for _, a := range actions {
		names = append(names, a.KeyString())
	}
	ld.taskErrorf(actions[1].Pos, name, "several actions (%s): a task runs exactly one; split it into several tasks", strings.Join(names, ", "))
	return false
}

// builtinTask makes t run the builtin its action key names.
func (ld *loader) builtinTask(t *playbook.Task, n, an *ytree.Node) *playbook.Task {
	action := an.KeyString()
	b, ok := ld.opts.Builtins[action]
	if !ok {
		hint := playbook.AnsibleHint(action)
		if hint == "" {
			hint = playbook.DidYouMean(action, append(playbook.KeysOf(ld.opts.Builtins), playbook.KeysOf(taskKeys)...))
		}
		ld.taskErrorf(an.Pos, t.Name, "unknown builtin or keyword %q%s", action, hint)
		return nil
	}
	t.Kind, t.Action, t.Impl, t.Spec = playbook.KindAction, action, b, b.Spec()
	if t.Name == "" {
		t.Name = action
	}
	t.Args = ld.actionArgs(t, n.Get(action), n.Get("args"))
	return t
}

// actionArgs turns the value of a builtin key (a mapping, or a string for a
// free-form builtin) plus `args:` into checked arguments with defaults.
func (ld *loader) actionArgs(t *playbook.Task, val, extra *ytree.Node) map[string]any {
	spec := t.Spec
	args := map[string]any{}
	argPos := map[string]playbook.Pos{}
	add := func(m *ytree.Node) {
		for i, k := range m.Keys {
			args[k.KeyString()] = m.Vals[i].Value()
			argPos[k.KeyString()] = k.Pos
			ld.checkTemplates(m.Vals[i], t.Name)
		}
	}
	switch {
	case val.IsNull():
	case val.Kind == ytree.Map:
		add(val)
	case val.Kind == ytree.Scalar && spec.FreeForm != "":
		ld.checkTemplates(val, t.Name)
		text, isStr := val.Str()
		if !isStr {
			args[spec.FreeForm] = val.Value()
			argPos[spec.FreeForm] = val.Pos
			break
		}
		ff, err := FreeFormArgs(spec, text)
		if err != nil {
			ld.taskErrorf(val.Pos, t.Name, "%s: %v", t.Action, err)
			return args
		}
		for k, v := range ff {
			args[k] = v
			argPos[k] = val.Pos
		}
	default:
		hint := ""
		if len(spec.Args) > 0 {
			hint = fmt.Sprintf("; write its arguments as a mapping, e.g. %s: {%s: ...}", t.Action, spec.Args[0].Name)
		}
		ld.taskErrorf(val.Pos, t.Name, "%s takes a mapping of arguments, not %s%s", t.Action, val.KindName(), hint)
		return args
	}
	if extra != nil {
		if extra.Kind != ytree.Map {
			ld.taskErrorf(extra.Pos, t.Name, "args must be a mapping")
		} else {
			add(extra)
		}
	}
	return ld.checkArgs(t, args, argPos, val)
}

func (ld *loader) checkArgs(t *playbook.Task, args map[string]any, argPos map[string]playbook.Pos, val *ytree.Node) map[string]any {
	spec := t.Spec
	byName := map[string]*step.Arg{}
	var names []string
	for i := range spec.Args {
		a := &spec.Args[i]
		byName[a.Name] = a
		names = append(names, a.Name)
		for _, al := range a.Aliases {
			byName[al] = a
		}
	}
	out := make(map[string]any, len(args))
	for _, v := range slices.Sorted(maps.Keys(args)) {
		a, ok := byName[v]
		p := argPos[v]
		if !ok && byName[anyArg] != nil {
			// A builtin taking any names (set_fact) gets them as they are.
			if !playbook.IdentRe.MatchString(v) {
				ld.taskErrorf(p, t.Name, "%s: %q is not a variable name (letters, digits, _)", t.Action, v)
			}
			out[v] = args[v]
			continue
		}
		if !ok {
			ld.taskErrorf(p, t.Name, "%s has no argument %q%s; it takes %s", t.Action, v, playbook.DidYouMean(v, names), strings.Join(names, ", "))
			continue
		}
		x := args[v]
		if _, dup := out[a.Name]; dup {
			ld.taskErrorf(p, t.Name, "argument %s given twice (through an alias)", a.Name)
		}
		out[a.Name] = x
		if err := playbook.CheckArgType(*a, x); err != nil {
			ld.taskErrorf(p, t.Name, "%s: argument %s: %v", t.Action, a.Name, err)
		}
	}
	for _, a := range spec.Args {
		if _, ok := out[a.Name]; ok || a.Name == anyArg {
			continue
		}
		if a.Default != nil {
			out[a.Name] = a.Default
		} else if a.Required {
			at := t.Pos
			if val != nil {
				at = val.Pos
			}
			ld.taskErrorf(at, t.Name, "%s needs argument %s (%s)", t.Action, a.Name, a.Doc)
		}
	}
	return out
}

// engineTask handles the actions the engine implements itself.
func (ld *loader) engineTask(t *playbook.Task, n *ytree.Node, action string, val *ytree.Node, ctx, child taskCtx) *playbook.Task {
	name := t.Name
	static := action == "import_tasks" || action == "import_role"
	if !static && action != "meta" {
		// A dynamic include's own when is checked once, when it runs; the
		// included tasks inherit only what the include itself inherited.
		inh := *t
		inh.When = ctx.parent.When
		child.parent = &inh
	}
	if static && t.HasLoop {
		ld.taskErrorf(n.Get("loop").Pos, name, "%s is static and cannot loop; use %s", action, strings.Replace(action, "import", "include", 1))
	}
	switch action {
	case "meta":
		return ld.metaTask(t, val)
	case "import_tasks", "include_tasks":
		return ld.tasksInclude(t, action, val, static, child)
	case "import_role", "include_role":
		return ld.roleInclude(t, action, val, static, child)
	}
	return nil
}

func (ld *loader) metaTask(t *playbook.Task, val *ytree.Node) *playbook.Task {
	s, _ := val.Str()
	if !metaActions[s] {
		ld.taskErrorf(val.Pos, t.Name, "meta: unknown action %q%s; one of %s", s, playbook.DidYouMean(s, playbook.KeysOf(metaActions)), strings.Join(playbook.KeysOf(metaActions), ", "))
	}
	t.Kind, t.Action = playbook.KindMeta, s
	if t.Name == "" {
		t.Name = "meta: " + s
	}
	return t
}

// tasksInclude makes t an import_tasks (an implicit block, loaded now) or
// an include_tasks (loaded when it runs, unless its file is no template).
func (ld *loader) tasksInclude(t *playbook.Task, action string, val *ytree.Node, static bool, child taskCtx) *playbook.Task {
	name := t.Name
	file, vars := ld.includeArgs(val, name, "file")
	if file == "" {
		ld.taskErrorf(val.Pos, name, "%s needs a file name", action)
		return nil
	}
	if t.Name == "" {
		t.Name = action + ": " + file
	}
	if len(vars) > 0 {
		child.scope = &playbook.Scope{Parent: child.scope, Params: vars}
	}
	if static {
		if strings.Contains(file, "{{") {
			ld.taskErrorf(val.Pos, name, "import_tasks is static; a templated file name needs include_tasks")
			return nil
		}
		t.Kind, t.Implicit, t.Vars = playbook.KindBlock, true, nil
		t.Block = ld.tasksFile(file, val.Pos, child)
		return t
	}
	t.Kind = playbook.KindInclude
	t.Action = action
	t.Include = &playbook.Include{File: file, Vars: vars, Load: ld.dynamicLoad(func(l *loader, name string) []*playbook.Task {
		return l.tasksFile(name, t.Pos, child)
	})}
	if !strings.Contains(file, "{{") {
		t.Include.Static = ld.tasksFile(file, val.Pos, child)
	}
	return t
}

// roleInclude makes t an import_role (an implicit block) or an
// include_role (preloaded unless the role's name is a template).
func (ld *loader) roleInclude(t *playbook.Task, action string, val *ytree.Node, static bool, child taskCtx) *playbook.Task {
	name := t.Name
	role, vars := ld.includeArgs(val, name, "name")
	tasksFrom := ""
	if val.Kind == ytree.Map {
		tasksFrom, _ = val.Get("tasks_from").Str()
		for _, k := range val.Keys {
			switch k.KeyString() {
			case "name", "tasks_from", "vars":
			default:
				ld.taskErrorf(k.Pos, name, "%s: unknown key %q%s", action, k.KeyString(), playbook.DidYouMean(k.KeyString(), []string{"name", "tasks_from", "vars"}))
			}
		}
	}
	if role == "" {
		ld.taskErrorf(val.Pos, name, "%s needs a role name", action)
		return nil
	}
	if t.Name == "" {
		t.Name = action + ": " + role
	}
	t.Include = &playbook.Include{Role: role, Vars: vars, Load: ld.dynamicLoad(func(l *loader, name string) []*playbook.Task {
		if rt := l.roleBlock(name, tasksFrom, vars, t.Pos, child); rt != nil {
			return []*playbook.Task{rt}
		}
		return nil
	})}
	if static || !strings.Contains(role, "{{") {
		rt := ld.roleBlock(role, tasksFrom, vars, val.Pos, child)
		if rt == nil {
			return nil
		}
		if static {
			t.Kind, t.Implicit, t.Vars, t.Include = playbook.KindBlock, true, nil, nil
			t.Block = []*playbook.Task{rt}
			return t
		}
		t.Include.Static = []*playbook.Task{rt}
	}
	t.Kind, t.Action = playbook.KindInclude, action
	return t
}

// dynamicLoad returns how a dynamic include loads what it names when it
// runs: expand, with a fresh loader of this one's options, the name it
// rendered.
func (ld *loader) dynamicLoad(expand func(l *loader, name string) []*playbook.Task) func(string) ([]*playbook.Task, error) {
	opts, pbDir := ld.opts, ld.pbDir
	return func(name string) ([]*playbook.Task, error) {
		l := newLoader(opts)
		l.pbDir = pbDir
		tasks := expand(l, name)
		if err := l.err(); err != nil {
			return nil, err
		}
		return tasks, nil
	}
}

// includeArgs reads `include_tasks: file.yaml` or `{file: ..., vars: ...}`.
func (ld *loader) includeArgs(val *ytree.Node, task, key string) (string, playbook.VarList) {
	if s, ok := val.Str(); ok {
		ld.checkTemplates(val, task)
		return s, nil
	}
	if val.Kind != ytree.Map {
		ld.taskErrorf(val.Pos, task, "expected a name or a mapping with %s", key)
		return "", nil
	}
	f := val.Get(key)
	ld.checkTemplates(f, task)
	if key == "file" {
		for _, k := range val.Keys {
			if ks := k.KeyString(); ks != "file" && ks != "vars" {
				ld.taskErrorf(k.Pos, task, "unknown key %q; include_tasks takes file and vars", ks)
			}
		}
	}
	s, _ := f.Str()
	return s, ld.varsNode(val.Get("vars"))
}

// tasksFile loads a task file relative to the including file, then the
// role's tasks/ directory, then the playbook directory.
func (ld *loader) tasksFile(file string, at playbook.Pos, ctx taskCtx) []*playbook.Task {
	src, ok := ld.findTasksFile(file, ctx)
	if !ok {
		ld.errorf(at, "task file %q not found beside %s%s", file, ctx.src, roleHint(ctx))
		return nil
	}
	root, ok := ld.readYAML(src)
	if !ok {
		return nil
	}
	if !ld.push(src, at) {
		return nil
	}
	defer ld.pop()
	ctx.src = src
	return ld.taskList(root, ctx, "a task file")
}

func roleHint(ctx taskCtx) string {
	if ctx.role != nil {
		return " nor in role " + ctx.role.Name + "'s tasks/"
	}
	return ""
}

func (ld *loader) findTasksFile(file string, ctx taskCtx) (playbook.Source, bool) {
	dirs := []playbook.Source{ctx.src.Dir()}
	if ctx.role != nil {
		dirs = append(dirs, ctx.role.Dir.Join("tasks"))
	}
	dirs = append(dirs, ld.pbDir)
	for _, d := range dirs {
		if s, ok := d.YAMLFile(file); ok {
			return s, true
		}
	}
	return playbook.Source{}, false
}

// roleRef reads one entry of a play's roles: a name or {role, vars, tags, when}.
func (ld *loader) roleRef(n *ytree.Node, ctx taskCtx) *playbook.Task {
	if s, ok := n.Str(); ok {
		if ld.duplicateRole(s, "", nil) {
			return nil
		}
		return ld.roleBlock(s, "", nil, n.Pos, ctx)
	}
	if n.Kind != ytree.Map {
		ld.errorf(n.Pos, "a role reference is a name or {role: name, vars: ...}, not %s", n.KindName())
		return nil
	}
	rn := n.Get("role")
	if rn == nil {
		rn = n.Get("name")
	}
	name, _ := rn.Str()
	if name == "" {
		ld.errorf(n.Pos, "a role reference needs role: NAME")
		return nil
	}
	holder := &playbook.Task{Pos: n.Pos, Name: "role " + name}
	for _, k := range n.Keys {
		switch ks := k.KeyString(); ks {
		case "role", "name", "vars", "tags", "when", "become", "tasks_from":
		default:
			ld.errorf(k.Pos, "role %s: unknown key %q%s", name, ks, playbook.DidYouMean(ks, []string{"role", "vars", "tags", "when", "become", "tasks_from"}))
		}
	}
	ld.taskCommon(holder, n, ctx)
	sub := ctx
	sub.parent = holder
	tasksFrom, _ := n.Get("tasks_from").Str()
	if ld.duplicateRole(name, tasksFrom, holder.Vars) {
		return nil
	}
	return ld.roleBlock(name, tasksFrom, holder.Vars, n.Pos, sub)
}

// duplicateRole applies Ansible's role deduplication to a play's roles and
// their dependencies: a role runs once per play, unless its
// meta/main.yaml says allow_duplicates: true or it is given other
// parameters (or another tasks_from). when and tags do not make a reference
// different. include_role and import_role always run.
func (ld *loader) duplicateRole(name, tasksFrom string, params playbook.VarList) bool {
	if ld.play == nil {
		return false
	}
	dir, ok := ld.findRole(name)
	if !ok {
		return false // roleBlock reports it
	}
	if f, ok := dir.Join("meta").YAMLFile("main"); ok {
		if n, ok := ld.readYAML(f); ok && n.Kind == ytree.Map {
			if a := n.Get("allow_duplicates"); a != nil && ld.boolField(a, "allow_duplicates") {
				return false
			}
		}
	}
	var key strings.Builder
	key.WriteString(dir.String() + "\x00" + tasksFrom)
	for _, d := range params {
		fmt.Fprintf(&key, "\x00%s=%v", d.Name, d.Val)
	}
	if ld.seenRoles[key.String()] {
		return true
	}
	ld.seenRoles[key.String()] = true
	return false
}

// findRole looks for a role as roleSearchDirs lists the directories.
func (ld *loader) findRole(name string) (playbook.Source, bool) {
	for _, d := range playbook.RoleSearchDirs(ld.pbDir, ld.opts, name) {
		if r := d.Join(name); r.IsDir() {
			return r, true
		}
	}
	return playbook.Source{}, false
}

// roleDeps expands the dependencies of a role's meta/main.yaml.
func (ld *loader) roleDeps(name string, dir playbook.Source, child taskCtx) []*playbook.Task {
	f, ok := dir.Join("meta").YAMLFile("main")
	if !ok {
		return nil
	}
	n, ok := ld.readYAML(f)
	if !ok || n.Kind != ytree.Map {
		return nil
	}
	for _, k := range n.Keys {
		if ks := k.KeyString(); ks != "dependencies" && ks != "galaxy_info" && ks != "description" && ks != "allow_duplicates" && ks != "variables" {
			ld.errorf(k.Pos, "role %s meta: unknown key %q; meta/main.yaml holds description, dependencies, allow_duplicates and variables", name, ks)
		}
	}
	deps := n.Get("dependencies")
	if deps == nil {
		return nil
	}
	if deps.Kind != ytree.List {
		ld.errorf(deps.Pos, "dependencies must be a list of roles")
		return nil
	}
	var out []*playbook.Task
	dctx := child
	dctx.src = f
	for _, d := range deps.List {
		if dt := ld.roleRef(d, dctx); dt != nil {
			out = append(out, dt)
		}
	}
	return out
}

// roleHandlers adds a role's handlers to the play, once per play.
func (ld *loader) roleHandlers(ri *playbook.RoleInstance, dir playbook.Source, child taskCtx, p *playbook.Task) {
	if ld.play == nil || ld.handlerRoles[ri.Name] {
		return
	}
	ld.handlerRoles[ri.Name] = true
	if f, ok := dir.Join("handlers").YAMLFile("main"); ok {
		if n, ok := ld.readYAML(f); ok {
			hctx := child
			hctx.src, hctx.handler = f, true
			hctx.parent = &playbook.Task{Tags: p.Tags, Become: p.Become}
			ld.play.Handlers = append(ld.play.Handlers, ld.taskList(n, hctx, "handlers")...)
		}
	}
}

// roleBlock expands a role reference into an implicit block: its
// dependencies, then its tasks, with the role's variables in scope.
func (ld *loader) roleBlock(name, tasksFrom string, params playbook.VarList, at playbook.Pos, ctx taskCtx) *playbook.Task {
	if slices.Contains(ctx.roles, name) {
		ld.errorf(at, "role %s depends on itself (%s)", name, strings.Join(append(ctx.roles, name), " -> "))
		return nil
	}
	dir, ok := ld.findRole(name)
	if !ok {
		ld.errorf(at, "role %q not found in %s/roles, --roles-path or the built-in roles", name, ld.pbDir)
		return nil
	}
	ri := &playbook.RoleInstance{Name: path.Base(name), Ref: path.Clean(name), Dir: dir}
	ld.roleDirs[ri.Ref] = dir
	sc := &playbook.Scope{Parent: ctx.scope, Role: true}
	for _, l := range []struct {
		sub  string
		into *playbook.VarList
	}{{"defaults", &sc.Defaults}, {"vars", &sc.Vars}} {
		if f, ok := dir.Join(l.sub).YAMLFile("main"); ok {
			if n, ok := ld.readYAML(f); ok {
				*l.into = ld.varsNode(n)
			}
		}
	}
	sc.Params = params
	t := &playbook.Task{Kind: playbook.KindBlock, Implicit: true, Name: "role " + ri.Name, Pos: at, Role: ri, Scope: sc, Play: ctx.play}
	p := ctx.parent
	inherit(t, p)
	child := ctx
	child.parent, child.role, child.scope = t, ri, sc
	child.roles = append(slices.Clone(ctx.roles), name)
	// A role's dependencies run with its main tasks; tasks_from picks one
	// file of an already set up role.
	if tasksFrom == "" {
		t.Block = ld.roleDeps(name, dir, child)
	}
	file := "main"
	if tasksFrom != "" {
		file = tasksFrom
	}
	if f, ok := dir.Join("tasks").YAMLFile(file); ok {
		if n, ok := ld.readYAML(f); ok && ld.push(f, at) {
			child.src = f
			t.Block = append(t.Block, ld.taskList(n, child, "tasks")...)
			ld.pop()
		}
	} else if tasksFrom != "" {
		ld.errorf(at, "role %s has no tasks/%s.yaml", name, tasksFrom)
	}
	ld.roleHandlers(ri, dir, child, p)
	return t
}
