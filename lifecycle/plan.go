package lifecycle

import (
	"fmt"
	"io"
	"sort"

	"github.com/mensylisir/kubexm/engine/model"
)

// HostPlan is what one host would see.
type HostPlan struct {
	Host      string       `json:"host"`
	Changes   []PlanChange `json:"changes"`
	Unchanged int          `json:"unchanged"`
	Skipped   int          `json:"skipped"`
	Failed    []PlanChange `json:"failed,omitempty"`
}

// PlanChange is a task that would change a host, or failed on it.
type PlanChange struct {
	Task    string `json:"task"`
	Pos     string `json:"pos,omitempty"`
	Message string `json:"message,omitempty"`
	Diff    string `json:"diff,omitempty"`
}

// Plan collects the host results of a check run (kubexm plan cluster): a
// sink of its events.
type Plan struct {
	hosts map[string]*HostPlan
	// Next, when set, receives every event (the JSON lines of -o json);
	// else progress and warnings go to warn.
	Next model.Sink
	warn io.Writer
}

// NewPlan is an empty plan that tells the run's progress on warn.
func NewPlan(warn io.Writer) *Plan {
	return &Plan{hosts: map[string]*HostPlan{}, warn: warn}
}

// Hosts are the plans of the hosts, by name.
func (p *Plan) Hosts() []*HostPlan {
	hosts := make([]*HostPlan, 0, len(p.hosts))
	for _, h := range p.hosts {
		hosts = append(hosts, h)
	}
	sort.Slice(hosts, func(i, j int) bool { return hosts[i].Host < hosts[j].Host })
	return hosts
}

// Emit takes one event of the check run.
func (p *Plan) Emit(e model.Event) {
	if p.Next != nil {
		p.Next.Emit(e)
	} else {
		// The plan is printed at the end; meanwhile stderr says how far
		// the check run is.
		switch e.Kind {
		case model.EventWarning:
			fmt.Fprintf(p.warn, "warning: %s\n", e.Message)
		case model.EventPlayStart:
			fmt.Fprintf(p.warn, "checking: %s\n", e.Play)
		}
	}
	// A looped task reports once per host besides its items; the items are
	// in that report's diff.
	if e.Kind != model.EventHostResult || e.Item != "" || e.Host == "" {
		return
	}
	h, ok := p.hosts[e.Host]
	if !ok {
		h = &HostPlan{Host: e.Host}
		p.hosts[e.Host] = h
	}
	c := PlanChange{Task: taskName(e), Pos: e.Pos, Message: e.Message, Diff: e.Diff}
	switch e.Status {
	case model.StatusChanged:
		h.Changes = append(h.Changes, c)
	case model.StatusOK:
		h.Unchanged++
	case model.StatusSkipped:
		h.Skipped++
	case model.StatusFailed, model.StatusUnreachable:
		h.Failed = append(h.Failed, c)
	}
}

func taskName(e model.Event) string {
	if e.Role != "" {
		return e.Role + " : " + e.Task
	}
	return e.Task
}

// PlanSummary is the plan of every host with its totals (the last line
// of plan cluster -o json).
type PlanSummary struct {
	Kind      string      `json:"kind"` // plan
	ToChange  int         `json:"to_change"`
	Unchanged int         `json:"unchanged"`
	Skipped   int         `json:"skipped"`
	Hosts     []*HostPlan `json:"hosts"`
}

// Summary is the plan of every host, by name, with the totals.
func (p *Plan) Summary() PlanSummary {
	s := PlanSummary{Kind: "plan", Hosts: p.Hosts()}
	for _, h := range s.Hosts {
		s.ToChange += len(h.Changes)
		s.Unchanged += h.Unchanged
		s.Skipped += h.Skipped
	}
	return s
}
