package run

import (
	"slices"

	"github.com/mensylisir/kubexm/engine/playbook"
)

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
