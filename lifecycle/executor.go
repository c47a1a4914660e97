package lifecycle

import (
	"context"
	"io"
	"time"
)

// Executor runs what changes or checks a cluster: a lifecycle playbook,
// the certificates' check, a command on its hosts. On this machine (Local)
// or as jobs of a kubexm server (service/client.Jobs), shown alike: as
// clusterview.View is for what a command reads, a command chooses one once
// and runs through it without asking where.
type Executor interface {
	// Play runs req.Playbook, its events shown on req.Stdout as req asks
	// (Runner.Sink).
	Play(ctx context.Context, req Request) error
	// CertsCheck runs the certs-check playbook on the cluster of req and
	// returns its report (Runner.CertsCheck); the log goes to errw only
	// when it fails.
	CertsCheck(ctx context.Context, req Request, warnWithin time.Duration, errw io.Writer) ([]byte, error)
	// Command runs the command of req (cr, as Runner.PrepareCommand checked
	// it) and tells each host's outcome to each as it comes (RunCommand).
	Command(ctx context.Context, req CommandRequest, cr *CommandRun, each func(HostRun)) ([]HostRun, error)
}

// Local is the Executor of this machine: the Runner's own runs.
type Local struct{ Runner }

// Play runs req here.
func (l Local) Play(ctx context.Context, req Request) error {
	_, err := l.Run(ctx, req)
	return err
}

// Command runs cr here.
func (l Local) Command(ctx context.Context, _ CommandRequest, cr *CommandRun, each func(HostRun)) ([]HostRun, error) {
	return l.RunCommand(ctx, cr, each)
}
