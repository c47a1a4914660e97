package clusterview

import (
	"fmt"
	"io"
	"time"

	"github.com/mensylisir/kubexm/engine"
	"github.com/mensylisir/kubexm/engine/journal"
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

// Log is what kubexm logs shows of a run (-o json|yaml: this document,
// its keys in the order they always had).
type Log struct {
	Outcome  string            `json:"outcome"`
	Playbook string            `json:"playbook"`
	Run      string            `json:"run"`
	Tasks    []engine.LogEntry `json:"tasks"`
	info     engine.RunInfo
}

// RunLog is the run id of the work directory dir (or the last one) and
// its tasks: of host only when set, and only those that failed, were
// unreachable or whose failure was ignored when failedOnly.
func RunLog(dir, id, host string, failedOnly bool) (*Log, error) {
	info, entries, err := engine.RunLog(dir, id)
	if err != nil {
		return nil, err
	}
	l := &Log{Outcome: info.Outcome, Playbook: info.Playbook, Run: info.ID, info: info}
	for _, e := range entries {
		if host != "" && e.Host != host {
			continue
		}
		if failedOnly && e.Status != model.StatusFailed && e.Status != model.StatusUnreachable && e.Status != model.StatusIgnored {
			continue
		}
		l.Tasks = append(l.Tasks, e)
	}
	return l, nil
}

// Write prints the run for people: a line per task and host, and under a
// failure its message and output's tail (journal.WriteLog).
func (l *Log) Write(w io.Writer) error {
	journal.WriteLog(w, l.info, l.Tasks)
	return nil
}
