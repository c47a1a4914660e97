package lifecycle

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"
)

// CertsCheckPlaybook lists every certificate, kubeconfig and
// service-account key on the hosts and writes the report.
const CertsCheckPlaybook = "certs-check"

// CertsCheck runs the certs-check playbook with req (its inventory, work
// directory, roles and -e values) and returns the report it wrote, in which
// files expiring within warnWithin are marked. The playbook only reads: as
// a check run it takes no lock and writes no journal, so it can run beside
// another kubexm run. Its log goes to errw only when it fails.
func (r Runner) CertsCheck(ctx context.Context, req Request, warnWithin time.Duration, errw io.Writer) ([]byte, error) {
	tmp, err := os.MkdirTemp("", "kubexm-certs-check-")
	if err != nil {
		return nil, fmt.Errorf("temporary directory: %w", err)
	}
	defer os.RemoveAll(tmp)
	reportPath := filepath.Join(tmp, "report.json")
	vars, err := json.Marshal(map[string]any{"certs_warn_days": int(warnWithin / (24 * time.Hour)), "certs_report_path": reportPath})
	if err != nil {
		return nil, err
	}
	var log bytes.Buffer
	req.Playbook, req.Check, req.Output, req.Stdout = CertsCheckPlaybook, true, "text", &log
	req.ExtraVars = append(append([]string{}, req.ExtraVars...), string(vars))
	if _, err := r.Run(ctx, req); err != nil {
		_, _ = io.Copy(errw, &log)
		return nil, err
	}
	data, err := os.ReadFile(reportPath)
	if err != nil {
		return nil, fmt.Errorf("the certs-check playbook wrote no report (%w); its log:\n%s", err, log.String())
	}
	return data, nil
}
