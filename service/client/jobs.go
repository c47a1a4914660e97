package client

import (
	"context"
	"io"
	"time"

	"github.com/mensylisir/kubexm/lifecycle"
	"github.com/mensylisir/kubexm/service/jobstore"
)

// Jobs is the lifecycle.Executor of a kubexm server: each run is a job
// there. The cluster file is registered (a new config version), the
// offline bundle uploaded unless the server has it, the playbook queued
// with the options a job carries, and the job's events followed here and
// shown as a local run's are. Only the run itself moves: what a command
// does around it here (create's admin kubeconfig hint, upgrade's rollback
// on failure) is a local run's alone.
type Jobs struct {
	Options
	// Runner shows a job's events as its runs are shown (Runner.Sink).
	Runner lifecycle.Runner
	// Changed says whether a flag was given: those naming files or state
	// on this machine are refused (CheckJobFlags).
	Changed func(flag string) bool
	// Errw is told of the upload and of the events that are the service's.
	Errw io.Writer
}

// queue checks that a job can carry req and queues playbook with it on
// the server; it returns the client and the job's id.
func (j Jobs) queue(ctx context.Context, playbook string, req lifecycle.Request, more ...func(*jobstore.Options)) (*Client, string, error) {
	if err := CheckJobFlags(playbook, j.Server, req, j.Changed); err != nil {
		return nil, "", err
	}
	c, err := New(j.Options)
	if err != nil {
		return nil, "", err
	}
	id, err := c.QueueRun(ctx, playbook, req, j.Errw, more...)
	return c, id, err
}

// Play runs req.Playbook as a job and shows its events on req.Stdout.
func (j Jobs) Play(ctx context.Context, req lifecycle.Request) error {
	c, id, err := j.queue(ctx, req.Playbook, req)
	if err != nil {
		return err
	}
	sink, stop := j.Runner.Sink(req.Stdout, req)
	defer stop()
	return c.FollowJob(ctx, id, sink, j.Errw)
}

// CertsCheck runs the certs-check playbook as a job (CertsCheckRun: the
// cluster file and its -e values go, the work directory and roles there
// are the server's) and fetches the report it left.
func (j Jobs) CertsCheck(ctx context.Context, req lifecycle.Request, within time.Duration, errw io.Writer) ([]byte, error) {
	run, err := CertsCheckRun(lifecycle.Request{Inventory: req.Inventory, Output: req.Output, ExtraVars: req.ExtraVars}, within)
	if err != nil {
		return nil, err
	}
	c, id, err := j.queue(ctx, lifecycle.CertsCheckPlaybook, run)
	if err != nil {
		return nil, err
	}
	return c.FollowCertsCheck(ctx, id, errw)
}

// Command runs the command of req as a job (CommandJob), whose worker
// checks and runs it there. A job that failed returns no outcomes: the
// hosts that answered were shown as they came, and the summary of a run
// here is not written for it.
func (j Jobs) Command(ctx context.Context, req lifecycle.CommandRequest, _ *lifecycle.CommandRun, each func(lifecycle.HostRun)) ([]lifecycle.HostRun, error) {
	c, id, err := j.queue(ctx, jobstore.CommandPlaybook, lifecycle.Request{Inventory: req.Inventory}, func(o *jobstore.Options) { o.Command = CommandJob(req) })
	if err != nil {
		return nil, err
	}
	results, err := c.FollowCommand(ctx, id, each, j.Errw)
	if err != nil {
		return nil, err
	}
	return results, nil
}
