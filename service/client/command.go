package client

import (
	"context"
	"encoding/json"
	"fmt"
	"io"

	"github.com/mensylisir/kubexm/lifecycle"
	"github.com/mensylisir/kubexm/service/jobstore"
)

// CommandJob is the job a `run command` request becomes on a server: its
// worker runs the same verb with -o json there.
func CommandJob(req lifecycle.CommandRequest) *jobstore.Command {
	jc := &jobstore.Command{Argv: req.Argv, Nodes: req.Nodes, Groups: req.Groups, Limit: req.Limit, Shell: req.Shell, Become: req.Become,
		BecomeUser: req.BecomeUser, Forks: req.Forks}
	if req.Timeout > 0 {
		jc.Timeout = req.Timeout.String()
	}
	return jc
}

// FollowCommand follows the events of the command job id and tells each
// host's outcome to each as it comes back. The result is the command's
// outcome on every host when the job's run got to its summary; otherwise
// (cancelled, or the command never ran) the job's own error, or nil
// outcomes and no error for a job that ended well without one.
func (c *Client) FollowCommand(ctx context.Context, id string, each func(lifecycle.HostRun), errw io.Writer) ([]lifecycle.HostRun, error) {
	var results []lifecycle.HostRun
	summary := false
	j, err := c.FollowEvents(ctx, id, func(data []byte) {
		stored, ok := ServiceEvent(data, errw)
		switch {
		case !ok:
		case stored.Kind == "summary":
			summary = true
		case stored.Kind == "host_result":
			var r lifecycle.HostRun
			if err := json.Unmarshal(stored.Data, &r); err != nil {
				fmt.Fprintf(errw, "event %d does not decode: %v\n", stored.ID, err)
				return
			}
			results = append(results, r)
			each(r)
		}
	}, errw)
	if err != nil {
		return results, err
	}
	// The job fails when the command failed on a host; the summary says
	// so with the exit status of a local run. A job that ended without
	// one (cancelled, or the command never ran) says why itself.
	if !summary {
		if err := JobResult(j); err != nil {
			return results, err
		}
	}
	return results, nil
}
