// Package model holds what the loader and the run share and what they
// report: the events a run emits, with their statuses, and the recap.
package model

import (
	"time"
)

// Status is the outcome of a task on a host.
type Status string

const (
	StatusOK          Status = "ok"
	StatusChanged     Status = "changed"
	StatusSkipped     Status = "skipped"
	StatusFailed      Status = "failed"
	StatusIgnored     Status = "ignored" // failed, with ignore_errors
	StatusRescued     Status = "rescued"
	StatusUnreachable Status = "unreachable"
)

// EventKind says what an Event reports.
type EventKind string

const (
	EventRunStart   EventKind = "run_start"
	EventPlayStart  EventKind = "play_start"
	EventTaskStart  EventKind = "task_start"
	EventHostResult EventKind = "host_result"
	EventTaskEnd    EventKind = "task_end"
	EventPlayEnd    EventKind = "play_end"
	EventLog        EventKind = "log" // a builtin's verbose progress (Env.Logf)
	EventWarning    EventKind = "warning"
	EventRecap      EventKind = "recap"
)

// Event is one thing that happened during a run. Sinks turn events into the
// human view or JSON lines. Secrets are masked before an event is emitted.
type Event struct {
	Time       time.Time `json:"time"`
	Kind       EventKind `json:"kind"`
	Run        string    `json:"run"`
	Play       string    `json:"play,omitempty"`
	Role       string    `json:"role,omitempty"`
	Task       string    `json:"task,omitempty"`
	Pos        string    `json:"pos,omitempty"` // file:line:col of the task
	Host       string    `json:"host,omitempty"`
	Delegate   string    `json:"delegate_to,omitempty"`
	Item       string    `json:"item,omitempty"` // the loop label
	Status     Status    `json:"status,omitempty"`
	DurationMS int64     `json:"duration_ms"`
	Message    string    `json:"message,omitempty"`
	Stdout     string    `json:"stdout,omitempty"`
	Stderr     string    `json:"stderr,omitempty"`
	Diff       string    `json:"diff,omitempty"`
	Resumed    bool      `json:"resumed,omitempty"` // outcome taken from the journal of an earlier run
	Handler    bool      `json:"handler,omitempty"`
	// Report marks a result whose message the task was written to show
	// (debug); views print it at the default verbosity.
	Report bool `json:"report,omitempty"`
	// Task end: hosts done out of total, and how many per status.
	// A task_end's Done hosts of Total: equal under the linear strategy;
	// under free each host ends a task on its own (Done 1 of the play's).
	Done   int            `json:"done,omitempty"`
	Total  int            `json:"total,omitempty"`
	Counts map[Status]int `json:"counts,omitempty"`
	// Recap is set on the final event.
	Recap *Recap `json:"recap,omitempty"`
}

// Sink receives events. The engine calls Emit from one goroutine at a time.
type Sink interface {
	Emit(Event)
}

// SinkFunc adapts a function to Sink.
type SinkFunc func(Event)

// Emit calls f.
func (f SinkFunc) Emit(e Event) { f(e) }

// HostStats counts a host's task outcomes as Ansible does: OK counts every
// task the host went past, changed and ignored ones included.
type HostStats struct {
	OK          int    `json:"ok"`
	Changed     int    `json:"changed"`
	Skipped     int    `json:"skipped"`
	Failed      int    `json:"failed"`
	Unreachable int    `json:"unreachable"`
	Ignored     int    `json:"ignored"`
	Rescued     int    `json:"rescued"`
	Error       string `json:"error,omitempty"` // why the host failed or was unreachable
}

// Recap is the summary of a run.
type Recap struct {
	RunID     string                `json:"run_id"`
	Hosts     map[string]*HostStats `json:"hosts"`
	Order     []string              `json:"order"` // the hosts that ran something, sorted by name as in Ansible's recap
	Duration  time.Duration         `json:"duration_ns"`
	Failed    bool                  `json:"failed"`
	Cancelled bool                  `json:"cancelled"`
	// Aborted says why the run stopped early (any_errors_fatal,
	// max_fail_percentage), if it did.
	Aborted string `json:"aborted,omitempty"`
	// Journal is the directory of the run's journal, if one was written.
	Journal string `json:"journal,omitempty"`
	// Interrupted lists the tasks a cancelled run stopped, per host.
	Interrupted []Interruption `json:"interrupted,omitempty"`
}

// Interruption is a task that was running on a host when the run was
// cancelled.
type Interruption struct {
	Host string `json:"host"`
	Task string `json:"task"`
	Pos  string `json:"pos"`
}
