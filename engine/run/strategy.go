package run

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/mensylisir/kubexm/engine/model"
	"github.com/mensylisir/kubexm/engine/playbook"

	"github.com/mensylisir/kubexm/engine/transport"
	"github.com/mensylisir/kubexm/engine/transport/local"
	"github.com/mensylisir/kubexm/inventory"
)

// playRun is the state of one batch of a play.
type playRun struct {
	r     *runner
	p     *playbook.Play
	hosts []*hostState

	mu       sync.Mutex
	ended    map[*hostState]bool // meta: end_host
	failing  map[*hostState]bool // failed and not rescued, for max_fail_percentage
	endPlay  bool
	notified map[*playbook.Task]map[*hostState]bool
	playVars map[*hostState]map[string]any
	runOnce  map[*playbook.Task]*onceResult
	incCache map[string][]*playbook.Task
	// names are the tasks' names with their templates rendered
	// (renderName), as events and the journal show them.
	names map[*playbook.Task]string
	// lastFail is each host's latest failure, which a rescue sees as
	// failed_task and failed_result.
	lastFail map[*hostState]failure
	// freeHosts is how many hosts run the play under the free strategy,
	// where each host reports its tasks on its own.
	freeHosts int
	// strategy is the play's strategy, rendered when it is a template.
	strategy string
	// locals are the hosts' local transports under connection: local.
	locals map[string]transport.Transport
}

// includeLoop carries per-host loop variables of dynamic includes down to the
// included tasks.
type includeLoop struct {
	parent  *includeLoop
	perHost map[*hostState]map[string]any
}

func (r *runner) runPlay(ctx context.Context, p *playbook.Play) {
	r.emit(model.Event{Kind: model.EventPlayStart, Play: p.Name, Pos: p.Pos.String(), Message: "hosts: " + p.Hosts})
	defer r.emit(model.Event{Kind: model.EventPlayEnd, Play: p.Name, Pos: p.Pos.String()})
	names, unknown, err := playbook.MatchHosts(r.inv, p.Hosts)
	if err != nil {
		r.warn(p.Name, "play %q: %v", p.Name, err)
		return
	}
	for _, u := range unknown {
		r.warn(p.Name, "play %q: no host or group named %q in the inventory%s", p.Name, u, playbook.DidYouMean(u, append(playbook.KeysOf(r.inv.Groups), playbook.AllHostNames(r.inv)...)))
	}
	if r.opts.Limit != "" {
		limited, _, _ := playbook.MatchHosts(r.inv, r.opts.Limit)
		keep := map[string]bool{}
		for _, h := range limited {
			keep[h] = true
		}
		var out []string
		for _, h := range names {
			if keep[h] {
				out = append(out, h)
			}
		}
		names = out
	}
	var hosts []*hostState
	r.mu.Lock()
	for _, n := range names {
		h := r.hosts[n]
		if !h.failed && !h.unreachable {
			hosts = append(hosts, h)
		}
	}
	r.mu.Unlock()
	if len(hosts) == 0 {
		r.warn(p.Name, "play %q: no hosts to run on (pattern %q)", p.Name, p.Hosts)
		return
	}
	serial, err := r.serialSizes(p, hosts[0])
	if err != nil {
		for _, h := range hosts {
			r.markFailed(h)
		}
		r.abort("%s: play %q: serial: %v", p.Pos, p.Name, err)
		return
	}
	for _, batch := range batches(hosts, serial) {
		if ctx.Err() != nil || r.abortReason() != "" {
			return
		}
		pr := &playRun{r: r, p: p, hosts: batch, ended: map[*hostState]bool{}, failing: map[*hostState]bool{},
			notified: map[*playbook.Task]map[*hostState]bool{}, playVars: map[*hostState]map[string]any{},
			runOnce: map[*playbook.Task]*onceResult{}, incCache: map[string][]*playbook.Task{}, names: map[*playbook.Task]string{}, lastFail: map[*hostState]failure{}}
		pr.run(ctx)
		allFailed := true
		for _, h := range batch {
			if !r.hostFailed(h) {
				allFailed = false
			}
		}
		if allFailed && len(p.Serial) > 0 {
			r.abort("play %q: every host of a serial batch failed; later batches were not started", p.Name)
		}
	}
}

// serialSizes renders the play's serial entries that are templates (as
// `serial: "{{ .upgrade_serial }}"`) with the first host's view of the play
// variables (-e and play vars are the same for all) and checks them.
func (r *runner) serialSizes(p *playbook.Play, first *hostState) ([]any, error) {
	out := make([]any, 0, len(p.Serial))
	for _, s := range p.Serial {
		if t, ok := s.(string); ok && strings.Contains(t, "{{") {
			pr := &playRun{r: r, p: p, playVars: map[*hostState]map[string]any{}}
			v, err := pr.playString(first, t)
			if err != nil {
				return nil, err
			}
			s = strings.TrimSpace(v)
		}
		if _, err := playbook.BatchSize(s, 100); err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, nil
}

func (r *runner) hostFailed(h *hostState) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return h.failed || h.unreachable
}

// batches splits hosts by serial; sizes repeat the last entry.
func batches(hosts []*hostState, serial []any) [][]*hostState {
	if len(serial) == 0 {
		return [][]*hostState{hosts}
	}
	var out [][]*hostState
	for i := 0; len(hosts) > 0; i++ {
		spec := serial[min(i, len(serial)-1)]
		n, err := playbook.BatchSize(spec, len(hosts)+countHosts(out))
		if err != nil || n < 1 {
			n = len(hosts)
		}
		n = min(n, len(hosts))
		out = append(out, hosts[:n])
		hosts = hosts[n:]
	}
	return out
}

func countHosts(b [][]*hostState) int {
	n := 0
	for _, x := range b {
		n += len(x)
	}
	return n
}

func (pr *playRun) run(ctx context.Context) {
	defer func() {
		for _, t := range pr.locals {
			_ = t.Close()
		}
	}()
	p := pr.p
	hosts := pr.hosts
	if len(p.When) > 0 {
		var keep []*hostState
		for _, h := range hosts {
			vars, err := pr.vars(h, nil, nil, nil)
			if err == nil {
				var ok bool
				ok, err = pr.conds(p.When, vars)
				if err == nil && !ok {
					continue
				}
			}
			if err != nil {
				pr.fail(h, nil, fmt.Sprintf("play %q when: %v", p.Name, err))
				continue
			}
			keep = append(keep, h)
		}
		hosts = keep
	}
	if p.GatherFacts {
		hosts = pr.gather(ctx, hosts)
	}
	if len(hosts) == 0 {
		return
	}
	pr.strategy = p.Strategy
	if strings.Contains(p.Strategy, "{{") {
		// One strategy for the whole batch, from its first host's view of
		// the play variables (-e and play vars are the same for all).
		s, err := pr.playString(hosts[0], p.Strategy)
		if err == nil {
			err = playbook.CheckStrategy(s)
		}
		if err != nil {
			for _, h := range hosts {
				pr.fail(h, nil, fmt.Sprintf("%s: play %q: strategy: %v", p.Pos, p.Name, err))
				pr.r.markFailed(h)
			}
			return
		}
		pr.strategy = s
	}
	if pr.strategy == "free" {
		pr.freeHosts = len(hosts)
		var wg sync.WaitGroup
		for _, h := range hosts {
			wg.Add(1)
			go func() {
				defer wg.Done()
				pr.runSections(ctx, []*hostState{h})
			}()
		}
		wg.Wait()
		return
	}
	pr.runSections(ctx, hosts)
}

// transportFor is the runner's transport of a host, or under the play's
// connection: local the control machine's, named for the host.
func (pr *playRun) transportFor(ctx context.Context, name string) (transport.Transport, error) {
	if pr.p.Connection != "local" || name == inventory.Localhost {
		return pr.r.transportFor(ctx, name)
	}
	pr.mu.Lock()
	defer pr.mu.Unlock()
	if t, ok := pr.locals[name]; ok {
		return t, nil
	}
	var opts []local.Option
	if h, ok := pr.r.inv.Host(name); ok {
		opts = append(opts, local.WithBecomePassword(cmp.Or(h.BecomePassword, h.Password)))
	}
	if pr.locals == nil {
		pr.locals = map[string]transport.Transport{}
	}
	t := local.New(name, opts...)
	pr.locals[name] = t
	return t, nil
}

// playString renders a play keyword with the play-level variables of h.
func (pr *playRun) playString(h *hostState, s string) (string, error) {
	vars, err := pr.vars(h, nil, nil, nil)
	if err != nil {
		return "", err
	}
	return pr.r.ev.RenderString(s, vars)
}

func (pr *playRun) runSections(ctx context.Context, hosts []*hostState) {
	for _, sec := range pr.p.Sections() {
		failed := pr.runList(ctx, sec, hosts, nil)
		for _, h := range failed {
			pr.r.markFailed(h)
		}
		if pr.halted(ctx) {
			if pr.forced(ctx) {
				pr.flushHandlers(ctx, pr.handlerHosts(hosts))
			}
			break
		}
		pr.flushHandlers(ctx, pr.handlerHosts(hosts))
	}
}

// forced says whether handlers run although the play stopped or hosts
// failed: force_handlers, unless the run was cancelled.
func (pr *playRun) forced(ctx context.Context) bool {
	return (pr.p.ForceHandlers || pr.r.opts.ForceHandlers) && ctx.Err() == nil
}

// handlerHosts filters the hosts that run notified handlers: those still in
// the play, or under force_handlers also those that failed (but can still
// be reached).
func (pr *playRun) handlerHosts(hosts []*hostState) []*hostState {
	if !pr.forced(context.Background()) {
		return pr.alive(hosts, nil)
	}
	pr.r.mu.Lock()
	defer pr.r.mu.Unlock()
	out := make([]*hostState, 0, len(hosts))
	for _, h := range hosts {
		if !h.unreachable {
			out = append(out, h)
		}
	}
	return out
}

func (r *runner) markFailed(h *hostState) {
	r.mu.Lock()
	h.failed = true
	r.mu.Unlock()
}

// halted reports whether the play must stop for every host.
func (pr *playRun) halted(ctx context.Context) bool {
	if ctx.Err() != nil {
		return true
	}
	pr.mu.Lock()
	end := pr.endPlay
	pr.mu.Unlock()
	return end || pr.r.abortReason() != ""
}

// alive filters out hosts that ended, failed in the play or became unreachable.
func (pr *playRun) alive(hosts []*hostState, failed map[*hostState]bool) []*hostState {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	pr.r.mu.Lock()
	defer pr.r.mu.Unlock()
	out := make([]*hostState, 0, len(hosts))
	for _, h := range hosts {
		if !pr.ended[h] && !failed[h] && !h.failed && !h.unreachable {
			out = append(out, h)
		}
	}
	return out
}

// runList runs tasks in order and returns the hosts that failed in it; a
// failed host runs no further task of the list.
func (pr *playRun) runList(ctx context.Context, tasks []*playbook.Task, hosts []*hostState, il *includeLoop) []*hostState {
	failedSet := map[*hostState]bool{}
	var failed []*hostState
	for _, t := range tasks {
		if pr.halted(ctx) {
			break
		}
		active := pr.alive(hosts, failedSet)
		if len(active) == 0 {
			break
		}
		for _, h := range pr.runTask(ctx, t, active, il) {
			if !failedSet[h] {
				failedSet[h] = true
				failed = append(failed, h)
			}
		}
	}
	return failed
}

func (pr *playRun) runTask(ctx context.Context, t *playbook.Task, hosts []*hostState, il *includeLoop) []*hostState {
	if t.Kind != playbook.KindAction && pr.r.beforeStart(t) {
		pr.r.leaveOut([]*playbook.Task{t}, hosts, "before --start-at-task")
		return nil
	}
	switch t.Kind {
	case playbook.KindBlock:
		return pr.runBlock(ctx, t, hosts, il)
	case playbook.KindMeta:
		// As in Ansible, --tags selects meta tasks too: one left out is not
		// looked at (its when: may read what the left-out tasks set).
		if !pr.r.selected(t.Tags) {
			return nil
		}
		return pr.runMeta(ctx, t, hosts, il)
	case playbook.KindInclude:
		if !pr.r.selected(t.Tags) {
			pr.r.leaveOut([]*playbook.Task{t}, hosts, "left out by --tags or --skip-tags")
			return nil
		}
		return pr.runInclude(ctx, t, hosts, il)
	}
	// A task tagged always runs before --start-at-task's task too: such tasks
	// guard the run (the cluster's identity), and skipping them would let a
	// partial re-run do what a whole one refuses.
	if reached := pr.r.startAtReached(t); !pr.r.selected(t.Tags) || (!reached && !slices.Contains(t.Tags, "always")) {
		pr.r.leaveOut([]*playbook.Task{t}, hosts, pr.r.leftOutWhy())
		return nil
	}
	return pr.runAction(ctx, t, hosts, il, false)
}

// rescuable marks a context whose failures a rescue may still recover, so
// any_errors_fatal and max_fail_percentage wait for the rescue's outcome.
type rescuable struct{}

func (pr *playRun) runBlock(ctx context.Context, t *playbook.Task, hosts []*hostState, il *includeLoop) []*hostState {
	bctx := ctx
	if len(t.Rescue) > 0 {
		bctx = context.WithValue(ctx, rescuable{}, true)
	}
	failed := pr.runList(bctx, t.Block, hosts, il)
	if len(t.Rescue) > 0 && len(failed) > 0 && !pr.halted(ctx) {
		pr.mu.Lock()
		for _, h := range failed {
			delete(pr.failing, h)
		}
		pr.mu.Unlock()
		for _, h := range failed {
			pr.exposeFailure(h)
		}
		still := pr.runList(ctx, t.Rescue, failed, il)
		stillSet := map[*hostState]bool{}
		for _, h := range still {
			stillSet[h] = true
		}
		for _, h := range failed {
			if !stillSet[h] {
				pr.r.count(h, model.StatusRescued, "")
			}
		}
		failed = still
		if ctx.Value(rescuable{}) == nil {
			pr.checkFailLimits(t, failed)
		}
	}
	if len(t.Always) > 0 && ctx.Err() == nil {
		// always runs on the hosts that failed in the block too.
		failedAlways := pr.runList(ctx, t.Always, pr.alive(hosts, nil), il)
		for _, h := range failedAlways {
			if !slices.Contains(failed, h) {
				failed = append(failed, h)
			}
		}
	}
	return failed
}

func (pr *playRun) runMeta(ctx context.Context, t *playbook.Task, hosts []*hostState, il *includeLoop) []*hostState {
	var matching []*hostState
	var failed []*hostState
	for _, h := range hosts {
		vars, err := pr.vars(h, t, il, nil)
		ok := err == nil
		if ok {
			ok, err = pr.conds(t.When, vars)
		}
		if err != nil {
			pr.fail(h, t, err.Error())
			failed = append(failed, h)
			continue
		}
		if ok {
			matching = append(matching, h)
		}
	}
	switch t.Action {
	case "flush_handlers":
		pr.flushHandlers(ctx, matching)
	case "end_play":
		if len(matching) > 0 {
			pr.mu.Lock()
			pr.endPlay = true
			pr.mu.Unlock()
		}
	case "end_host":
		pr.mu.Lock()
		for _, h := range matching {
			pr.ended[h] = true
		}
		pr.mu.Unlock()
	case "clear_facts":
		for _, h := range matching {
			h.mu.Lock()
			h.facts, h.dyn, h.view = map[string]any{}, map[string]any{}, nil
			h.gathered = false
			h.version++
			h.mu.Unlock()
			h.bump()
		}
	}
	return failed
}

// notify records that h changed something a handler listens to.
func (pr *playRun) notify(ctx context.Context, t *playbook.Task, h *hostState, vars map[string]any) {
	for _, n := range t.Notify {
		name := n
		if strings.Contains(n, "{{") {
			s, err := pr.r.ev.RenderString(n, vars)
			if err != nil {
				pr.r.warn(pr.p.Name, "%s: notify %q: %v", t.Pos, n, err)
				continue
			}
			name = s
		}
		found := false
		for _, hd := range pr.p.Handlers {
			if hd.Name == name || slices.Contains(hd.Listen, name) {
				found = true
				pr.mu.Lock()
				if pr.notified[hd] == nil {
					pr.notified[hd] = map[*hostState]bool{}
				}
				pr.notified[hd][h] = true
				pr.mu.Unlock()
			}
		}
		if !found {
			pr.r.warn(pr.p.Name, "%s: notify %q: no handler of that name", t.Pos, name)
		}
	}
}

// flushHandlers runs, in declaration order, each handler notified by any of
// hosts, on the hosts that notified it.
func (pr *playRun) flushHandlers(ctx context.Context, hosts []*hostState) {
	for _, hd := range pr.p.Handlers {
		if pr.halted(ctx) && !pr.forced(ctx) {
			return
		}
		pr.mu.Lock()
		var run []*hostState
		for _, h := range hosts {
			if pr.notified[hd][h] {
				run = append(run, h)
				delete(pr.notified[hd], h)
			}
		}
		pr.mu.Unlock()
		run = pr.handlerHosts(run)
		if len(run) == 0 {
			continue
		}
		var failed []*hostState
		if hd.Kind == playbook.KindAction {
			failed = pr.runAction(ctx, hd, run, nil, true)
		} else {
			failed = pr.runTask(ctx, hd, run, nil)
		}
		for _, h := range failed {
			pr.r.markFailed(h)
		}
	}
}

// failure is what a rescue learns about the task that failed.
type failure struct {
	task *playbook.Task
	reg  map[string]any
}

// noteFailure remembers h's latest failure for a rescue.
func (pr *playRun) noteFailure(h *hostState, t *playbook.Task, reg map[string]any) {
	if t == nil {
		return
	}
	pr.mu.Lock()
	pr.lastFail[h] = failure{task: t, reg: reg}
	pr.mu.Unlock()
}

// exposeFailure sets failed_task and failed_result on a host entering a
// rescue (Ansible's ansible_failed_task and ansible_failed_result).
func (pr *playRun) exposeFailure(h *hostState) {
	pr.mu.Lock()
	f, ok := pr.lastFail[h]
	pr.mu.Unlock()
	if !ok {
		return
	}
	t := f.task
	task := map[string]any{"name": pr.taskName(t), "action": t.Action, "role": t.RoleName(), "pos": t.Pos.String()}
	result := f.reg
	if t.NoLog {
		result = map[string]any{"failed": true, "changed": false, "msg": "output hidden by no_log"}
	}
	h.setDyn(map[string]any{"failed_task": task, "failed_result": result})
}

// fail records a failure that happened outside a builtin (a bad template,
// a condition that does not evaluate).
func (pr *playRun) fail(h *hostState, t *playbook.Task, msg string) {
	e := model.Event{Kind: model.EventHostResult, Play: pr.p.Name, Host: h.name, Status: model.StatusFailed, Message: msg}
	if t != nil {
		e.Task, e.Role, e.Pos = pr.taskName(t), t.RoleName(), t.Pos.String()
	}
	pr.r.emit(e)
	pr.r.count(h, model.StatusFailed, msg)
	pr.mu.Lock()
	pr.failing[h] = true
	pr.mu.Unlock()
	pr.noteFailure(h, t, map[string]any{"failed": true, "changed": false, "msg": msg})
}

// checkFailLimits applies any_errors_fatal and max_fail_percentage after a
// task.
func (pr *playRun) checkFailLimits(t *playbook.Task, failed []*hostState) {
	if len(failed) == 0 {
		return
	}
	p := pr.p
	r := pr.r
	if p.AnyErrorsFatal {
		r.abort("any_errors_fatal: task %q failed on %s", pr.taskName(t), failed[0].name)
		return
	}
	if p.MaxFailPercentage >= 0 {
		pr.mu.Lock()
		n := len(pr.failing)
		pr.mu.Unlock()
		pct := 100 * float64(n) / float64(len(pr.hosts))
		if pct > p.MaxFailPercentage+1e-9 {
			r.abort("max_fail_percentage %g%% exceeded in play %q: %d of %d hosts failed (%.0f%%)", p.MaxFailPercentage, p.Name, n, len(pr.hosts), math.Round(pct))
		}
	}
}

// gather runs the setup builtin once per host per run and stores its facts
// under `facts`.
func (pr *playRun) gather(ctx context.Context, hosts []*hostState) []*hostState {
	r := pr.r
	setup, ok := r.pb.Options.Builtins["setup"]
	if !ok {
		// Load refuses gather_facts without setup; a Playbook built some
		// other way just has no facts.
		r.warn(pr.p.Name, "gather_facts: no setup builtin is registered; facts stay empty")
		return hosts
	}
	spec := setup.Spec()
	t := &playbook.Task{Name: "Gathering facts", Pos: pr.p.Pos, Kind: playbook.KindAction, Action: "setup", Impl: setup, Spec: spec, Args: spec.WithDefaults(nil), Play: pr.p, LoopVar: "item"}
	var need []*hostState
	for _, h := range hosts {
		h.mu.Lock()
		g := h.gathered
		h.mu.Unlock()
		if !g {
			need = append(need, h)
		}
	}
	if len(need) == 0 {
		return hosts
	}
	failed := pr.runAction(ctx, t, need, nil, false)
	for _, h := range failed {
		r.markFailed(h)
	}
	return pr.alive(hosts, nil)
}

type onceResult struct {
	done chan struct{}
	out  hostOutcome
}

func since(t time.Time) int64 { return time.Since(t).Milliseconds() }
