package run

import (
	"cmp"
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/mensylisir/kubexm/engine/eval"
	"github.com/mensylisir/kubexm/engine/playbook"
	"github.com/mensylisir/kubexm/internal/suggest"
	"github.com/mensylisir/kubexm/inventory"
)

// Selection is --start-at-task, --tags and --skip-tags worked out on the
// loaded playbook before anything runs, so that what they leave out is
// never evaluated: a task before the start point is pruned before its
// when: or loop is looked at (its variables may come from tasks that did
// not run), and so is a play with no selected task.
type Selection struct {
	// Start is the task --start-at-task names, nil when the playbook does
	// not say where it is (no --start-at-task, or the task may be in a
	// file whose name is only known at run time).
	Start *playbook.Task
	// Path holds start and every block and include that leads to it: these
	// run before the start point, so that the run can get there.
	Path map[*playbook.Task]bool
	// StartPlay is the index in Plays of the play holding start.
	StartPlay int
	// Always holds every task that runs before the start point as tagged
	// always, and the blocks and includes that hold one.
	Always map[*playbook.Task]bool
	// Plays holds the plays with a task that --tags and --skip-tags select.
	Plays map[*playbook.Play]bool
}

// startMatches says whether pattern (a name or a glob) names t.
func startMatches(pattern string, t *playbook.Task) bool {
	for _, name := range playbook.TaskNames(t) {
		if ok, _ := filepath.Match(pattern, name); ok || name == pattern {
			return true
		}
	}
	return false
}

// SelectTasks works out opts' --start-at-task, --tags and --skip-tags on
// pb. A start pattern that names no task is refused, listing the nearest
// task names, unless the task may be in a file known only at run time: an
// include whose templated name the inventory's variables (vars) give a
// value, as a site's own role named in cluster.yaml.
func SelectTasks(pb *playbook.Playbook, vars map[string]any, opts RunOptions) (*Selection, error) {
	sel := &Selection{Plays: map[*playbook.Play]bool{}, Path: map[*playbook.Task]bool{}, Always: map[*playbook.Task]bool{}}
	dynamic := false
	var names []string
	for i, p := range pb.Plays {
		// Without --tags or --skip-tags every play runs, a play of no tasks
		// too; gathering facts is selected as if tagged always, as in
		// Ansible, for the plays after it.
		if len(opts.Tags) == 0 && len(opts.SkipTags) == 0 || p.GatherFacts {
			sel.Plays[p] = true
		}
		for _, sec := range p.Sections() {
			playbook.WalkTasks(sec, nil, func(t *playbook.Task, parents []*playbook.Task) bool {
				if t.Kind == playbook.KindInclude && t.Include.Static == nil && !dynamic {
					dynamic = includeNamed(pb, t, vars)
				}
				if t.Kind == playbook.KindAction || (t.Kind == playbook.KindInclude && t.Include.Static == nil) {
					if playbook.TagsSelected(t.Tags, opts.Tags, opts.SkipTags) {
						sel.Plays[p] = true
					}
				}
				if t.Kind != playbook.KindAction || opts.StartAt == "" || sel.Start != nil {
					return true
				}
				if slices.Contains(t.Tags, "always") && playbook.TagsSelected(t.Tags, opts.Tags, opts.SkipTags) {
					sel.Always[t] = true
					for _, up := range parents {
						sel.Always[up] = true
					}
				}
				if startMatches(opts.StartAt, t) {
					sel.Start, sel.StartPlay = t, i
					sel.Path[t] = true
					for _, up := range parents {
						sel.Path[up] = true
					}
					return true
				}
				ns := playbook.TaskNames(t)
				names = append(names, ns[len(ns)-1])
				return true
			})
		}
	}
	if opts.StartAt != "" && sel.Start == nil && !dynamic {
		return nil, fmt.Errorf("--start-at-task %q names no task of playbook %s%s; `kubexm play %s --list-tasks` lists them",
			opts.StartAt, pb.Name, nearestTasks(opts.StartAt, names), pb.Name)
	}
	return sel, nil
}

// includeNamed says whether a templated include may name something: its
// name renders to a value with the inventory's variables. One that does not
// render (the role a cluster.yaml does not choose) includes nothing.
func includeNamed(pb *playbook.Playbook, t *playbook.Task, vars map[string]any) bool {
	name := cmp.Or(t.Include.Role, t.Include.File)
	ev := pb.Eval
	if ev == nil {
		ev = eval.New()
	}
	got, err := ev.RenderString(name, vars)
	if err != nil {
		// Only a name that needs what the inventory lacks is known to
		// name nothing; any other failure is reported when the run gets
		// there.
		return !strings.Contains(err.Error(), "undefined")
	}
	return strings.TrimSpace(got) != ""
}

// nearestTasks lists the task names closest to pattern, as ": nearest
// are ...", or "" when the playbook has none.
func nearestTasks(pattern string, names []string) string {
	names = slices.Compact(slices.Sorted(slices.Values(names)))
	if len(names) == 0 {
		return ""
	}
	lp := strings.ToLower(pattern)
	dist := func(n string) int {
		ln := strings.ToLower(n)
		d := suggest.Distance(lp, ln)
		// A pattern that is part of a name ("member address") is nearer
		// than its edit distance says.
		if strings.Contains(ln, lp) || strings.Contains(lp, ln) {
			d = min(d, abs(len(ln)-len(lp))/4)
		}
		return d
	}
	slices.SortStableFunc(names, func(a, b string) int { return dist(a) - dist(b) })
	names = names[:min(5, len(names))]
	return fmt.Sprintf(": the nearest are %q", names)
}

func abs(n int) int {
	if n < 0 {
		return -n
	}
	return n
}

// playSelected says whether play i runs at all: it has a task --tags and
// --skip-tags select (or gathers facts), and it is not wholly before the
// start point, or it holds a task tagged always that runs there (or gathers
// facts).
func (r *runner) playSelected(i int, p *playbook.Play) bool {
	sel := r.sel
	if !sel.Plays[p] {
		return false
	}
	if sel.Start == nil || i >= sel.StartPlay || r.hasStarted() || p.GatherFacts {
		return true
	}
	for _, sec := range p.Sections() {
		for _, t := range sec {
			if sel.Always[t] {
				return true
			}
		}
	}
	return false
}

func (r *runner) hasStarted() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.started
}

// beforeStart says whether t is pruned as before the start point: it is not
// the start task, does not lead to it, and holds no task tagged always.
func (r *runner) beforeStart(t *playbook.Task) bool {
	sel := r.sel
	if sel.Start == nil || sel.Path[t] || sel.Always[t] {
		return false
	}
	return !r.hasStarted()
}

// CheckStartAt refuses a --start-at-task that names no task of pb, as Run
// does, for a caller with slow work to do before the run (an offline
// bundle to unpack).
func CheckStartAt(pb *playbook.Playbook, inv *inventory.Inventory, startAt string) error {
	_, err := SelectTasks(pb, inv.Vars, RunOptions{StartAt: startAt})
	return err
}

// leaveOut records what tasks left out by --start-at-task or --tags would
// have registered, as a task whose when: is false does: a skipped result,
// so that a later task reading `result.changed` (restart when the files
// changed) sees that nothing changed rather than an undefined variable. A
// value the host already has is kept.
func (r *runner) leaveOut(ts []*playbook.Task, hosts []*hostState, why string) {
	var regs []string
	playbook.WalkTasks(ts, nil, func(t *playbook.Task, _ []*playbook.Task) bool {
		if t.Kind == playbook.KindAction && t.Register != "" && !slices.Contains(regs, t.Register) {
			regs = append(regs, t.Register)
		}
		return true
	})
	if len(regs) == 0 {
		return
	}
	for _, h := range hosts {
		_, dyn := h.snapshot()
		kv := map[string]any{}
		for _, name := range regs {
			if _, ok := dyn[name]; !ok {
				kv[name] = map[string]any{"changed": false, "failed": false, "skipped": true, "msg": why}
			}
		}
		h.setDyn(kv)
	}
}

// leaveOutPlay is leaveOut for a play that does not run, on its hosts.
func (r *runner) leaveOutPlay(p *playbook.Play, why string) {
	names, _, err := playbook.MatchHosts(r.inv, p.Hosts)
	if err != nil {
		return
	}
	var hosts []*hostState
	for _, n := range names {
		if h, ok := r.hosts[n]; ok {
			hosts = append(hosts, h)
		}
	}
	for _, sec := range p.Sections() {
		r.leaveOut(sec, hosts, why)
	}
}

// leftOutWhy says why a task or play did not run.
func (r *runner) leftOutWhy() string {
	if r.sel.Start != nil && !r.hasStarted() {
		return "before --start-at-task"
	}
	return "left out by --tags or --skip-tags"
}
