package playbook

import (
	"cmp"
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/mensylisir/kubexm/engine/eval"
	"github.com/mensylisir/kubexm/internal/suggest"
)

// What --tags, --skip-tags and --start-at-task select in a playbook, worked
// out on the model before anything runs.

// Selection is --start-at-task, --tags and --skip-tags worked out on the
// loaded playbook before anything runs, so that what they leave out is
// never evaluated: a task before the start point is pruned before its
// when: or loop is looked at (its variables may come from tasks that did
// not run), and so is a play with no selected task.
type Selection struct {
	// Start is the task --start-at-task names, nil when the playbook does
	// not say where it is (no --start-at-task, or the task may be in a
	// file whose name is only known at run time).
	Start *Task
	// Path holds start and every block and include that leads to it: these
	// run before the start point, so that the run can get there.
	Path map[*Task]bool
	// StartPlay is the index in Plays of the play holding start.
	StartPlay int
	// Always holds every task that runs before the start point as tagged
	// always, and the blocks and includes that hold one.
	Always map[*Task]bool
	// Plays holds the plays with a task that --tags and --skip-tags select.
	Plays map[*Play]bool
}

// StartMatches says whether pattern (a name or a glob) names t.
func StartMatches(pattern string, t *Task) bool {
	for _, name := range TaskNames(t) {
		if ok, _ := filepath.Match(pattern, name); ok || name == pattern {
			return true
		}
	}
	return false
}

// SelectOptions are the run's choices a selection reads.
type SelectOptions struct {
	Tags, SkipTags []string
	StartAt        string
}

// SelectTasks works out opts' --start-at-task, --tags and --skip-tags on
// pb. A start pattern that names no task is refused, listing the nearest
// task names, unless the task may be in a file known only at run time: an
// include whose templated name the inventory's variables (vars) give a
// value, as a site's own role named in cluster.yaml.
func SelectTasks(pb *Playbook, vars map[string]any, opts SelectOptions) (*Selection, error) {
	sel := &Selection{Plays: map[*Play]bool{}, Path: map[*Task]bool{}, Always: map[*Task]bool{}}
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
			WalkTasks(sec, nil, func(t *Task, parents []*Task) bool {
				if t.Kind == KindInclude && t.Include.Static == nil && !dynamic {
					dynamic = includeNamed(pb, t, vars)
				}
				if t.Kind == KindAction || (t.Kind == KindInclude && t.Include.Static == nil) {
					if TagsSelected(t.Tags, opts.Tags, opts.SkipTags) {
						sel.Plays[p] = true
					}
				}
				if t.Kind != KindAction || opts.StartAt == "" || sel.Start != nil {
					return true
				}
				if slices.Contains(t.Tags, "always") && TagsSelected(t.Tags, opts.Tags, opts.SkipTags) {
					sel.Always[t] = true
					for _, up := range parents {
						sel.Always[up] = true
					}
				}
				if StartMatches(opts.StartAt, t) {
					sel.Start, sel.StartPlay = t, i
					sel.Path[t] = true
					for _, up := range parents {
						sel.Path[up] = true
					}
					return true
				}
				ns := TaskNames(t)
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
func includeNamed(pb *Playbook, t *Task, vars map[string]any) bool {
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
