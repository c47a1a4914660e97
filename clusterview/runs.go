package clusterview

import (
	"fmt"
	"time"

	"github.com/mensylisir/kubexm/engine"
	"github.com/mensylisir/kubexm/engine/model"
)

// RunEntry is one run as get runs lists it (-o json|yaml: a list of these).
type RunEntry struct {
	ID          string  `json:"id"`
	Playbook    string  `json:"playbook"`
	Start       string  `json:"start"`
	Seconds     float64 `json:"seconds,omitempty"`
	Outcome     string  `json:"outcome"`
	ResumedFrom string  `json:"resumed_from,omitempty"`
}

// RunList lists the runs journaled in the work directory dir, oldest
// first; a run without an outcome is running or was killed.
func RunList(dir string) ([]RunEntry, error) {
	runs, err := engine.Runs(dir)
	if err != nil {
		return nil, fmt.Errorf("the runs of %s: %w", dir, err)
	}
	out := make([]RunEntry, 0, len(runs))
	for _, r := range runs {
		v := RunEntry{ID: r.ID, Playbook: r.Playbook, Start: r.Start.UTC().Format(time.RFC3339), Outcome: r.Outcome, ResumedFrom: r.ResumedFrom}
		if v.Outcome == "" {
			v.Outcome = "running or killed"
		}
		if !r.End.IsZero() {
			v.Seconds = r.End.Sub(r.Start).Round(100 * time.Millisecond).Seconds()
		}
		out = append(out, v)
	}
	return out, nil
}

// RunLog is the run id of the work directory dir (or the last one) and
// its tasks: of host only when set, and only those that failed, were
// unreachable or whose failure was ignored when failedOnly.
func RunLog(dir, id, host string, failedOnly bool) (engine.RunInfo, []engine.LogEntry, error) {
	info, entries, err := engine.RunLog(dir, id)
	if err != nil {
		return info, nil, err
	}
	var shown []engine.LogEntry
	for _, e := range entries {
		if host != "" && e.Host != host {
			continue
		}
		if failedOnly && e.Status != model.StatusFailed && e.Status != model.StatusUnreachable && e.Status != model.StatusIgnored {
			continue
		}
		shown = append(shown, e)
	}
	return info, shown, nil
}
