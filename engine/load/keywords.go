package load

import (
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/mensylisir/kubexm/engine/playbook"
	"github.com/mensylisir/kubexm/engine/step"
	"github.com/mensylisir/kubexm/internal/ytree"
)

// keyword is a task keyword, declared once as ansible-core declares its
// field attributes: where it is valid, what a task inherits from its parent
// (a block, a role, the play) and how the task's own key is read. The table's
// order is the order keys are read, so errors come out in that order.
type keyword struct {
	name string
	// onBlock: also valid on a block. onPlay: also valid on a play, where it
	// sets what every task of the play inherits.
	onBlock, onPlay bool
	// handlerOnly: valid on a handler only.
	handlerOnly bool
	// inherit gives the task its parent's value before its own key is read;
	// nil for a keyword a task does not inherit.
	inherit func(t, parent *playbook.Task)
	// parse reads the task's own key; nil for a key the loader reads
	// itself (name, args, the block lists).
	parse func(ld *loader, t *playbook.Task, v *ytree.Node)
}

var taskKeywords = []keyword{
	{name: "name", onBlock: true},
	{name: "when", onBlock: true,
		inherit: func(t, p *playbook.Task) { t.When = slices.Clone(p.When) },
		parse:   func(ld *loader, t *playbook.Task, v *ytree.Node) { t.When = append(t.When, ld.conds(v, t.Name)...) }},
	{name: "tags", onBlock: true,
		inherit: func(t, p *playbook.Task) { t.Tags = p.Tags },
		parse:   func(ld *loader, t *playbook.Task, v *ytree.Node) { t.Tags = mergeTags(t.Tags, ld.tags(v)) }},
	{name: "become", onBlock: true,
		inherit: func(t, p *playbook.Task) { t.Become = p.Become },
		parse:   func(ld *loader, t *playbook.Task, v *ytree.Node) { t.Become = ld.boolField(v, "become") }},
	{name: "no_log", onBlock: true, onPlay: true,
		inherit: func(t, p *playbook.Task) { t.NoLog = p.NoLog },
		parse:   func(ld *loader, t *playbook.Task, v *ytree.Node) { t.NoLog = ld.boolField(v, "no_log") }},
	{name: "check_mode", onBlock: true, onPlay: true,
		inherit: func(t, p *playbook.Task) { t.CheckMode = p.CheckMode },
		parse: func(ld *loader, t *playbook.Task, v *ytree.Node) {
			b := ld.boolField(v, "check_mode")
			t.CheckMode = &b
		}},
	{name: "ignore_errors", onBlock: true, onPlay: true,
		inherit: func(t, p *playbook.Task) { t.IgnoreErrs = p.IgnoreErrs },
		parse:   func(ld *loader, t *playbook.Task, v *ytree.Node) { t.IgnoreErrs = ld.boolField(v, "ignore_errors") }},
	{name: "run_once", onBlock: true,
		inherit: func(t, p *playbook.Task) { t.RunOnce = p.RunOnce },
		parse:   func(ld *loader, t *playbook.Task, v *ytree.Node) { t.RunOnce = ld.boolField(v, "run_once") }},
	{name: "delegate_to", onBlock: true,
		inherit: func(t, p *playbook.Task) { t.DelegateTo = p.DelegateTo },
		parse:   (*loader).delegateTo},
	{name: "timeout", onBlock: true,
		inherit: func(t, p *playbook.Task) { t.Timeout = p.Timeout },
		parse:   func(ld *loader, t *playbook.Task, v *ytree.Node) { t.Timeout = ld.duration(t, v, "timeout") }},
	{name: "environment", onBlock: true, onPlay: true,
		inherit: func(t, p *playbook.Task) { t.Environment = maps.Clone(p.Environment) },
		parse:   (*loader).environment},
	{name: "vars", onBlock: true,
		parse: func(ld *loader, t *playbook.Task, v *ytree.Node) { t.Vars = ld.varsNode(v) }},
	{name: "register", parse: (*loader).register},
	{name: "changed_when",
		parse: func(ld *loader, t *playbook.Task, v *ytree.Node) { t.ChangedWhen = ld.conds(v, t.Name) }},
	{name: "failed_when",
		parse: func(ld *loader, t *playbook.Task, v *ytree.Node) { t.FailedWhen = ld.conds(v, t.Name) }},
	{name: "until", parse: (*loader).until},
	{name: "retries", parse: (*loader).retries},
	{name: "delay",
		parse: func(ld *loader, t *playbook.Task, v *ytree.Node) { t.Delay = ld.duration(t, v, "delay") }},
	{name: "loop", parse: (*loader).loop},
	{name: "loop_control", parse: (*loader).loopControl},
	{name: "notify",
		parse: func(ld *loader, t *playbook.Task, v *ytree.Node) { t.Notify = exprs(ld.stringList(v, "notify")) }},
	{name: "listen", handlerOnly: true,
		parse: func(ld *loader, t *playbook.Task, v *ytree.Node) { t.Listen = exprs(ld.stringList(v, "listen")) }},
	{name: "args"},
	{name: "block", onBlock: true},
	{name: "rescue", onBlock: true},
	{name: "always", onBlock: true},
}

// taskKeys, blockKeys and handlerOnly name the keys valid on a task, on a
// block and on a handler only.
var taskKeys, blockKeys, handlerOnly = keywordSets()

func keywordSets() (task, block, handler map[string]bool) {
	task, block, handler = map[string]bool{}, map[string]bool{}, map[string]bool{}
	for _, kw := range taskKeywords {
		task[kw.name] = true
		if kw.onBlock {
			block[kw.name] = true
		}
		if kw.handlerOnly {
			handler[kw.name] = true
		}
	}
	return task, block, handler
}

// taskCommon reads the keywords every task kind shares and applies what the
// task inherits from its parent.
func (ld *loader) taskCommon(t *playbook.Task, n *ytree.Node, ctx taskCtx) {
	inherit(t, ctx.parent)
	for _, kw := range taskKeywords {
		if v := n.Get(kw.name); v != nil && kw.parse != nil {
			kw.parse(ld, t, v)
		}
	}
}

// inherit gives t what a task inherits from its parent.
func inherit(t, parent *playbook.Task) {
	for _, kw := range taskKeywords {
		if kw.inherit != nil {
			kw.inherit(t, parent)
		}
	}
}

// playDefaults reads the task keywords written on a play into base, what
// every task of the play inherits.
func (ld *loader) playDefaults(base *playbook.Task, pn *ytree.Node) {
	for _, kw := range taskKeywords {
		if v := pn.Get(kw.name); v != nil && kw.onPlay && kw.parse != nil {
			kw.parse(ld, base, v)
		}
	}
}

func exprs(cs []playbook.Cond) []string {
	var out []string
	for _, c := range cs {
		out = append(out, c.Expr)
	}
	return out
}

func (ld *loader) delegateTo(t *playbook.Task, d *ytree.Node) {
	s, ok := d.Str()
	if !ok || s == "" {
		ld.taskErrorf(d.Pos, t.Name, "delegate_to needs a host name")
	}
	ld.checkTemplates(d, t.Name)
	t.DelegateTo = s
}

func (ld *loader) duration(t *playbook.Task, d *ytree.Node, key string) time.Duration {
	dur, err := step.ToDuration(d.Value())
	if err != nil || dur < 0 {
		ld.taskErrorf(d.Pos, t.Name, "%s: %v", key, err)
	}
	return dur
}

func (ld *loader) environment(t *playbook.Task, e *ytree.Node) {
	if e.Kind != ytree.Map {
		ld.taskErrorf(e.Pos, t.Name, "environment must be a mapping of variable names to values")
		return
	}
	if t.Environment == nil {
		t.Environment = map[string]any{}
	}
	maps.Copy(t.Environment, e.Value().(map[string]any))
	ld.checkTemplates(e, t.Name)
}

func (ld *loader) register(t *playbook.Task, r *ytree.Node) {
	s, _ := r.Str()
	if !playbook.IdentRe.MatchString(s) {
		ld.taskErrorf(r.Pos, t.Name, "register needs a variable name (letters, digits, _), got %q", scalarString(r))
	}
	t.Register = s
}

// until joins several conditions into one; a task with until and no
// retries of its own retries 3 times, as in Ansible.
func (ld *loader) until(t *playbook.Task, u *ytree.Node) {
	cs := ld.conds(u, t.Name)
	if len(cs) == 0 {
		return
	}
	c := cs[0]
	if len(cs) > 1 {
		var parts []string
		for _, x := range cs {
			parts = append(parts, "("+x.Expr+")")
		}
		c.Expr = strings.Join(parts, " and ")
	}
	t.Until = &c
	t.Retries = defaultRetries
}

func (ld *loader) retries(t *playbook.Task, r *ytree.Node) {
	v, err := step.ToInt(r.Value())
	if err != nil || v < 0 {
		ld.taskErrorf(r.Pos, t.Name, "retries must be a whole number ≥ 0")
	}
	t.Retries = v
}

func (ld *loader) loop(t *playbook.Task, l *ytree.Node) {
	t.HasLoop = true
	t.Loop = l.Value()
	switch l.Kind {
	case ytree.List:
		ld.checkTemplates(l, t.Name)
	case ytree.Scalar:
		s, ok := l.Str()
		if !ok || !strings.Contains(s, "{{") {
			ld.taskErrorf(l.Pos, t.Name, "loop needs a list, or a template giving one such as \"{{ .groups.etcd }}\"")
		}
		ld.checkTemplates(l, t.Name)
	default:
		ld.taskErrorf(l.Pos, t.Name, "loop needs a list, not %s", l.KindName())
	}
}

func (ld *loader) loopControl(t *playbook.Task, lc *ytree.Node) {
	name := t.Name
	if lc.Kind != ytree.Map {
		ld.taskErrorf(lc.Pos, name, "loop_control must be a mapping")
	} else {
		for i, k := range lc.Keys {
			v, _ := lc.Vals[i].Str()
			switch k.KeyString() {
			case "loop_var":
				if !playbook.IdentRe.MatchString(v) {
					ld.taskErrorf(lc.Vals[i].Pos, name, "loop_var needs a variable name")
				}
				t.LoopVar = v
			case "index_var":
				if !playbook.IdentRe.MatchString(v) {
					ld.taskErrorf(lc.Vals[i].Pos, name, "index_var needs a variable name")
				}
				t.IndexVar = v
			case "label":
				t.Label = v
				ld.checkTemplates(lc.Vals[i], name)
			default:
				ld.taskErrorf(k.Pos, name, "unknown loop_control key %q%s", k.KeyString(), playbook.DidYouMean(k.KeyString(), []string{"loop_var", "index_var", "label"}))
			}
		}
	}
	if !t.HasLoop {
		ld.taskErrorf(lc.Pos, name, "loop_control without loop")
	}
}

// playKeyword is a keyword of a play. The table's order is the order keys
// are read.
type playKeyword struct {
	name string
	// parse reads the key; nil for a key parsePlay reads itself.
	parse func(ld *loader, p *playbook.Play, v *ytree.Node)
}

var playKeywords = []playKeyword{
	{name: "name"}, {name: "hosts"}, {name: "vars"}, {name: "vars_files"},
	{name: "tags", parse: func(ld *loader, p *playbook.Play, v *ytree.Node) { p.Tags = ld.tags(v) }},
	{name: "phase", parse: (*loader).phase},
	{name: "when", parse: func(ld *loader, p *playbook.Play, v *ytree.Node) { p.When = ld.conds(v, "") }},
	{name: "become", parse: func(ld *loader, p *playbook.Play, v *ytree.Node) { p.Become = ld.boolField(v, "become") }},
	{name: "any_errors_fatal", parse: func(ld *loader, p *playbook.Play, v *ytree.Node) {
		p.AnyErrorsFatal = ld.boolField(v, "any_errors_fatal")
	}},
	{name: "force_handlers", parse: func(ld *loader, p *playbook.Play, v *ytree.Node) { p.ForceHandlers = ld.boolField(v, "force_handlers") }},
	{name: "connection", parse: (*loader).connection},
	{name: "gather_facts", parse: (*loader).gatherFacts},
	{name: "strategy", parse: (*loader).strategy},
	{name: "max_fail_percentage", parse: (*loader).maxFailPercentage},
	{name: "serial", parse: (*loader).serial},
	{name: "pre_tasks"}, {name: "roles"}, {name: "tasks"}, {name: "post_tasks"}, {name: "handlers"},
}

// playKeys names the keys valid on a play: its own and the task keywords
// its tasks inherit from it.
func playKeys() map[string]bool {
	keys := map[string]bool{}
	for _, kw := range playKeywords {
		keys[kw.name] = true
	}
	for _, kw := range taskKeywords {
		if kw.onPlay {
			keys[kw.name] = true
		}
	}
	return keys
}

func (ld *loader) phase(p *playbook.Play, ph *ytree.Node) {
	p.Phase = scalarString(ph)
	if !phaseRe.MatchString(p.Phase) {
		ld.errorf(ph.Pos, "phase %q is not a phase name (lowercase letters, digits, - and _), such as os or control-plane", p.Phase)
	}
}

func (ld *loader) connection(p *playbook.Play, c *ytree.Node) {
	switch p.Connection = scalarString(c); p.Connection {
	case "local", "ssh":
	default:
		ld.errorf(c.Pos, "connection must be local (run on the control machine) or ssh, not %q; the inventory says how each host is reached otherwise", p.Connection)
	}
}

func (ld *loader) gatherFacts(p *playbook.Play, g *ytree.Node) {
	p.GatherFacts = ld.boolField(g, "gather_facts")
	if p.GatherFacts && ld.opts.Builtins["setup"] == nil {
		ld.errorf(g.Pos, "gather_facts needs the setup builtin, and none is registered")
	}
}

func (ld *loader) strategy(p *playbook.Play, s *ytree.Node) {
	v, _ := s.Str()
	// A template is rendered when the play starts, with its variables.
	if !ld.checkTemplates(s, "") {
		if err := playbook.CheckStrategy(v); err != nil {
			ld.errorf(s.Pos, "%v", err)
		}
	}
	p.Strategy = v
}

func (ld *loader) maxFailPercentage(p *playbook.Play, m *ytree.Node) {
	f, err := playbook.Percent(m.Value())
	if err != nil {
		ld.errorf(m.Pos, "max_fail_percentage: %v", err)
	}
	p.MaxFailPercentage = f
}

func (ld *loader) serial(p *playbook.Play, s *ytree.Node) {
	vals := []*ytree.Node{s}
	if s.Kind == ytree.List {
		vals = s.List
	}
	for _, v := range vals {
		// A template is rendered when the play starts (serialSizes).
		if t, ok := v.Value().(string); ok && strings.Contains(t, "{{") {
			p.Serial = append(p.Serial, t)
			continue
		}
		if _, err := playbook.BatchSize(v.Value(), 100); err != nil {
			ld.errorf(v.Pos, "serial: %v", err)
			continue
		}
		p.Serial = append(p.Serial, v.Value())
	}
}

// Between retries 5s, and 3 retries of an until, as in Ansible.
const (
	defaultDelay   = 5e9
	defaultRetries = 3
)

func mergeTags(parent, own []string) []string {
	if len(own) == 0 {
		return parent
	}
	out := slices.Clone(parent)
	for _, t := range own {
		if !slices.Contains(out, t) {
			out = append(out, t)
		}
	}
	return out
}
