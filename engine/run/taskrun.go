package run

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/mensylisir/kubexm/engine/journal"
	"github.com/mensylisir/kubexm/engine/model"
	"github.com/mensylisir/kubexm/engine/playbook"
	"github.com/mensylisir/kubexm/engine/variables"

	"github.com/mensylisir/kubexm/engine/step"
	"github.com/mensylisir/kubexm/engine/transport"
	"github.com/mensylisir/kubexm/inventory"
)

// hostOutcome is what one task did on one host.
type hostOutcome struct {
	status model.Status
	msg    string
	reg    map[string]any
	facts  map[string]any
	failed bool // the host fails (not ignored)
}

// runAction runs a builtin task on hosts, at most Forks at a time, and
// returns the hosts that failed.
func (pr *playRun) runAction(ctx context.Context, t *playbook.Task, hosts []*hostState, il *includeLoop, handler bool) []*hostState {
	r := pr.r
	start := time.Now()
	hv := r.hostvars.get()
	name := t.Name
	if len(hosts) > 0 {
		name = pr.renderName(t, hosts[0], il, hv)
	}
	r.emit(model.Event{Kind: model.EventTaskStart, Play: pr.p.Name, Role: t.RoleName(), Task: name, Pos: t.Pos.String(), Total: len(hosts), Handler: handler})
	outcomes := make([]hostOutcome, len(hosts))
	if t.RunOnce {
		pr.runOnceTask(ctx, t, hosts, il, outcomes, hv)
	} else {
		var wg sync.WaitGroup
		for i, h := range hosts {
			wg.Add(1)
			job := func() {
				defer wg.Done()
				outcomes[i] = pr.runTaskHost(ctx, t, h, il, hv)
			}
			select {
			case r.jobs <- job:
			case <-ctx.Done():
				wg.Done()
				outcomes[i] = hostOutcome{status: model.StatusFailed, msg: "cancelled", failed: true}
			}
		}
		wg.Wait()
	}
	counts := map[model.Status]int{}
	var failed []*hostState
	for i, o := range outcomes {
		counts[o.status]++
		if o.failed {
			failed = append(failed, hosts[i])
		}
	}
	r.jr.Sync()
	r.emit(model.Event{Kind: model.EventTaskEnd, Play: pr.p.Name, Role: t.RoleName(), Task: name, Pos: t.Pos.String(),
		Done: len(hosts), Total: max(len(hosts), pr.freeHosts), Counts: counts, DurationMS: since(start), Handler: handler})
	if ctx.Value(rescuable{}) == nil {
		pr.checkFailLimits(t, failed)
	}
	return failed
}

// runOnceTask runs t on the first host and gives its result to all hosts.
func (pr *playRun) runOnceTask(ctx context.Context, t *playbook.Task, hosts []*hostState, il *includeLoop, outcomes []hostOutcome, hv map[string]any) {
	pr.mu.Lock()
	o, exists := pr.runOnce[t]
	owner := !exists || pr.strategy != "free"
	if owner {
		o = &onceResult{done: make(chan struct{})}
		pr.runOnce[t] = o
	}
	pr.mu.Unlock()
	if owner {
		o.out = pr.runTaskHost(ctx, t, hosts[0], il, hv)
		close(o.done)
	} else {
		select {
		case <-o.done:
		case <-ctx.Done():
			return
		}
	}
	for i, h := range hosts {
		outcomes[i] = o.out
		if i == 0 && owner {
			continue
		}
		pr.applyOutcome(t, h, o.out)
		if o.out.failed {
			pr.r.count(h, model.StatusFailed, o.out.msg)
			pr.noteFailure(h, t, o.out.reg)
		}
	}
}

// applyOutcome stores what a task registered and the facts it set.
func (pr *playRun) applyOutcome(t *playbook.Task, h *hostState, o hostOutcome) {
	if t.Register != "" && o.reg != nil {
		h.setDyn(map[string]any{t.Register: o.reg})
	}
	if len(o.facts) > 0 {
		if t.Action == "setup" {
			// setup sets the one variable `facts`; it is kept apart from
			// set_fact so that clear_facts and hostvars see it as gathered.
			f, _ := o.facts["facts"].(map[string]any)
			h.setFacts(f)
		} else {
			h.setDyn(o.facts)
		}
	}
}

func (pr *playRun) journalKey(t *playbook.Task, h *hostState) string {
	id := t.Key
	if id == "" {
		id = t.Where()
	}
	base := strconv.Itoa(pr.p.Index) + "|" + id
	h.mu.Lock()
	n := h.occ[base]
	h.occ[base] = n + 1
	h.mu.Unlock()
	return base + "|" + h.name + "|" + strconv.Itoa(n)
}

func (pr *playRun) runTaskHost(ctx context.Context, t *playbook.Task, h *hostState, il *includeLoop, hv map[string]any) hostOutcome {
	r := pr.r
	start := time.Now()
	key := pr.journalKey(t, h)
	name := pr.taskName(t)
	ev := model.Event{Kind: model.EventHostResult, Play: pr.p.Name, Role: t.RoleName(), Task: name, Pos: t.Where(), Host: h.name, Report: t.Spec.Report && !t.NoLog}
	if out, ok := pr.resumed(t, h, key); ok {
		ev.Status, ev.Resumed, ev.Message = out.status, true, "done in run "+r.jr.From
		r.emit(ev)
		r.countOutcome(h, out, "")
		return out
	}
	out, vars := pr.runTaskHostFresh(ctx, t, h, il, hv, key, &ev)
	if ctx.Err() != nil && out.failed {
		// Say where the run was when it was stopped, not only "context
		// canceled": the recap lists these.
		out.msg = fmt.Sprintf("interrupted (%v) during task %q at %s: %s", context.Cause(ctx), name, t.Where(), out.msg)
		r.interrupted(h.name, name, t)
	}
	pr.applyOutcome(t, h, out)
	if out.status == model.StatusChanged && len(t.Notify) > 0 {
		pr.notify(ctx, t, h, vars)
	}
	rec := journal.Record{Type: "result", Key: key, Task: name, Host: h.name, Status: out.status, Register: t.Register,
		Role: t.RoleName(), Pos: t.Where(), DurationMS: since(start), Control: controlSide(t, h.name, out.reg)}
	facts := out.facts
	if t.Action == "setup" {
		facts = nil // gathered again on resume, never restored
	}
	r.journalOutcome(&rec, t, out, facts)
	r.jr.Write(rec)
	ev.Status, ev.DurationMS = out.status, since(start)
	if ev.Message == "" {
		ev.Message = out.msg
	}
	if t.NoLog {
		ev.Message, ev.Stdout, ev.Stderr, ev.Diff = "output hidden by no_log", "", "", ""
	}
	r.emit(ev)
	r.countOutcome(h, out, ev.Message)
	if out.failed {
		pr.mu.Lock()
		pr.failing[h] = true
		pr.mu.Unlock()
		pr.noteFailure(h, t, out.reg)
	}
	if out.status == model.StatusUnreachable {
		r.mu.Lock()
		h.unreachable = true
		r.mu.Unlock()
	}
	return out
}

// resumed returns the outcome an earlier run journaled for key, restoring
// what the task registered.
func (pr *playRun) resumed(t *playbook.Task, h *hostState, key string) (hostOutcome, bool) {
	rec, ok := pr.r.jr.Lookup(key)
	if !ok || t.Action == "setup" {
		return hostOutcome{}, false
	}
	if rec.Omitted {
		// no_log kept the result out of the journal: run it again so what
		// it registered or set exists.
		return hostOutcome{}, false
	}
	out := hostOutcome{status: rec.Status, reg: rec.Result, facts: rec.Facts}
	pr.applyOutcome(t, h, out)
	// The handlers of a change made before the interruption may never
	// have run.
	if rec.Status == model.StatusChanged && len(t.Notify) > 0 {
		if vars, err := pr.vars(h, t, nil, nil); err == nil {
			pr.notify(context.Background(), t, h, vars)
		}
	}
	rec.Time, rec.Resumed = "", true
	pr.r.jr.Write(rec)
	return out, true
}

// controlSide says whether a task's outcome on host was made on the
// control machine or left its product there (journal.Record.Control, run
// again on resume): the task's host or its delegate (of the task, or of
// any loop item) is the control machine, or its builtin works there.
func controlSide(t *playbook.Task, host string, reg map[string]any) bool {
	if t.Spec.Control || t.Spec.ControlProduct || isControl(host) || isControl(t.DelegateTo) {
		return true
	}
	if d, _ := reg["delegate_to"].(string); isControl(d) {
		return true
	}
	items, _ := reg["results"].([]any)
	for _, it := range items {
		if m, ok := it.(map[string]any); ok {
			if d, _ := m["delegate_to"].(string); isControl(d) {
				return true
			}
		}
	}
	return false
}

// isControl says whether name is the control machine, localhost. An
// inventory host with connection: local is not: it is a host of the
// cluster, whose state is on its own disk, as a remote host's is.
func isControl(name string) bool { return name == inventory.Localhost }

func (pr *playRun) runTaskHostFresh(ctx context.Context, t *playbook.Task, h *hostState, il *includeLoop, hv map[string]any, key string, ev *model.Event) (hostOutcome, map[string]any) {
	vars, err := pr.vars(h, t, il, hv)
	if err != nil {
		return pr.failure(t, err.Error()), vars
	}
	if !t.HasLoop {
		return pr.runOnHost(ctx, t, h, vars, ev), vars
	}
	// A condition that does not name the loop variable is the same for
	// every item: false, the task is skipped before its loop is rendered.
	// So `role: r, when: ...` skips a looped task whose loop names what an
	// earlier, skipped task of the role would have registered.
	if ok, decided := pr.loopFreeConds(t, vars); decided && !ok {
		return hostOutcome{status: model.StatusSkipped, reg: map[string]any{"changed": false, "failed": false, "skipped": true,
			"results": []any{}, "msg": "condition false"}}, vars
	}
	items, err := pr.loopItems(t, vars)
	if err != nil {
		return pr.failure(t, err.Error()), vars
	}
	return pr.runLoop(ctx, t, h, key, ev, items, vars), vars
}

// runOnHost runs a task without a loop on one host, if its when holds.
func (pr *playRun) runOnHost(ctx context.Context, t *playbook.Task, h *hostState, vars map[string]any, ev *model.Event) hostOutcome {
	ok, err := pr.conds(t.When, vars)
	if err != nil {
		return pr.failure(t, err.Error())
	}
	if !ok {
		return hostOutcome{status: model.StatusSkipped, reg: map[string]any{"changed": false, "failed": false, "skipped": true, "msg": "condition false"}}
	}
	out, stdout, stderr, diff := pr.execute(ctx, t, h, vars)
	if pr.r.opts.Verbosity >= 1 {
		ev.Stdout, ev.Stderr = stdout, stderr
	}
	if pr.r.opts.Diff {
		ev.Diff = diff
	}
	if d, ok := out.reg["delegate_to"].(string); ok {
		ev.Delegate = d
	}
	return out
}

// loopRun sums up the items of a looped task on one host.
type loopRun struct {
	results                 []any
	facts                   map[string]any
	changed, failed, anyRun bool
	msgs                    []string
}

// runLoop runs a looped task's items on one host, batched where the
// builtin can, and sums their outcomes up.
func (pr *playRun) runLoop(ctx context.Context, t *playbook.Task, h *hostState, key string, ev *model.Event, items []any, vars map[string]any) hostOutcome {
	lr := loopRun{results: make([]any, 0, len(items)), facts: map[string]any{}}
	ivs := make([]map[string]any, len(items))
	for i, item := range items {
		ivs[i] = make(map[string]any, len(vars)+2)
		maps.Copy(ivs[i], vars)
		ivs[i][t.LoopVar] = item
		if t.IndexVar != "" {
			ivs[i][t.IndexVar] = i
		}
	}
	batched := pr.runBatched(ctx, t, h, key, ivs)
	for i, item := range items {
		if ctx.Err() != nil {
			lr.failed = true
			lr.msgs = append(lr.msgs, "cancelled")
			break
		}
		label := pr.itemLabel(t, item, ivs[i])
		o, stdout, stderr := pr.runItem(ctx, t, h, key, i, ivs[i], batched, &lr)
		o.reg[t.LoopVar] = item
		if t.IndexVar != "" {
			o.reg[t.IndexVar] = i
		}
		lr.results = append(lr.results, o.reg)
		maps.Copy(lr.facts, o.facts)
		if o.status == model.StatusChanged {
			lr.changed = true
		}
		if o.status == model.StatusFailed || o.status == model.StatusIgnored {
			lr.failed = true
			lr.msgs = append(lr.msgs, fmt.Sprintf("item %s: %s", label, o.msg))
		}
		pr.emitItem(t, ev, label, o, stdout, stderr)
	}
	return lr.outcome(t, len(items))
}

// runItem runs one item of a loop, if its when holds: from the journal of
// the run being resumed, from the batch, or on its own.
func (pr *playRun) runItem(ctx context.Context, t *playbook.Task, h *hostState, key string, i int, iv map[string]any, batched map[int]itemResult, lr *loopRun) (o hostOutcome, stdout, stderr string) {
	r := pr.r
	ok, err := pr.conds(t.When, iv)
	switch {
	case err != nil:
		o = pr.failure(t, err.Error())
		o.reg = map[string]any{"failed": true, "changed": false, "msg": err.Error()}
		return o, "", ""
	case !ok:
		return hostOutcome{status: model.StatusSkipped, reg: map[string]any{"changed": false, "failed": false, "skipped": true}}, "", ""
	}
	lr.anyRun = true
	ikey := key + "#" + strconv.Itoa(i)
	if rec, done := r.jr.Lookup(ikey); done {
		// The item finished in the run being resumed.
		o = hostOutcome{status: rec.Status, reg: rec.Result, facts: rec.Facts}
		if o.reg == nil {
			o.reg = map[string]any{"changed": rec.Status == model.StatusChanged, "failed": false, "skipped": rec.Status == model.StatusSkipped}
		}
		rec.Time, rec.Resumed = "", true
		r.jr.Write(rec)
		return o, "", ""
	}
	if br, ok := batched[i]; ok {
		o, stdout, stderr = br.o, br.stdout, br.stderr
	} else {
		o, stdout, stderr, _ = pr.execute(ctx, t, h, iv)
	}
	r.jr.Write(pr.itemRecord(t, h, ikey, o))
	return o, stdout, stderr
}

// emitItem reports an item's outcome: always when verbose or failed, and
// when the task reports and the item ran.
func (pr *playRun) emitItem(t *playbook.Task, ev *model.Event, label string, o hostOutcome, stdout, stderr string) {
	r := pr.r
	ie := *ev
	ie.Kind, ie.Item, ie.Status, ie.Message = model.EventHostResult, label, o.status, o.msg
	if r.opts.Verbosity >= 1 && !t.NoLog {
		ie.Stdout, ie.Stderr = stdout, stderr
	}
	if t.NoLog {
		ie.Item, ie.Message = "(hidden by no_log)", ""
	}
	if r.opts.Verbosity >= 1 || o.status == model.StatusFailed || (ie.Report && o.status != model.StatusSkipped) {
		r.emit(ie)
	}
}

// outcome is the looped task's outcome on the host, from its items'.
func (lr *loopRun) outcome(t *playbook.Task, items int) hostOutcome {
	agg := hostOutcome{status: model.StatusSkipped, facts: lr.facts}
	msg := strings.Join(lr.msgs, "; ")
	agg.reg = map[string]any{"changed": lr.changed, "failed": lr.failed, "skipped": !lr.anyRun && !lr.failed, "results": lr.results, "msg": msg}
	switch {
	case lr.failed && t.IgnoreErrs:
		agg.status = model.StatusIgnored
	case lr.failed:
		agg.status, agg.failed = model.StatusFailed, true
	case lr.changed:
		agg.status = model.StatusChanged
	case lr.anyRun:
		agg.status = model.StatusOK
	}
	agg.msg = msg
	if !lr.anyRun && !lr.failed {
		agg.msg = fmt.Sprintf("all %d items skipped", items)
	}
	return agg
}

// runBatched runs, when t's builtin takes batches, the loop items that the
// item loop of runTaskHostFresh would execute (condition true, not done in
// the run being resumed) in one batch, and returns their results by index.
// Nothing is returned when fewer than two items would run: one item is run
// by execute as before.
func (pr *playRun) runBatched(ctx context.Context, t *playbook.Task, h *hostState, key string, ivs []map[string]any) map[int]itemResult {
	b, ok := t.Batchable()
	if !ok || len(ivs) < 2 {
		return nil
	}
	var run []int
	for i, iv := range ivs {
		if ok, err := pr.conds(t.When, iv); err != nil || !ok {
			continue
		}
		if _, done := pr.r.jr.Lookup(key + "#" + strconv.Itoa(i)); done {
			continue
		}
		run = append(run, i)
	}
	if len(run) < 2 {
		return nil
	}
	sub := make([]map[string]any, len(run))
	for j, i := range run {
		sub[j] = ivs[i]
	}
	res := pr.executeBatch(ctx, t, h, b, sub)
	out := make(map[int]itemResult, len(run))
	for j, i := range run {
		out[i] = res[j]
	}
	return out
}

// itemRecord journals one loop item, so a resumed run skips the items that
// finished even when the task as a whole did not.
func (pr *playRun) itemRecord(t *playbook.Task, h *hostState, key string, o hostOutcome) journal.Record {
	rec := journal.Record{Type: "result", Key: key, Task: pr.taskName(t), Host: h.name, Status: o.status, Role: t.RoleName(), Pos: t.Where(),
		Control: controlSide(t, h.name, o.reg)}
	pr.r.journalOutcome(&rec, t, o, o.facts)
	return rec
}

// journalOutcome puts into rec what a task's outcome on a host leaves in
// the journal (journal.Record.Keep, Explain).
func (r *runner) journalOutcome(rec *journal.Record, t *playbook.Task, out hostOutcome, facts map[string]any) {
	reg := out.reg
	if t.Register == "" {
		reg = nil
	}
	rec.Keep(reg, facts, t.NoLog, r.red)
	rec.Explain(out.msg, out.reg, t.NoLog, r.red)
}

func (pr *playRun) failure(t *playbook.Task, msg string) hostOutcome {
	o := hostOutcome{status: model.StatusFailed, msg: msg, failed: true, reg: map[string]any{"changed": false, "failed": true, "msg": msg}}
	if t.IgnoreErrs {
		o.status, o.failed = model.StatusIgnored, false
	}
	return o
}

func (pr *playRun) itemLabel(t *playbook.Task, item any, vars map[string]any) string {
	red := pr.r.red
	if t.Label != "" {
		if s, err := pr.r.ev.RenderString(t.Label, vars); err == nil {
			return red.Str(s)
		}
	}
	switch x := item.(type) {
	case string:
		return red.Str(x)
	case map[string]any:
		if n, ok := x["name"]; ok {
			return red.Str(fmt.Sprint(n))
		}
	}
	// Masked before it is cut short, so no prefix of a secret remains.
	s := red.Str(fmt.Sprint(item))
	if len(s) > 60 {
		s = s[:57] + "..."
	}
	return s
}

// loopItems renders a task's loop into a list.
func (pr *playRun) loopItems(t *playbook.Task, vars map[string]any) ([]any, error) {
	var v any
	var err error
	switch l := t.Loop.(type) {
	case string:
		v, err = pr.r.ev.Render(l, vars)
	default:
		v, err = pr.r.ev.RenderValue(l, vars)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: loop: %w", t.Pos, err)
	}
	switch x := v.(type) {
	case nil:
		return nil, nil
	case []any:
		return x, nil
	case string:
		if strings.TrimSpace(x) == "" {
			return nil, nil
		}
	}
	rv := reflect.ValueOf(v)
	if rv.Kind() == reflect.Slice || rv.Kind() == reflect.Array {
		out := make([]any, rv.Len())
		for i := range out {
			out[i] = rv.Index(i).Interface()
		}
		return out, nil
	}
	hint := ""
	if rv.Kind() == reflect.Map {
		hint = "; to loop over a mapping use a list of its keys, e.g. {{ keys .m | sortAlpha }}"
	}
	return nil, fmt.Errorf("%s: loop: got %s, not a list%s", t.Pos, playbook.TypeName(v), hint)
}

// execute runs the builtin once for one host (and one loop item), with
// retries, changed_when and failed_when.
func (pr *playRun) execute(ctx context.Context, t *playbook.Task, h *hostState, vars map[string]any) (out hostOutcome, stdout, stderr, diff string) {
	env, args, target, fail := pr.prepare(ctx, t, h, vars)
	if fail != nil {
		return *fail, "", "", ""
	}
	attempts := 1
	if t.Until != nil {
		attempts = t.Retries + 1
	}
	var reg map[string]any
	var res step.Result
	untilStart := time.Now()
	for attempt := 1; attempt <= attempts; attempt++ {
		tctx, cancel := ctx, context.CancelFunc(func() {})
		if t.Timeout > 0 {
			tctx, cancel = context.WithTimeout(ctx, t.Timeout)
		}
		var rerr error
		res, rerr = pr.callBuiltin(tctx, t, h, env, step.Args(args))
		timedOut := t.Timeout > 0 && errors.Is(tctx.Err(), context.DeadlineExceeded) && ctx.Err() == nil
		cancel()
		if timedOut {
			rerr = fmt.Errorf("timed out after %s: %w", t.Timeout, rerr)
		}
		reg = variables.Registered(res, rerr)
		reg["attempts"] = attempt
		if target != h.name {
			reg["delegate_to"] = target
		}
		// A result the builtin skipped (a command under --check) has nothing
		// for until, changed_when or failed_when to judge.
		if t.Until == nil || ctx.Err() != nil || res.Skipped {
			break
		}
		ok, err := pr.condsWith([]playbook.Cond{*t.Until}, vars, t.Register, reg)
		if err != nil {
			reg["failed"], reg["msg"] = true, err.Error()
			break
		}
		if ok {
			reg["failed"] = false
			break
		}
		if attempt == attempts {
			reg["failed"] = true
			reg["msg"] = fmt.Sprintf("until %q still false after %d attempts in %s; last seen: %s",
				t.Until.Expr, attempts, time.Since(untilStart).Round(time.Second), variables.LastSeen(reg))
			break
		}
		env.Logf("until %q false, retrying in %s (%d left)", t.Until.Expr, t.Delay, attempts-attempt)
		select {
		case <-time.After(t.Delay):
		case <-ctx.Done():
		}
	}
	return pr.judge(t, vars, res, reg)
}

// prepare renders a task's arguments, target and environment for one host
// (and one loop item) and builds the builtin's Env. fail is set when the
// task already failed on this host.
func (pr *playRun) prepare(ctx context.Context, t *playbook.Task, h *hostState, vars map[string]any) (env *step.Env, args map[string]any, target string, fail *hostOutcome) {
	r := pr.r
	failed := func(o hostOutcome) (*step.Env, map[string]any, string, *hostOutcome) { return nil, nil, "", &o }
	rendered, err := r.ev.RenderValue(t.Args, vars)
	if err != nil {
		return failed(pr.failure(t, fmt.Sprintf("%s: %v", t.Pos, err)))
	}
	args, _ = rendered.(map[string]any)
	if err := pr.checkRendered(t, args); err != nil {
		return failed(pr.failure(t, err.Error()))
	}
	target = h.name
	if t.DelegateTo != "" {
		d, err := r.ev.RenderString(t.DelegateTo, vars)
		if err != nil {
			return failed(pr.failure(t, fmt.Sprintf("%s: delegate_to: %v", t.Pos, err)))
		}
		target = d
	}
	tr, err := pr.transportFor(ctx, target)
	if err != nil {
		if target == h.name {
			return failed(hostOutcome{status: model.StatusUnreachable, msg: err.Error(), failed: true, reg: map[string]any{"unreachable": true, "failed": true, "changed": false, "msg": err.Error()}})
		}
		return failed(pr.failure(t, fmt.Sprintf("delegate_to %s: %v", target, err)))
	}
	var environment map[string]string
	if len(t.Environment) > 0 {
		envv, err := r.ev.RenderValue(t.Environment, vars)
		if err != nil {
			return failed(pr.failure(t, fmt.Sprintf("%s: environment: %v", t.Pos, err)))
		}
		m, _ := envv.(map[string]any)
		environment = make(map[string]string, len(m))
		for k, v := range m {
			environment[k] = fmt.Sprint(v)
		}
	}
	env = &step.Env{
		Host: h.name, Target: tr, Control: r.control, Check: r.checkMode(t), Diff: r.opts.Diff, Become: t.Become,
		Environment: environment,
		Vars:        vars, Render: r.ev.RenderString, Eval: r.ev.Eval, FindFile: r.files.Find(t), WorkDir: r.opts.WorkDir,
		RenderTemplate: r.files.RenderTemplate(t),
		Verbosity:      r.opts.Verbosity,
		Logf: func(format string, a ...any) {
			if r.opts.Verbosity >= 1 && !t.NoLog {
				r.emit(model.Event{Kind: model.EventLog, Play: pr.p.Name, Task: pr.taskName(t), Host: h.name, Message: fmt.Sprintf(format, a...)})
			}
		},
	}
	return env, args, target, nil
}

// judge applies changed_when and failed_when to what the builtin registered
// and turns it into the outcome on the host.
func (pr *playRun) judge(t *playbook.Task, vars map[string]any, res step.Result, reg map[string]any) (out hostOutcome, stdout, stderr, diff string) {
	if len(t.ChangedWhen) > 0 && !res.Skipped {
		ok, err := pr.condsWith(t.ChangedWhen, vars, t.Register, reg)
		if err != nil {
			reg["failed"], reg["msg"] = true, err.Error()
		} else {
			reg["changed"] = ok
		}
	}
	if len(t.FailedWhen) > 0 && !res.Skipped {
		ok, err := pr.condsWith(t.FailedWhen, vars, t.Register, reg)
		if err != nil {
			reg["failed"], reg["msg"] = true, err.Error()
		} else {
			reg["failed"] = ok
		}
	}
	out = hostOutcome{reg: reg, facts: res.Facts}
	out.msg, _ = reg["msg"].(string)
	failed, _ := reg["failed"].(bool)
	if failed && out.msg == "" {
		out.msg = t.Action + " failed"
		if rc, ok := reg["rc"]; ok {
			out.msg += fmt.Sprintf(" (rc=%v)", rc)
		}
		if len(t.FailedWhen) > 0 {
			out.msg += ": failed_when held"
		}
	}
	changed, _ := reg["changed"].(bool)
	skipped, _ := reg["skipped"].(bool)
	switch {
	case failed && t.IgnoreErrs:
		out.status = model.StatusIgnored
	case failed:
		out.status, out.failed = model.StatusFailed, true
	case skipped:
		out.status = model.StatusSkipped
	case changed:
		out.status = model.StatusChanged
	default:
		out.status = model.StatusOK
	}
	if failed {
		out.facts = nil
	}
	stdout, _ = reg["stdout"].(string)
	stderr, _ = reg["stderr"].(string)
	return out, stdout, stderr, res.Diff
}

// itemResult is what one loop item did, as execute returns it.
type itemResult struct {
	o              hostOutcome
	stdout, stderr string
}

// executeBatch runs the loop items whose variables are ivs on one host in
// one RunBatch call and judges each result as execute does.
func (pr *playRun) executeBatch(ctx context.Context, t *playbook.Task, h *hostState, b step.Batcher, ivs []map[string]any) []itemResult {
	out := make([]itemResult, len(ivs))
	var batch []step.BatchItem
	var at []int
	for i, iv := range ivs {
		env, args, _, fail := pr.prepare(ctx, t, h, iv)
		if fail != nil {
			out[i].o = *fail
			continue
		}
		batch = append(batch, step.BatchItem{Env: env, Args: t.Spec.WithDefaults(step.Args(args))})
		at = append(at, i)
	}
	if len(batch) == 0 {
		return out
	}
	results, errs := pr.callBatch(ctx, t, h, b, batch)
	for j, i := range at {
		reg := variables.Registered(results[j], errs[j])
		reg["attempts"] = 1
		o, stdout, stderr, _ := pr.judge(t, ivs[i], results[j], reg)
		out[i] = itemResult{o: o, stdout: stdout, stderr: stderr}
	}
	return out
}

// callBatch is callBuiltin for RunBatch: a panic or a builtin that returns
// the wrong number of results fails every item of the batch on this host.
func (pr *playRun) callBatch(ctx context.Context, t *playbook.Task, h *hostState, b step.Batcher, items []step.BatchItem) (results []step.Result, errs []error) {
	failAll := func(err error) {
		results, errs = make([]step.Result, len(items)), make([]error, len(items))
		for i := range errs {
			errs[i] = err
		}
	}
	defer func() {
		p := recover()
		if p == nil {
			return
		}
		failAll(fmt.Errorf("%s: builtin %s failed with an internal error (a bug in kubexm: please report it; -vvv prints the stack): %v", t.Pos, t.Action, p))
		if pr.r.opts.Verbosity >= 3 {
			pr.r.emit(model.Event{Kind: model.EventLog, Play: pr.p.Name, Task: pr.taskName(t), Host: h.name,
				Message: fmt.Sprintf("panic in builtin %s: %v\n%s", t.Action, p, debug.Stack())})
		}
	}()
	if len(items) > 0 && items[0].Env.Check {
		ctx = transport.ReadOnly(ctx)
	}
	results, errs = b.RunBatch(ctx, items)
	if len(results) != len(items) || len(errs) != len(items) {
		failAll(fmt.Errorf("%s: builtin %s returned %d results for %d items (a bug in kubexm: please report it)", t.Pos, t.Action, len(results), len(items)))
	}
	return results, errs
}

// callBuiltin runs t's builtin with its Spec's defaults for what the task
// left out or rendered empty. A panic in it fails this task on this host
// only, like any error: the other hosts and the recap go on.
func (pr *playRun) callBuiltin(ctx context.Context, t *playbook.Task, h *hostState, env *step.Env, args step.Args) (res step.Result, err error) {
	defer func() {
		p := recover()
		if p == nil {
			return
		}
		res = step.Result{}
		err = fmt.Errorf("%s: builtin %s failed with an internal error (a bug in kubexm: please report it; -vvv prints the stack): %v", t.Pos, t.Action, p)
		if pr.r.opts.Verbosity >= 3 {
			pr.r.emit(model.Event{Kind: model.EventLog, Play: pr.p.Name, Task: pr.taskName(t), Host: h.name,
				Message: fmt.Sprintf("panic in builtin %s: %v\n%s", t.Action, p, debug.Stack())})
		}
	}()
	if env.Check {
		ctx = transport.ReadOnly(ctx)
	}
	return t.Impl.Run(ctx, env, t.Spec.WithDefaults(args))
}

// checkRendered checks the arguments that were templates, now that they have
// values.
func (pr *playRun) checkRendered(t *playbook.Task, args map[string]any) error {
	for _, a := range t.Spec.Args {
		orig, ok := t.Args[a.Name].(string)
		if !ok || !strings.Contains(orig, "{{") {
			continue
		}
		if err := playbook.CheckArgType(a, args[a.Name]); err != nil {
			return fmt.Errorf("%s: %s: argument %s = %q: %v", t.Pos, t.Action, a.Name, orig, err)
		}
	}
	return nil
}

// conds evaluates conditions that must all hold.
func (pr *playRun) conds(cs []playbook.Cond, vars map[string]any) (bool, error) {
	for _, c := range cs {
		ok, err := pr.r.ev.EvalBool(c.Expr, vars)
		if err != nil {
			return false, fmt.Errorf("%s: %w", c.Pos, err)
		}
		if !ok {
			return false, nil
		}
	}
	return true, nil
}

// loopFreeConds evaluates a looped task's conditions that do not name its
// loop or index variable. decided is false when one of them cannot be
// evaluated without an item (it may read one through a variable); the
// per-item evaluation then reports it as before.
func (pr *playRun) loopFreeConds(t *playbook.Task, vars map[string]any) (ok, decided bool) {
	for _, c := range t.When {
		if variables.NamesVar(c.Expr, t.LoopVar) || (t.IndexVar != "" && variables.NamesVar(c.Expr, t.IndexVar)) {
			continue
		}
		ok, err := pr.r.ev.EvalBool(c.Expr, vars)
		if err != nil {
			return false, false
		}
		if !ok {
			return false, true
		}
	}
	return true, true
}

// condsWith evaluates conditions with the task's result visible under its
// register name and as `result`.
func (pr *playRun) condsWith(cs []playbook.Cond, vars map[string]any, register string, reg map[string]any) (bool, error) {
	v := make(map[string]any, len(vars)+2)
	maps.Copy(v, vars)
	v["result"] = reg
	if register != "" {
		v[register] = reg
	}
	return pr.conds(cs, v)
}

// vars builds the variables a task sees on a host; t nil gives the play
// level. hv is the task's hostvars snapshot, nil to take the current one.
// The layers go on lowest first, in Ansible's order (see vars.go).
func (pr *playRun) vars(h *hostState, t *playbook.Task, il *includeLoop, hv map[string]any) (map[string]any, error) {
	r := pr.r
	if hv == nil {
		hv = r.hostvars.get()
	}
	facts, dyn := h.snapshot()
	pv, err := pr.playVarsFor(h, hv)
	if err != nil {
		return nil, err
	}
	var chain []*playbook.Scope
	if t != nil {
		chain = variables.ScopeChain(t.Scope)
	}
	v := make(map[string]any, len(h.base)+len(pv)+len(dyn)+len(r.opts.ExtraVars)+8)
	maps.Copy(v, h.builtin)
	pr.magic(v, h, t, hv)
	// Templated values are rendered last, against every layer, so `{{ .x }}`
	// sees the highest-precedence x, as a lazy lookup would; a template is
	// dropped from the queue when a higher layer sets its name.
	pending := variables.SetLayer(v, pr.p.Defaults, nil)
	for _, s := range chain {
		pending = variables.SetLayer(v, s.Defaults, pending)
	}
	pending = variables.SetMap(v, h.inv, pending)
	pending = variables.SetLayer(v, h.invTmpl, pending)
	v["facts"] = facts
	pending = variables.SetMap(v, pv, pending)
	if t != nil {
		// role vars, then block vars
		pending = variables.SetScopes(v, chain, func(s *playbook.Scope) playbook.VarList { return s.Vars }, pending)
		pending = variables.SetLayer(v, t.Vars, pending)
	}
	pending = variables.SetMap(v, dyn, pending)
	// role params, then include params
	pending = variables.SetScopes(v, chain, func(s *playbook.Scope) playbook.VarList { return s.Params }, pending)
	var ovs []*includeLoop
	for o := il; o != nil; o = o.parent {
		ovs = append(ovs, o)
	}
	for i := len(ovs) - 1; i >= 0; i-- {
		pending = variables.SetMap(v, ovs[i].perHost[h], pending)
	}
	pending = variables.SetMap(v, r.opts.ExtraVars, pending)
	pr.magic(v, h, t, hv)
	if t != nil {
		if pending, err = r.renderOrder(variables.OrderKey{Key: t, Inv: h.invKey}, pending, func(name string) bool { _, ok := dyn[name]; return ok }); err != nil {
			return nil, err
		}
	}
	if err := r.renderPending(v, pending, nil); err != nil {
		return nil, err
	}
	return v, nil
}

// renderVar renders one templated variable into v.
func (r *runner) renderVar(v map[string]any, d *playbook.VarDef) error {
	host, _ := v["inventory_hostname"].(string)
	val, err := r.memo.Render(host, d, v, func() (any, error) { return r.ev.RenderValue(d.Val, v) })
	if err != nil {
		return fmt.Errorf("%s: variable %s: %w", d.Pos, d.Name, err)
	}
	v[d.Name] = val
	return nil
}

// renderOrder sorts a task's queued templated variables so that each comes
// after the queued ones it reads: an inner scope (an imported role's
// defaults) that redefines a variable moves it to the end of the queue, and
// the outer variables derived from it must still see its rendered value.
// The queue depends only on the task (or play), so the order is computed
// once. A cycle through a variable that set_fact, register or -e replaces
// (over) is no cycle: those are ordered again without it.
func (r *runner) renderOrder(key any, pending []*playbook.VarDef, over func(name string) bool) ([]*playbook.VarDef, error) {
	var o variables.VarOrder
	if cached, ok := r.orders.Load(key); ok {
		o = cached.(variables.VarOrder)
	} else {
		o.Defs, o.Err = variables.OrderVars(pending)
		r.orders.Store(key, o)
	}
	if o.Err == nil {
		return o.Defs, nil
	}
	kept := slices.DeleteFunc(slices.Clone(pending), func(d *playbook.VarDef) bool {
		_, extra := r.opts.ExtraVars[d.Name]
		return extra || (over != nil && over(d.Name))
	})
	if len(kept) == len(pending) {
		return nil, o.Err
	}
	return variables.OrderVars(kept)
}

func (pr *playRun) magic(v map[string]any, h *hostState, t *playbook.Task, hv map[string]any) {
	v["inventory_hostname"] = h.name
	v["groups"] = pr.r.groups
	v["hostvars"] = hv
	v["play_name"] = pr.p.Name
	if t != nil && t.Role != nil {
		v["role_name"] = t.Role.Name
	}
}

func (pr *playRun) playVarsFor(h *hostState, hv map[string]any) (map[string]any, error) {
	pr.mu.Lock()
	pv, ok := pr.playVars[h]
	pr.mu.Unlock()
	if ok {
		return pv, nil
	}
	facts, _ := h.snapshot()
	v := make(map[string]any, len(h.base)+len(pr.p.Vars)+len(pr.p.Defaults)+8)
	maps.Copy(v, h.builtin)
	pr.magic(v, h, nil, hv)
	// Play variables may read each other and the shared defaults in any
	// order, as task variables do: plain values first, then the templates,
	// each after those it reads.
	pending := variables.SetLayer(v, pr.p.Defaults, nil)
	pending = variables.SetMap(v, h.inv, pending)
	pending = variables.SetLayer(v, h.invTmpl, pending)
	v["facts"] = facts
	pending = variables.SetLayer(v, pr.p.Vars, pending)
	pending = variables.SetMap(v, pr.r.opts.ExtraVars, pending)
	pending, err := pr.r.renderOrder(variables.OrderKey{Key: pr.p, Inv: h.invKey}, pending, nil)
	if err != nil {
		return nil, err
	}
	// Only the play variables and the shared defaults they read are
	// rendered here; the other defaults are rendered per task, where role
	// variables they may read are in scope.
	need := map[string]bool{}
	for _, d := range pr.p.Vars {
		need[d.Name] = true
	}
	for i := len(pending) - 1; i >= 0; i-- {
		if need[pending[i].Name] {
			for _, n := range pending[i].Refs {
				need[n] = true
			}
		}
	}
	if err := pr.r.renderPending(v, pending, func(name string) bool { return need[name] }); err != nil {
		return nil, err
	}
	pv = make(map[string]any, len(pr.p.Vars))
	for _, d := range pr.p.Vars {
		pv[d.Name] = v[d.Name]
	}
	pr.mu.Lock()
	pr.playVars[h] = pv
	pr.mu.Unlock()
	return pv, nil
}

// checkMode is whether t runs as a dry run: --check, unless the task says
// otherwise with check_mode.
func (r *runner) checkMode(t *playbook.Task) bool {
	if t.CheckMode != nil {
		return *t.CheckMode
	}
	return r.opts.Check
}
