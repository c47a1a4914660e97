package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/mensylisir/kubexm/engine"
	"github.com/mensylisir/kubexm/engine/output"
	"github.com/mensylisir/kubexm/lifecycle"
)

// CertsCheckRun is the run of the certs-check playbook as a job: req's
// variables with the warning window within, a check run. -e
// certs_report_path is refused: the report is read from the cluster's
// work directory on the server.
func CertsCheckRun(req lifecycle.Request, within time.Duration) (lifecycle.Request, error) {
	if extra, err := engine.ParseExtraVars(req.ExtraVars); err != nil {
		return req, err
	} else if _, ok := extra["certs_report_path"]; ok {
		return req, errors.New("-e certs_report_path does not go to a kubexm server: the report is read from the cluster's work directory there")
	}
	vars, err := json.Marshal(map[string]any{"certs_warn_days": int(within / (24 * time.Hour))})
	if err != nil {
		return req, err
	}
	req.Check = true
	req.ExtraVars = append(append([]string{}, req.ExtraVars...), string(vars))
	return req, nil
}

// FollowCertsCheck follows job id (a CertsCheckRun) and fetches the
// report it left (CertsReport). As a local check, its log is shown on
// errw only when it fails.
func (c *Client) FollowCertsCheck(ctx context.Context, id string, errw io.Writer) ([]byte, error) {
	var log bytes.Buffer
	sink, stop := output.Human(&log, 0)
	err := c.FollowJob(ctx, id, sink, &log)
	stop()
	if err != nil {
		_, _ = io.Copy(errw, &log)
		return nil, err
	}
	data, err := c.CertsReport(ctx, id)
	if errors.Is(err, ErrNoReport) {
		return nil, fmt.Errorf("%w; its log:\n%s", err, log.String())
	}
	return data, err
}
