package engine

import (
	"context"
	"fmt"
	"maps"
	"strconv"
	"strings"
)

// includeInstance is one file (or role) a dynamic include resolved to, with
// the hosts that include it and their loop variables.
type includeInstance struct {
	name    string
	hosts   []*hostState
	perHost map[*hostState]map[string]any
}

// runInclude evaluates include_tasks/include_role per host (when, loop, the
// templated name), then runs each resulting task list on its hosts.
func (pr *playRun) runInclude(ctx context.Context, t *Task, hosts []*hostState, ov *overlay) []*hostState {
	r := pr.r
	inc := t.Include
	var insts []*includeInstance
	byKey := map[string]*includeInstance{}
	var failed []*hostState
	// The name of the include where it is skipped: rendered once, with the
	// first such host's variables, as runAction names a task.
	skippedName := ""
	for _, h := range hosts {
		vars, err := pr.vars(h, t, ov, nil)
		if err != nil {
			pr.fail(h, t, err.Error())
			failed = append(failed, h)
			continue
		}
		ok, err := pr.conds(t.When, vars)
		if err != nil {
			pr.fail(h, t, err.Error())
			failed = append(failed, h)
			continue
		}
		if !ok {
			if skippedName == "" {
				skippedName = pr.nameWith(t, vars)
			}
			r.emit(Event{Kind: EventHostResult, Play: pr.p.Name, Role: t.RoleName(), Task: skippedName, Pos: t.Pos.String(), Host: h.name, Status: StatusSkipped})
			r.count(h, StatusSkipped, "")
			continue
		}
		items := []any{nil}
		if t.HasLoop {
			if items, err = pr.loopItems(t, vars); err != nil {
				pr.fail(h, t, err.Error())
				failed = append(failed, h)
				continue
			}
		}
		for i, item := range items {
			iv := vars
			lv := map[string]any{}
			if t.HasLoop {
				iv = make(map[string]any, len(vars)+2)
				maps.Copy(iv, vars)
				lv[t.LoopVar] = item
				if t.IndexVar != "" {
					lv[t.IndexVar] = i
				}
				maps.Copy(iv, lv)
			}
			name := inc.file
			if inc.role != "" {
				name = inc.role
			}
			if strings.Contains(name, "{{") {
				if name, err = r.ev.RenderString(name, iv); err != nil {
					pr.fail(h, t, fmt.Sprintf("%s: %v", t.Pos, err))
					failed = append(failed, h)
					break
				}
			}
			key := name + "\x00" + strconv.Itoa(i)
			in, ok := byKey[key]
			if !ok {
				in = &includeInstance{name: name, perHost: map[*hostState]map[string]any{}}
				byKey[key] = in
				insts = append(insts, in)
			}
			in.hosts = append(in.hosts, h)
			in.perHost[h] = lv
		}
	}
	for _, in := range insts {
		if pr.halted(ctx) {
			break
		}
		tasks, err := pr.includeTasks(t, in.name)
		if err != nil {
			for _, h := range in.hosts {
				if !containsHost(failed, h) {
					pr.fail(h, t, err.Error())
					failed = append(failed, h)
				}
			}
			continue
		}
		sub := ov
		if t.HasLoop {
			sub = &overlay{parent: ov, perHost: in.perHost}
		}
		var run []*hostState
		for _, h := range in.hosts {
			if !containsHost(failed, h) {
				run = append(run, h)
			}
		}
		for _, h := range pr.runList(ctx, tasks, run, sub) {
			if !containsHost(failed, h) {
				failed = append(failed, h)
			}
		}
	}
	return failed
}

// includeTasks returns the tasks a dynamic include names, loading files
// whose names were only known at run time.
func (pr *playRun) includeTasks(t *Task, name string) ([]*Task, error) {
	inc := t.Include
	if inc.static != nil && (name == inc.file || name == inc.role) {
		return inc.static, nil
	}
	key := fmt.Sprintf("%p\x00%s", t, name)
	pr.mu.Lock()
	cached, ok := pr.incCache[key]
	pr.mu.Unlock()
	if ok {
		return cached, nil
	}
	ld := newLoader(inc.opts)
	ld.pbDir = inc.pbDir
	var tasks []*Task
	if inc.role != "" {
		if rt := ld.roleBlock(name, inc.tasks, inc.vars, t.Pos, inc.ctx); rt != nil {
			tasks = []*Task{rt}
		}
	} else {
		tasks = ld.tasksFile(name, t.Pos, inc.ctx)
	}
	if err := ld.err(); err != nil {
		return nil, fmt.Errorf("%s: %s %s: %w", t.Pos, t.Action, name, err)
	}
	pr.mu.Lock()
	pr.incCache[key] = tasks
	pr.mu.Unlock()
	return tasks, nil
}
