package run

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/mensylisir/kubexm/engine/model"
	"github.com/mensylisir/kubexm/engine/playbook"
)

// includeInstance is one file (or role) a dynamic include resolved to, with
// the hosts that include it and their loop variables.
type includeInstance struct {
	name    string
	hosts   []*hostState
	perHost map[*hostState]map[string]any
}

// includeRun is what a dynamic include resolves to on its hosts.
type includeRun struct {
	insts  []*includeInstance
	byKey  map[string]*includeInstance
	failed []*hostState
	// skippedName is the name of the include where it is skipped: rendered
	// once, with the first such host's variables, as runAction names a task.
	skippedName string
}

// runInclude evaluates include_tasks/include_role per host (when, loop, the
// templated name), then runs each resulting task list on its hosts.
func (pr *playRun) runInclude(ctx context.Context, t *playbook.Task, hosts []*hostState, il *includeLoop) []*hostState {
	ir := &includeRun{byKey: map[string]*includeInstance{}}
	for _, h := range hosts {
		pr.resolveInclude(t, h, il, ir)
	}
	for _, in := range ir.insts {
		if pr.halted(ctx) {
			break
		}
		pr.runInstance(ctx, t, in, il, ir)
	}
	return ir.failed
}

func (ir *includeRun) fail(pr *playRun, h *hostState, t *playbook.Task, msg string) {
	pr.fail(h, t, msg)
	ir.failed = append(ir.failed, h)
}

// resolveInclude finds what the include names on one host, for each item
// of its loop.
func (pr *playRun) resolveInclude(t *playbook.Task, h *hostState, il *includeLoop, ir *includeRun) {
	r := pr.r
	inc := t.Include
	vars, err := pr.vars(h, t, il, nil)
	if err != nil {
		ir.fail(pr, h, t, err.Error())
		return
	}
	ok, err := pr.conds(t.When, vars)
	if err != nil {
		ir.fail(pr, h, t, err.Error())
		return
	}
	if !ok {
		if ir.skippedName == "" {
			ir.skippedName = pr.nameWith(t, vars)
		}
		r.emit(model.Event{Kind: model.EventHostResult, Play: pr.p.Name, Role: t.RoleName(), Task: ir.skippedName, Pos: t.Pos.String(), Host: h.name, Status: model.StatusSkipped})
		r.count(h, model.StatusSkipped, "")
		return
	}
	items := []any{nil}
	if t.HasLoop {
		if items, err = pr.loopItems(t, vars); err != nil {
			ir.fail(pr, h, t, err.Error())
			return
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
		name := inc.File
		if inc.Role != "" {
			name = inc.Role
		}
		if strings.Contains(name, "{{") {
			if name, err = r.ev.RenderString(name, iv); err != nil {
				ir.fail(pr, h, t, fmt.Sprintf("%s: %v", t.Pos, err))
				return
			}
		}
		key := name + "\x00" + strconv.Itoa(i)
		in, ok := ir.byKey[key]
		if !ok {
			in = &includeInstance{name: name, perHost: map[*hostState]map[string]any{}}
			ir.byKey[key] = in
			ir.insts = append(ir.insts, in)
		}
		in.hosts = append(in.hosts, h)
		in.perHost[h] = lv
	}
}

// runInstance loads what one instance of the include names and runs it on
// the instance's hosts that have not failed.
func (pr *playRun) runInstance(ctx context.Context, t *playbook.Task, in *includeInstance, il *includeLoop, ir *includeRun) {
	tasks, err := pr.includeTasks(t, in.name)
	if err != nil {
		for _, h := range in.hosts {
			if !slices.Contains(ir.failed, h) {
				ir.fail(pr, h, t, err.Error())
			}
		}
		return
	}
	sub := il
	if t.HasLoop {
		sub = &includeLoop{parent: il, perHost: in.perHost}
	}
	var run []*hostState
	for _, h := range in.hosts {
		if !slices.Contains(ir.failed, h) {
			run = append(run, h)
		}
	}
	for _, h := range pr.runList(ctx, tasks, run, sub) {
		if !slices.Contains(ir.failed, h) {
			ir.failed = append(ir.failed, h)
		}
	}
}

// includeTasks returns the tasks a dynamic include names, loading files
// whose names were only known at run time.
func (pr *playRun) includeTasks(t *playbook.Task, name string) ([]*playbook.Task, error) {
	inc := t.Include
	if inc.Static != nil && (name == inc.File || name == inc.Role) {
		return inc.Static, nil
	}
	key := fmt.Sprintf("%p\x00%s", t, name)
	pr.mu.Lock()
	cached, ok := pr.incCache[key]
	pr.mu.Unlock()
	if ok {
		return cached, nil
	}
	tasks, err := inc.Load(name)
	if err != nil {
		return nil, fmt.Errorf("%s: %s %s: %w", t.Pos, t.Action, name, err)
	}
	pr.mu.Lock()
	pr.incCache[key] = tasks
	pr.mu.Unlock()
	return tasks, nil
}
