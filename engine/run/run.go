// Package run runs a loaded playbook (engine/playbook) on an inventory:
// the strategies and batches, task execution on hosts in parallel,
// variables and their precedence, handlers and --start-at-task, reporting
// events (engine/model) and journaling outcomes (engine/journal). The
// connections to the hosts and their locks (engine/run/hostconn) and the
// files a task's builtin reads (engine/run/taskfiles) are its parts. It
// imports no loader: a dynamic include loads through the function the
// loader left on it.
package run

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/mensylisir/kubexm/engine/hostlock"
	"github.com/mensylisir/kubexm/engine/journal"
	"github.com/mensylisir/kubexm/engine/model"
	"github.com/mensylisir/kubexm/engine/playbook"
	"github.com/mensylisir/kubexm/engine/run/hostconn"
	"github.com/mensylisir/kubexm/engine/run/taskfiles"
	"github.com/mensylisir/kubexm/engine/variables"

	"github.com/mensylisir/kubexm/engine/eval"
	"github.com/mensylisir/kubexm/engine/transport"
	"github.com/mensylisir/kubexm/engine/transport/local"
	"github.com/mensylisir/kubexm/inventory"
)

// RunOptions control one run of a playbook.
type RunOptions struct {
	// Connect opens a transport to a remote host. Hosts marked Local and
	// localhost use the local transport instead.
	Connect func(ctx context.Context, h *inventory.Host) (transport.Transport, error)
	// Control is the control machine's transport; nil means the local one.
	Control transport.Transport
	// Forks bounds how many task-hosts run at once (default 50).
	Forks     int
	Check     bool
	Diff      bool
	Tags      []string
	SkipTags  []string
	StartAt   string // task name or glob
	Limit     string // host pattern further restricting every play
	ExtraVars map[string]any
	WorkDir   string // the cluster's work directory; the journal goes to runs/
	Resume    string // "" for a fresh run, "last", or a run id
	// ResumeRerunsControl runs again, when resuming, the tasks whose
	// product is on the control machine (journal.Record.Control): the
	// resuming process may not have the work directory of the run it
	// resumes (operator mode's new leader, in a new pod).
	ResumeRerunsControl bool
	Output              model.Sink
	Verbosity           int
	Version             string         // kubexm version, exposed as kubexm_version
	Defaults            map[string]any // built-in defaults, the lowest variables
	NoJournal           bool           // do not write a journal (list and check modes)
	// ForceHandlers runs notified handlers on hosts that failed later, as
	// the play keyword force_handlers does.
	ForceHandlers bool
	// HostLock takes a lock on every host for the whole run, so two runs
	// that change the same host refuse to overlap: each remote host's, and
	// this machine's once for all its connection: local hosts.
	HostLock bool
	// LockFirst names the host whose lock is taken before any other and
	// before the first play (a cluster's first master): two runs started at
	// once then never each hold a part of the hosts, and the one that waits
	// is refused naming the holder before it has done anything.
	LockFirst string
	// LockWait is how long a run waits for a host's lock (0: 15 s).
	LockWait time.Duration
	// BreakLock ends the run that holds a host's lock (its process on the
	// host, which the holder's control machine may no longer be there to
	// end) and takes the lock, saying whose it was.
	BreakLock bool
	// LockFile replaces the hosts' lock file: the engine's tests lock this
	// machine, as its connection: local hosts do, and must not wait for
	// other packages' tests that lock it at the same time.
	LockFile string
}

// ErrFailed is returned (wrapped) when some host failed; the recap says which.
var ErrFailed = errors.New("run failed")

type runner struct {
	pb    *playbook.Playbook
	inv   *inventory.Inventory
	opts  RunOptions
	ev    *eval.Evaluator
	out   model.Sink
	outMu sync.Mutex
	jr    *journal.Journal
	red   *journal.Masker
	// jobs feeds the Forks long-lived workers that run task-hosts; reusing
	// goroutines keeps their grown stacks, which matters at 1000 hosts.
	jobs    chan func()
	workers sync.WaitGroup
	runID   string
	control transport.Transport
	groups  map[string]any

	mu        sync.Mutex
	hosts     map[string]*hostState
	order     []*hostState
	recap     *model.Recap
	started   bool // --start-at-task reached
	sel       *playbook.Selection
	hostvars  hostvarsCache
	files     *taskfiles.Files
	aborted   string
	startTime time.Time
	orders    sync.Map // variables.OrderKey -> variables.VarOrder: renderOrder's cache
	memo      *variables.Memo
	conns     *hostconn.Pool
}

// Run runs every play of pb against inv. The recap is returned even when the
// run fails; the error wraps ErrFailed when a host failed, or says why the
// run could not start or was cancelled.
func Run(ctx context.Context, pb *playbook.Playbook, inv *inventory.Inventory, opts RunOptions) (*model.Recap, error) {
	if pb == nil || inv == nil {
		return nil, errors.New("engine.Run: playbook and inventory are required")
	}
	if opts.Forks <= 0 {
		opts.Forks = 50
	}
	if opts.Output == nil {
		opts.Output = model.SinkFunc(func(model.Event) {})
	}
	if err := playbook.CheckLimit(inv, opts.Limit); err != nil {
		return nil, err
	}
	r, err := newRunner(pb, inv, opts)
	if err != nil {
		return nil, err
	}
	r.startWorkers()
	r.emit(model.Event{Kind: model.EventRunStart, Message: fmt.Sprintf("playbook %s (%s)", pb.Name, pb.Path)})
	// Only a lock held by another run ends the run here: a host that cannot
	// be reached is reported by the plays, as every other host is.
	if opts.HostLock && opts.LockFirst != "" {
		if _, err := r.transportFor(ctx, opts.LockFirst); errors.Is(err, hostlock.ErrBusy) {
			r.stopWorkers()
			_ = r.jr.Close("failed")
			return nil, fmt.Errorf("the lock of the cluster: %w", err)
		}
	}
	for i, p := range pb.Plays {
		if ctx.Err() != nil || r.abortReason() != "" {
			break
		}
		if r.playSelected(i, p) {
			r.runPlay(ctx, p)
		} else {
			r.leaveOutPlay(p, r.leftOutWhy())
		}
	}
	r.stopWorkers()
	r.files.Remove()
	return r.finish(ctx)
}

// newRunner sets a run up: the selected tasks, the hosts and the journal.
func newRunner(pb *playbook.Playbook, inv *inventory.Inventory, opts RunOptions) (*runner, error) {
	sel, err := playbook.SelectTasks(pb, inv.Vars, playbook.SelectOptions{Tags: opts.Tags, SkipTags: opts.SkipTags, StartAt: opts.StartAt})
	if err != nil {
		return nil, err
	}
	now := time.Now()
	r := &runner{
		sel: sel,
		pb:  pb, inv: inv, opts: opts, ev: pb.Eval, out: opts.Output,
		jobs:  make(chan func()),
		runID: journal.NewRunID(now), hosts: map[string]*hostState{},
		red:       journal.NewMasker(inv.Secrets()),
		startTime: now,
		started:   opts.StartAt == "",
	}
	if r.ev == nil {
		r.ev = eval.New()
	}
	r.memo = variables.NewMemo(r.ev.Closed)
	r.files = taskfiles.New(pb, r.ev)
	r.recap = &model.Recap{RunID: r.runID, Hosts: map[string]*model.HostStats{}}
	r.control = opts.Control
	if r.control == nil {
		// The work directory keeps the sums of the artifacts in it, so a
		// re-run does not read hundreds of MB again (transport.SumCache).
		r.control = local.New(inventory.Localhost, local.WithSums(transport.WorkDirSums(opts.WorkDir)))
	}
	if err := r.initHosts(); err != nil {
		return nil, err
	}
	r.conns = hostconn.New(inv, r.connOptions())
	if err := r.openJournal(); err != nil {
		return nil, err
	}
	return r, nil
}

// connOptions say how the run reaches its hosts, and as whom it locks them.
func (r *runner) connOptions() hostconn.Options {
	ctl, _ := os.Hostname()
	o := r.opts
	return hostconn.Options{Connect: o.Connect, Control: r.control, Lock: o.HostLock, Wait: o.LockWait, Break: o.BreakLock, File: o.LockFile,
		Holder: fmt.Sprintf("kubexm run %s (playbook %s) from %s pid %d, since %s",
			r.runID, r.pb.Name, ctl, os.Getpid(), r.startTime.UTC().Format(time.RFC3339)),
		Warn: func(format string, args ...any) { r.warn("", format, args...) }}
}

// startWorkers starts the run's workers, at most --forks of them.
func (r *runner) startWorkers() {
	for range min(r.opts.Forks, len(r.order)) {
		r.workers.Add(1)
		go func() {
			defer r.workers.Done()
			for job := range r.jobs {
				job()
			}
		}()
	}
}

// stopWorkers waits for the workers to finish and closes the connections.
func (r *runner) stopWorkers() {
	close(r.jobs)
	r.workers.Wait()
	r.conns.Close()
}

// finish completes the recap, closes the journal, reports the recap and
// says why the run failed.
func (r *runner) finish(ctx context.Context) (*model.Recap, error) {
	rc := r.recap
	slices.Sort(rc.Order)
	rc.Duration = time.Since(r.startTime)
	rc.Aborted = r.aborted
	rc.Cancelled = ctx.Err() != nil
	for _, s := range rc.Hosts {
		if s.Failed > 0 || s.Unreachable > 0 {
			rc.Failed = true
		}
	}
	if r.aborted != "" {
		rc.Failed = true
	}
	outcome := "ok"
	switch {
	case rc.Cancelled:
		outcome = "cancelled"
	case rc.Failed:
		outcome = "failed"
	}
	jerr := r.jr.Close(outcome)
	r.emit(model.Event{Kind: model.EventRecap, Recap: rc, DurationMS: rc.Duration.Milliseconds(), Status: model.Status(outcome)})
	switch {
	case rc.Cancelled:
		return rc, fmt.Errorf("run %s cancelled: %w", r.runID, context.Cause(ctx))
	case !r.started && !rc.Failed:
		return rc, fmt.Errorf("--start-at-task %q matched no task, so nothing ran; `--list-tasks` shows the task names", r.opts.StartAt)
	case rc.Failed:
		why := r.aborted
		if why == "" {
			why = model.FailedHosts(rc)
		}
		if r.jr == nil {
			// No journal was written (--no-journal, --check): there is
			// nothing to resume from.
			return rc, fmt.Errorf("%w: %s", ErrFailed, why)
		}
		return rc, fmt.Errorf("%w: %s (resume with --resume=%s)", ErrFailed, why, r.runID)
	}
	return rc, jerr
}

func (r *runner) initHosts() error {
	defaults := map[string]any{}
	maps.Copy(defaults, r.opts.Defaults)
	defaults["kubexm_version"] = r.opts.Version
	defaults["playbook_name"] = r.pb.Name
	defaults["playbook_version"] = r.pb.Version
	defaults["check_mode"] = r.opts.Check
	defaults["run_id"] = r.runID
	defaults["work_dir"] = r.opts.WorkDir
	// What the cluster record on the hosts says the cluster was last run
	// with (roles/identity): the inventory's hash, secrets masked.
	defaults["inventory_sha256"] = journal.InventoryHash(r.inv, r.red)
	for i := range r.inv.Hosts {
		h := &r.inv.Hosts[i]
		hs := newHostState(h.Name, h, r.inv, defaults)
		r.hosts[h.Name] = hs
		r.order = append(r.order, hs)
	}
	if _, ok := r.hosts[inventory.Localhost]; !ok {
		hs := newHostState(inventory.Localhost, nil, r.inv, defaults)
		r.hosts[inventory.Localhost] = hs
		r.order = append(r.order, hs)
	}
	r.hostvars.hosts = r.order
	secrets := map[string]bool{}
	for _, s := range r.inv.Secrets() {
		secrets[s] = true
	}
	for _, h := range r.order {
		h.changes = &r.hostvars.version
		if err := r.splitInventory(h, secrets); err != nil {
			return err
		}
	}
	groups := map[string]any{}
	all := make([]any, 0, len(r.inv.Hosts))
	for _, h := range r.inv.Hosts {
		all = append(all, h.Name)
	}
	groups["all"] = all
	for g, members := range r.inv.Groups {
		l := make([]any, len(members))
		for i, m := range members {
			l[i] = m
		}
		groups[g] = l
	}
	r.groups = groups
	return nil
}

func (r *runner) openJournal() error {
	if r.opts.NoJournal || r.opts.WorkDir == "" {
		if r.opts.Resume != "" {
			return errors.New("--resume needs a work directory holding earlier runs")
		}
		return nil
	}
	invHash := journal.InventoryHash(r.inv, r.red)
	hdr := journal.Record{Run: r.runID, Playbook: r.pb.Name, PlaybookHash: r.pb.Hash, InventoryHash: invHash}
	var done map[string]journal.Record
	if r.opts.Resume != "" {
		id := r.opts.Resume
		if id == "last" {
			var err error
			if id, err = journal.LastRunOf(r.opts.WorkDir, r.pb.Name); err != nil {
				return err
			}
		}
		var err error
		if done, err = journal.Read(r.opts.WorkDir, id, r.pb.Name, r.pb.Hash, invHash); err != nil {
			return err
		}
		hdr.ResumedFrom = id
	}
	j, err := journal.Open(r.opts.WorkDir, r.runID, hdr)
	if err != nil {
		return err
	}
	j.Done, j.From, j.RerunControl = done, hdr.ResumedFrom, r.opts.ResumeRerunsControl
	r.jr = j
	r.recap.Journal = j.Dir
	return nil
}

func (r *runner) emit(e model.Event) {
	e.Time = time.Now()
	e.Run = r.runID
	e.Task = r.red.Str(e.Task)
	e.Item = r.red.Str(e.Item)
	e.Delegate = r.red.Str(e.Delegate)
	e.Message = r.red.Str(e.Message)
	e.Stdout = r.red.Str(e.Stdout)
	e.Stderr = r.red.Str(e.Stderr)
	e.Diff = r.red.Str(e.Diff)
	r.outMu.Lock()
	defer r.outMu.Unlock()
	r.out.Emit(e)
}

func (r *runner) warn(play string, format string, args ...any) {
	r.emit(model.Event{Kind: model.EventWarning, Play: play, Message: fmt.Sprintf(format, args...)})
}

// countOutcome counts a task's outcome on h; an ignored failure that changed
// the host counts as changed too, as in Ansible's recap.
func (r *runner) countOutcome(h *hostState, out hostOutcome, msg string) {
	r.count(h, out.status, msg)
	if changed, _ := out.reg["changed"].(bool); changed && out.status == model.StatusIgnored {
		r.mu.Lock()
		r.recap.HostStats(h.name).Changed++
		r.mu.Unlock()
	}
}

func (r *runner) count(h *hostState, st model.Status, msg string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.recap.HostStats(h.name)
	switch st {
	case model.StatusOK:
		s.OK++
	case model.StatusChanged:
		s.OK++
		s.Changed++
	case model.StatusSkipped:
		s.Skipped++
	case model.StatusFailed:
		s.Failed++
		if s.Error == "" {
			s.Error = r.red.Str(msg)
		}
	case model.StatusIgnored:
		// As Ansible: the play goes on past an ignored failure, so it is
		// ok as well as ignored.
		s.OK++
		s.Ignored++
	case model.StatusRescued:
		s.Rescued++
		// A rescued failure no longer fails the host.
		if s.Failed > 0 {
			s.Failed--
			if s.Failed == 0 {
				s.Error = ""
			}
		}
	case model.StatusUnreachable:
		s.Unreachable++
		if s.Error == "" {
			s.Error = r.red.Str(msg)
		}
	}
}

// transportFor opens (once per run) the transport of a host.
func (r *runner) transportFor(ctx context.Context, name string) (transport.Transport, error) {
	return r.conns.Get(ctx, name)
}

// interrupted records that a signal stopped task t, named name, on host.
func (r *runner) interrupted(host, name string, t *playbook.Task) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.recap.Interrupted = append(r.recap.Interrupted, model.Interruption{Host: host, Task: r.red.Str(name), Pos: t.Where()})
}

// abort stops the run for the given reason; the first reason wins.
func (r *runner) abort(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.aborted == "" {
		r.aborted = fmt.Sprintf(format, args...)
	}
}

func (r *runner) abortReason() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.aborted
}

// selected applies --tags and --skip-tags to a task's tags.
func (r *runner) selected(tags []string) bool {
	return playbook.TagsSelected(tags, r.opts.Tags, r.opts.SkipTags)
}

// startAtReached applies --start-at-task: tasks before the one it names are
// not run. The playbook says which task that is before the run
// (selectTasks); when it cannot (the task may be in a file named at run
// time), the first task whose name matches is.
func (r *runner) startAtReached(t *playbook.Task) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.started && (t == r.sel.Start || (r.sel.Start == nil && playbook.StartMatches(r.opts.StartAt, t))) {
		r.started = true
	}
	return r.started
}
