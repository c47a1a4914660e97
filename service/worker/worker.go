// Package worker runs the jobs of the job store: it claims one, runs it as
// a `kubexm play` child process and records what the child reports.
//
// A child process, not a call into the engine in this process: cancelling a
// job is a SIGTERM, which `kubexm play` already answers by stopping the
// commands on the hosts and writing its journal; a worker killed with -9
// takes its child down with it (Pdeathsig), the kernel drops the child's
// lock on the cluster's work directory, and another worker resumes from the
// journal; a builtin that panics or leaks takes down one job, not the
// server. And a job runs exactly what `kubexm play` runs, flags included.
package worker

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/mensylisir/kubexm/schema/validate"

	"github.com/mensylisir/kubexm/engine/model"

	"github.com/mensylisir/kubexm/service/datadir"

	"golang.org/x/sys/unix"

	"github.com/mensylisir/kubexm/engine"
	"github.com/mensylisir/kubexm/internal/flock"
	"github.com/mensylisir/kubexm/schema"
	"github.com/mensylisir/kubexm/service/confine"
	"github.com/mensylisir/kubexm/service/jobstore"
	"github.com/mensylisir/kubexm/service/secretbox"
)

// Config is what a worker needs.
type Config struct {
	Store jobstore.Store
	Box   *secretbox.Box
	// Name identifies the worker in the job rows (host:pid by default).
	Name string
	// DataDir holds the clusters' work directories (DataDir/clusters/NAME:
	// journals, PKI, kubeconfigs), and must be the same directory for every
	// worker: a job resumed elsewhere continues from its journal there.
	DataDir string
	// Exe is the kubexm binary run for each job (this one by default).
	Exe string
	// Playbook turns a job's playbook name into the argument of `kubexm
	// play`.
	Playbook func(name string) (string, error)
	// GlobalArgs go before `play` (--ssh-host-key-checking, ...).
	GlobalArgs []string
	// Poll is how often an idle worker looks for a job; Heartbeat how
	// often a busy one says it is alive; TTL how long a silent worker's
	// job stays running before any worker marks it interrupted.
	Poll, Heartbeat, TTL time.Duration
	// MaxAttempts bounds how often an interrupted job is resumed.
	MaxAttempts int
	Metrics     *Metrics
	Log         *slog.Logger
	// MemoryLimit bounds a job child's address space (bytes, RLIMIT_AS,
	// with GOMEMLIMIT at a quarter of it), CPULimit its CPU time
	// (RLIMIT_CPU); each for every process it starts too. 0: none.
	MemoryLimit int64
	CPULimit    time.Duration
	// Guard checks each job's cluster.yaml and command again before the
	// run (the server did at registration, but the config may predate
	// its rules, or come through another server) and resolves the server
	// secrets it names.
	Guard Guard
}

// Guard is what a worker asks before a run (confine.Guard).
type Guard interface {
	Prepare(ctx context.Context, config []byte, nodes, groups []string, firstFD int) (confine.Prepared, error)
}

// Worker claims and runs jobs until its context ends.
type Worker struct{ c Config }

// New checks c and fills in its defaults.
func New(c Config) (*Worker, error) {
	if c.Store == nil || c.Box == nil || c.DataDir == "" || c.Playbook == nil || c.Guard == nil {
		return nil, errors.New("worker: store, secret key, data dir, playbook resolver and guard are required")
	}
	// A descriptor this process inherited without close-on-exec would
	// reach every job's child, and what it runs: none does.
	_ = unix.CloseRange(3, ^uint(0), unix.CLOSE_RANGE_CLOEXEC)
	if c.Name == "" {
		host, _ := os.Hostname()
		c.Name = host + ":" + strconv.Itoa(os.Getpid())
	}
	if c.Exe == "" {
		exe, err := os.Executable()
		if err != nil {
			return nil, fmt.Errorf("worker: the kubexm binary to run jobs with: %w", err)
		}
		c.Exe = exe
	}
	if c.Poll <= 0 {
		c.Poll = time.Second
	}
	if c.Heartbeat <= 0 {
		c.Heartbeat = 5 * time.Second
	}
	if c.TTL <= 0 {
		c.TTL = 30 * time.Second
	}
	if c.TTL <= 2*c.Heartbeat {
		return nil, fmt.Errorf("worker: the heartbeat TTL (%s) must be more than twice the heartbeat interval (%s)", c.TTL, c.Heartbeat)
	}
	if c.MaxAttempts <= 0 {
		c.MaxAttempts = 3
	}
	if c.Log == nil {
		c.Log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	abs, err := filepath.Abs(c.DataDir)
	if err != nil {
		return nil, err
	}
	c.DataDir = abs
	return &Worker{c: c}, nil
}

// Name is the worker's id in the job rows.
func (w *Worker) Name() string { return w.c.Name }

// Run claims and runs jobs until ctx ends. A job running then is stopped
// (as a cancel would) and handed back as interrupted, for another worker
// to resume.
func (w *Worker) Run(ctx context.Context) error {
	w.c.Log.Info("worker started", "worker", w.c.Name, "data_dir", w.c.DataDir)
	sweepJobTemps(w.c.Log)
	t := time.NewTicker(w.c.Poll)
	defer t.Stop()
	for {
		// Every worker reaps: jobs of a dead worker are found as long as
		// one worker lives.
		if ids, err := w.c.Store.ReapStale(ctx, w.c.TTL); err != nil && ctx.Err() == nil {
			w.c.Log.Error("reap stale jobs", "err", err)
		} else if len(ids) > 0 {
			w.c.Log.Warn("jobs interrupted: their worker stopped heart-beating", "jobs", ids)
			sweepJobTemps(w.c.Log)
		}
		for ctx.Err() == nil {
			j, err := w.c.Store.Claim(ctx, w.c.Name)
			if err != nil {
				if ctx.Err() == nil {
					w.c.Log.Error("claim a job", "err", err)
				}
				break
			}
			if j == nil {
				break
			}
			w.runJob(ctx, j)
		}
		select {
		case <-ctx.Done():
			w.c.Log.Info("worker stopped", "worker", w.c.Name)
			return nil
		case <-t.C:
		}
	}
}

// bg is for the records a job's end writes after ctx ended.
func bg() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), 30*time.Second)
}

func (w *Worker) event(ctx context.Context, j *jobstore.Job, kind string, st jobstore.Status, msg string) {
	data, _ := json.Marshal(map[string]any{"message": msg, "worker": w.c.Name, "attempt": j.Attempts})
	if err := w.c.Store.AddEvents(ctx, jobstore.Event{JobID: j.ID, Kind: kind, Status: string(st), Data: data}); err != nil {
		w.c.Log.Error("store event", "job", j.ID, "err", err)
	}
}

func (w *Worker) finish(j *jobstore.Job, st jobstore.Status, msg string) {
	ctx, cancel := bg()
	defer cancel()
	w.event(ctx, j, "job_end", st, msg)
	if err := w.c.Store.Finish(ctx, j.ID, w.c.Name, st, msg); err != nil {
		w.c.Log.Error("finish job", "job", j.ID, "status", st, "err", err)
		return
	}
	w.c.Metrics.finished(j, st)
	w.c.Log.Info("job finished", "job", j.ID, "cluster", j.Cluster, "status", st, "error", msg)
}

func (w *Worker) runJob(ctx context.Context, j *jobstore.Job) {
	log := w.c.Log.With("job", j.ID, "cluster", j.Cluster, "playbook", j.Playbook, "attempt", j.Attempts)
	if j.Attempts > w.c.MaxAttempts {
		w.finish(j, jobstore.Failed, fmt.Sprintf("interrupted %d times (its workers stopped); not resumed again: look at the workers' logs, then resume it by hand", j.Attempts-1))
		return
	}
	w.event(ctx, j, "job_start", jobstore.Running, fmt.Sprintf("worker %s runs the job (attempt %d%s)", w.c.Name, j.Attempts, map[bool]string{true: ", resuming run " + j.RunID}[j.Resume]))
	log.Info("job started", "resume", j.Resume)
	cv, err := w.c.Store.ClusterConfig(ctx, j.Cluster, j.ConfigVersion)
	if err != nil {
		w.finish(j, jobstore.Failed, fmt.Sprintf("cluster config: %v", err))
		return
	}
	plain, err := w.c.Box.Open(cv.Sealed, datadir.ConfigAAD(j.Cluster))
	if err != nil {
		w.finish(j, jobstore.Failed, fmt.Sprintf("cluster %s version %d: %v", j.Cluster, cv.Version, err))
		return
	}
	var nodes, groups []string
	if c := j.Options.Command; c != nil {
		nodes, groups = c.Nodes, c.Groups
	}
	prep, err := w.c.Guard.Prepare(ctx, plain, nodes, groups, firstKeyFD)
	if err != nil {
		w.finish(j, jobstore.Failed, fmt.Sprintf("cluster %s version %d: %v", j.Cluster, cv.Version, err))
		return
	}
	defer prep.Close()
	plain = prep.Config
	mask := func(s string) string { return s }
	if c, _, err := validate.Parse("cluster.yaml", plain); err == nil {
		if inv, err := schema.Inventory(c, ""); err == nil {
			mask = engine.Redactor(inv.Secrets())
		}
	}
	ref := ""
	if j.Options.Command != nil {
		// A command is not idempotent as a playbook's tasks are: one that
		// was interrupted may have run on some hosts, and is not run again.
		if j.Attempts > 1 || j.Resume {
			w.finish(j, jobstore.Failed, "the command was interrupted (its worker stopped) and is not run twice: its events show the hosts that answered; run it again by hand")
			return
		}
	} else if ref, err = w.c.Playbook(j.Playbook); err != nil {
		w.finish(j, jobstore.Failed, err.Error())
		return
	}
	st, msg := w.play(ctx, j, ref, plain, prep.Files, mask, log)
	if st == jobstore.Interrupted {
		ictx, cancel := bg()
		defer cancel()
		w.event(ictx, j, "job_interrupted", st, msg)
		if err := w.c.Store.Interrupt(ictx, j.ID, w.c.Name, msg); err != nil && !errors.Is(err, jobstore.ErrLost) {
			log.Error("hand back job", "err", err)
		}
		log.Warn("job interrupted", "reason", msg)
		return
	}
	if st == "" { // lost: another worker has it now
		return
	}
	w.finish(j, st, msg)
}

// commandArgs are the arguments of `kubexm run command` for a command
// job: one JSON line per host and a summary on stdout, as the worker
// stores them; its run is journaled in the cluster's work directory
// beside the playbooks' runs.
func commandArgs(c *jobstore.Command, workDir string) []string {
	args := []string{"run", "command", "-f", "/dev/fd/3", "--workdir", workDir, "-o", "json"}
	if len(c.Nodes) > 0 {
		args = append(args, "--nodes", strings.Join(c.Nodes, ","))
	}
	if len(c.Groups) > 0 {
		args = append(args, "--group", strings.Join(c.Groups, ","))
	}
	if c.Limit != "" {
		args = append(args, "--limit", c.Limit)
	}
	if c.Shell {
		args = append(args, "--shell")
	}
	if c.Become {
		args = append(args, "--become")
	}
	if c.BecomeUser != "" {
		args = append(args, "--become-user", c.BecomeUser)
	}
	if c.Timeout != "" {
		args = append(args, "--timeout", c.Timeout)
	}
	if c.Forks > 0 {
		args = append(args, "--forks", strconv.Itoa(c.Forks))
	}
	return append(append(args, "--"), c.Argv...)
}

// playArgs are the child's arguments; with varsFile the extra vars are
// read from that file (a descriptor of the child), not given on the
// command line, where every user of the machine reads them.
func playArgs(j *jobstore.Job, ref, dataDir, varsFile string) ([]string, error) {
	if j.Options.Command != nil {
		return commandArgs(j.Options.Command, datadir.WorkDir(dataDir, j.Cluster)), nil
	}
	args := []string{"play", ref, "-i", "/dev/fd/3", "--workdir", datadir.WorkDir(dataDir, j.Cluster), "-o", "json"}
	o := j.Options
	if o.OfflineBundle != "" {
		p := datadir.BundlePath(dataDir, j.Cluster, o.OfflineBundle)
		if p == "" {
			return nil, fmt.Errorf("offline bundle %q: not a sha256", o.OfflineBundle)
		}
		args = append(args, "--offline-bundle", p)
	}
	if o.Backup != "" {
		p := datadir.BackupPath(dataDir, j.Cluster, o.Backup)
		if p == "" {
			return nil, fmt.Errorf("backup %q: not the name of a backup archive", o.Backup)
		}
		args = append(args, "--backup", p)
	}
	if len(o.Tags) > 0 {
		args = append(args, "--tags", strings.Join(o.Tags, ","))
	}
	if len(o.SkipTags) > 0 {
		args = append(args, "--skip-tags", strings.Join(o.SkipTags, ","))
	}
	if o.Limit != "" {
		args = append(args, "--limit", o.Limit)
	}
	if o.Check {
		args = append(args, "--check")
	}
	if o.Diff {
		args = append(args, "--diff")
	}
	if varsFile != "" {
		args = append(args, "--extra-vars", "@"+varsFile)
	} else {
		for _, e := range o.ExtraVars {
			args = append(args, "--extra-vars", e)
		}
	}
	if j.Resume && j.RunID != "" {
		args = append(args, "--resume="+j.RunID)
	}
	return args, nil
}

// play runs the job's child and says how it ended; "" when the job was
// lost to another worker.
func (w *Worker) play(ctx context.Context, j *jobstore.Job, ref string, config []byte, keys []*os.File, mask func(string) string, log *slog.Logger) (jobstore.Status, string) {
	// The cluster.yaml reaches the child through a memfd, never a file:
	// its secrets are not written to disk in clear. /dev/fd/3 opens anew
	// for each read. Close-on-exec: the child gets it as fd 3, and the
	// child of another job running at once does not.
	fd, err := unix.MemfdCreate("cluster.yaml", unix.MFD_CLOEXEC)
	if err != nil {
		return jobstore.Failed, fmt.Sprintf("memfd: %v", err)
	}
	cfg := os.NewFile(uintptr(fd), "cluster.yaml")
	defer cfg.Close()
	if _, err := cfg.Write(config); err != nil {
		return jobstore.Failed, fmt.Sprintf("memfd: %v", err)
	}
	workDir := datadir.WorkDir(w.c.DataDir, j.Cluster)
	if err := os.MkdirAll(workDir, 0o700); err != nil {
		return jobstore.Failed, fmt.Sprintf("work dir: %v", err)
	}
	if err := flock.CheckPrivateDir(workDir); err != nil {
		return jobstore.Failed, fmt.Sprintf("work dir: %v", err)
	}
	vars, err := w.extraVarsFile(j)
	if err != nil {
		return jobstore.Failed, err.Error()
	}
	varsArg := ""
	if vars != nil {
		defer vars.Close()
		varsArg = fmt.Sprintf("/dev/fd/%d", varsFD)
	}
	pargs, err := playArgs(j, ref, w.c.DataDir, varsArg)
	if err != nil {
		return jobstore.Failed, err.Error()
	}
	// fd 4 carries the child's SSH connection events (--conn-events-fd).
	conns, connsW, err := os.Pipe()
	if err != nil {
		return jobstore.Failed, err.Error()
	}
	defer conns.Close()
	defer connsW.Close() // closed at Start already, unless an error came first
	args := append(append([]string{}, w.c.GlobalArgs...), "--conn-events-fd=4")
	args = append(args, pargs...)
	tmp, err := newJobTemp(j.ID)
	if err != nil {
		return jobstore.Failed, err.Error()
	}
	defer tmp.remove()
	env, err := childEnv(tmp.dir, w.c.DataDir)
	if err != nil {
		return jobstore.Failed, err.Error()
	}
	cmd := exec.Command(w.c.Exe, args...)
	cmd.ExtraFiles = append([]*os.File{cfg, connsW, vars}, keys...)
	cmd.Dir = workDir
	cmd.Env = env
	if w.c.MemoryLimit > 0 {
		// The Go runtime collects harder well before the hard limit.
		cmd.Env = append(cmd.Env, fmt.Sprintf("GOMEMLIMIT=%d", w.c.MemoryLimit/4))
	}
	// The child dies with the worker, however the worker dies; in a
	// process group of its own, so that a kill reaches what it started.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	// A pipe of our own rather than StdoutPipe: a command the child left
	// behind may hold its end open after the child exited, and the job
	// must end when the child does.
	stdout, pw, err := os.Pipe()
	if err != nil {
		return jobstore.Failed, err.Error()
	}
	defer stdout.Close()
	cmd.Stdout = pw
	var stderr tail
	cmd.Stderr = &stderr
	// The same for stderr, which exec copies: stop waiting for it soon
	// after the child is gone.
	cmd.WaitDelay = 2 * time.Second
	// Pdeathsig fires when the thread that started the child ends: keep
	// this goroutine on its thread until the child is gone.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	err = cmd.Start()
	pw.Close()
	connsW.Close()
	if err != nil {
		return jobstore.Failed, fmt.Sprintf("start %s: %v", w.c.Exe, err)
	}
	if err := w.limit(cmd.Process.Pid); err != nil {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		_ = cmd.Wait()
		return jobstore.Failed, err.Error()
	}
	// Masked: a command job's arguments may quote a secret of the config.
	log.Info("child started", "pid", cmd.Process.Pid, "args", mask(strings.Join(args, " ")))

	var mu sync.Mutex
	why := "" // why the worker stopped the child: cancelled, interrupted or lost
	stop := func(reason string, sig syscall.Signal) {
		mu.Lock()
		defer mu.Unlock()
		if why == "" {
			why = reason
			if sig == syscall.SIGKILL {
				_ = syscall.Kill(-cmd.Process.Pid, sig)
			} else {
				// kubexm play stops the commands it started itself.
				_ = cmd.Process.Signal(sig)
			}
		}
	}
	done := make(chan struct{})
	go func() {
		t := time.NewTicker(w.c.Heartbeat)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				stop("interrupted", syscall.SIGTERM)
				return
			case <-t.C:
				cancel, err := w.c.Store.Heartbeat(ctx, j.ID, w.c.Name)
				switch {
				case errors.Is(err, jobstore.ErrLost):
					// Marked interrupted while this worker could not
					// beat: another worker may run it now; stop at once.
					stop("lost", syscall.SIGKILL)
					return
				case err != nil:
					log.Error("heartbeat", "err", err)
				case cancel:
					stop("cancelled", syscall.SIGTERM)
				}
			}
		}
	}()

	followed := make(chan struct{})
	go func() {
		defer close(followed)
		w.follow(j, stdout, log)
	}()
	counted := make(chan struct{})
	go func() {
		defer close(counted)
		w.c.Metrics.followConns(j, conns)
	}()
	err = cmd.Wait()
	if errors.Is(err, exec.ErrWaitDelay) {
		err = nil // the child succeeded; a leftover held its stderr
	}
	close(done)
	select {
	case <-followed:
	case <-time.After(2 * time.Second):
		stdout.Close() // a leftover holds the pipe: stop reading
		<-followed
	}
	select {
	case <-counted:
	case <-time.After(2 * time.Second):
		conns.Close() // the child is gone, and its connections with it
		<-counted
	}
	mu.Lock()
	reason := why
	mu.Unlock()
	switch {
	case reason == "lost":
		log.Warn("job lost to another worker: child killed")
		return "", ""
	case err == nil:
		return jobstore.Succeeded, "" // it ended before a signal could stop it
	case reason == "interrupted":
		return jobstore.Interrupted, "the worker running it stopped (" + w.c.Name + "); another worker resumes it"
	case reason == "cancelled":
		return jobstore.Cancelled, "cancelled"
	}
	return jobstore.Failed, mask(stderr.message(err))
}

// limit puts the job's limits on the child pid, right after its start
// (exec offers no way to set them before; the child has run for
// microseconds): a template that renders gigabytes or a run that never
// ends stops there, not at the machine's end.
func (w *Worker) limit(pid int) error {
	if w.c.MemoryLimit > 0 {
		l := unix.Rlimit{Cur: uint64(w.c.MemoryLimit), Max: uint64(w.c.MemoryLimit)}
		if err := unix.Prlimit(pid, unix.RLIMIT_AS, &l, nil); err != nil {
			return fmt.Errorf("limit the job's memory: %w", err)
		}
	}
	if w.c.CPULimit > 0 {
		// SIGXCPU at the limit, SIGKILL a minute later.
		secs := uint64(max(1, w.c.CPULimit/time.Second))
		l := unix.Rlimit{Cur: secs, Max: secs + 60}
		if err := unix.Prlimit(pid, unix.RLIMIT_CPU, &l, nil); err != nil {
			return fmt.Errorf("limit the job's CPU time: %w", err)
		}
	}
	return nil
}

// The child's descriptors after the config (3) and the connection events
// (4): the extra vars (closed when the job has none), then the private
// keys of server secrets.
const (
	varsFD     = 5
	firstKeyFD = 6
)

// extraVarsFile is the job's extra vars as one mapping in a memfd, for
// --extra-vars @/dev/fd/5; nil for a job without sealed ones (none, or
// made before they were sealed: those go on the command line as stored).
func (w *Worker) extraVarsFile(j *jobstore.Job) (*os.File, error) {
	if len(j.SealedVars) == 0 {
		return nil, nil
	}
	plain, err := w.c.Box.Open(j.SealedVars, datadir.VarsAAD(j.ID))
	if err != nil {
		return nil, fmt.Errorf("extra vars: %w", err)
	}
	var list []string
	if err := json.Unmarshal(plain, &list); err != nil {
		return nil, fmt.Errorf("extra vars: %w", err)
	}
	vars, err := engine.ParseExtraVars(list)
	if err != nil {
		return nil, fmt.Errorf("extra vars: %w", err)
	}
	data, err := json.Marshal(vars)
	if err != nil {
		return nil, fmt.Errorf("extra vars: %w", err)
	}
	fd, err := unix.MemfdCreate("extra-vars.json", unix.MFD_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("memfd: %w", err)
	}
	f := os.NewFile(uintptr(fd), "extra-vars.json")
	if _, err := f.Write(data); err != nil {
		f.Close()
		return nil, fmt.Errorf("memfd: %w", err)
	}
	return f, nil
}

// childEnv is all a job's child gets of an environment: the server's holds
// what its jobs must not see (the secret key, the admin's credentials and
// agent, cloud tokens). Its own home and temp dir (no ~/.ssh of the
// server's user, no default key); the proxies, which downloads need.
func childEnv(tmp, dataDir string) ([]string, error) {
	home := filepath.Join(tmp, "home")
	tmpdir := filepath.Join(tmp, "tmp")
	for _, d := range []string{home, tmpdir} {
		if err := os.Mkdir(d, 0o700); err != nil {
			return nil, fmt.Errorf("job dir: %w", err)
		}
	}
	path := os.Getenv("PATH")
	if path == "" {
		path = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
	}
	// One known_hosts for all workers: a host key trusted by one is
	// trusted by the worker that resumes.
	kxHome := os.Getenv("KUBEXM_HOME")
	if kxHome == "" {
		kxHome = dataDir
	}
	env := []string{"PATH=" + path, "HOME=" + home, "TMPDIR=" + tmpdir, "KUBEXM_HOME=" + kxHome}
	for _, k := range []string{"http_proxy", "https_proxy", "no_proxy", "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY"} {
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	return env, nil
}

// follow reads the child's JSON events into the store and the metrics.
func (w *Worker) follow(j *jobstore.Job, r io.Reader, log *slog.Logger) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 16*1024*1024)
	for sc.Scan() {
		line := sc.Bytes()
		var e model.Event
		if err := json.Unmarshal(line, &e); err != nil {
			log.Warn("child printed a line that is no event", "err", err)
			continue
		}
		ev := jobstore.Event{JobID: j.ID, Time: e.Time, Kind: string(e.Kind), Task: e.Task, Host: e.Host, Status: string(e.Status), Data: append(json.RawMessage(nil), line...)}
		sctx, cancel := bg()
		if err := w.c.Store.AddEvents(sctx, ev); err != nil {
			log.Error("store event", "err", err)
		}
		switch e.Kind {
		case model.EventRunStart:
			j.RunID = e.Run
			if err := w.c.Store.SetProgress(sctx, j.ID, w.c.Name, e.Run, ""); err != nil {
				log.Warn("record run id", "err", err)
			}
		case model.EventTaskStart:
			if err := w.c.Store.SetProgress(sctx, j.ID, w.c.Name, "", e.Task); err != nil {
				log.Warn("record progress", "err", err)
			}
		}
		cancel()
		w.c.Metrics.event(j, e)
	}
	if err := sc.Err(); err != nil {
		log.Warn("read the child's events", "err", err)
	}
}

// tail keeps the end of what the child printed on stderr: the error of a
// failed run is its last line.
type tail struct {
	mu  sync.Mutex
	buf []byte
}

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if len(t.buf) > 8192 {
		t.buf = t.buf[len(t.buf)-8192:]
	}
	return len(p), nil
}

func (t *tail) message(err error) string {
	t.mu.Lock()
	defer t.mu.Unlock()
	lines := strings.Split(strings.TrimSpace(string(t.buf)), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if l := strings.TrimSpace(lines[i]); l != "" {
			return strings.TrimPrefix(l, "Error: ") + " (" + err.Error() + ")"
		}
	}
	return err.Error()
}
