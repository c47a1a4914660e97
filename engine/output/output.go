// Package output turns engine events into what people and programs read:
// a human view through charmbracelet/log, or one JSON object per line.
package output

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/mensylisir/kubexm/engine/model"

	"github.com/charmbracelet/log"
	"github.com/muesli/termenv"
)

// JSON writes one JSON object per event per line.
type JSON struct {
	mu  sync.Mutex
	enc *json.Encoder
}

// NewJSON returns a sink writing JSON lines to w.
func NewJSON(w io.Writer) *JSON { return &JSON{enc: json.NewEncoder(w)} }

// Emit writes e. Write errors are dropped: the run must not stop because
// its output pipe closed.
func (j *JSON) Emit(e model.Event) {
	j.mu.Lock()
	defer j.mu.Unlock()
	_ = j.enc.Encode(e)
}

// Text is the human view: one line per task with hosts done/total and the
// time it took, a line per failure, and a recap table. With verbosity 1
// every host result is shown with its stdout and stderr; with 2 also task
// starts and builtin progress.
type Text struct {
	mu        sync.Mutex
	w         io.Writer
	log       *log.Logger
	verbosity int
	// Under the free strategy every host ends a task on its own; the view
	// adds them up and prints the task's line when the last host is done,
	// or at the end of the play for the hosts that never got there.
	partial map[string]*model.Event
	order   []string
}

// NewText returns the human view writing to w.
func NewText(w io.Writer, verbosity int) *Text {
	l := log.NewWithOptions(noTerminal{w}, log.Options{ReportTimestamp: true, TimeFormat: time.TimeOnly})
	l.SetColorProfile(colorProfile(w))
	return &Text{w: w, log: l, verbosity: verbosity}
}

// noTerminal hides w's file descriptor from charmbracelet/log. Given an
// *os.File on a terminal, its lipgloss renderer asks the terminal for its
// foreground and background colours as soon as it is created (termenv's
// colour cache), and waits 5 s for each answer: a terminal that never
// answers (script(1), CI ptys) held every run 10 s before its first line,
// NO_COLOR or not. Nothing the view prints depends on those colours, so
// they are never asked; colorProfile chooses the colours from the
// environment alone.
type noTerminal struct{ io.Writer }

// colorProfile is the colours the view uses on w: none unless w is a
// terminal, none with NO_COLOR (or CLICOLOR=0), else what TERM and
// COLORTERM say. termenv decides this from the environment and the file
// alone, without a query to the terminal.
func colorProfile(w io.Writer) termenv.Profile {
	f, ok := w.(*os.File)
	if !ok {
		return termenv.Ascii
	}
	return termenv.NewOutput(f).EnvColorProfile()
}

// Emit prints e.
func (t *Text) Emit(e model.Event) {
	t.mu.Lock()
	defer t.mu.Unlock()
	l := t.log
	switch e.Kind {
	case model.EventRunStart:
		l.Info("RUN "+e.Run, "playbook", e.Message)
	case model.EventPlayStart:
		l.Info("PLAY "+e.Play, "hosts", strings.TrimPrefix(e.Message, "hosts: "))
	case model.EventTaskStart:
		if t.verbosity >= 2 {
			l.Info("TASK "+taskTitle(e)+" ...", "hosts", e.Total)
		}
	case model.EventTaskEnd:
		if e.Done < e.Total {
			t.addPartial(e)
			return
		}
		t.taskLine(e)
	case model.EventPlayEnd:
		t.flushPartial()
	case model.EventHostResult:
		kv := []any{"host", e.Host}
		if e.Item != "" {
			kv = append(kv, "item", e.Item)
		}
		if e.Delegate != "" {
			kv = append(kv, "delegate_to", e.Delegate)
		}
		switch e.Status {
		case model.StatusFailed, model.StatusUnreachable:
			kv = append(kv, "task", e.Task)
			if e.Pos != "" {
				kv = append(kv, "at", e.Pos)
			}
			kv = append(kv, "reason", e.Message)
			l.Error(strings.ToUpper(string(e.Status)), kv...)
			t.streams(e)
		case model.StatusIgnored:
			kv = append(kv, "task", e.Task, "reason", e.Message)
			l.Warn("FAILED (ignored)", kv...)
		default:
			if t.verbosity >= 1 || (e.Report && e.Status != model.StatusSkipped && e.Message != "") {
				if e.Resumed {
					kv = append(kv, "resumed", e.Message)
				} else if e.Message != "" {
					kv = append(kv, "message", e.Message)
				}
				l.Info("  "+string(e.Status), kv...)
				t.streams(e)
			}
		}
		if e.Diff != "" {
			fmt.Fprintln(t.w, e.Diff)
		}
	case model.EventLog:
		if t.verbosity >= 2 {
			l.Info("  "+e.Message, "host", e.Host)
		}
	case model.EventWarning:
		l.Warn(e.Message)
	case model.EventRecap:
		t.flushPartial()
		t.recap(e)
	}
}

// taskLine prints a task's line: hosts done/total, time, counts.
func (t *Text) taskLine(e model.Event) {
	kv := []any{"hosts", fmt.Sprintf("%d/%d", e.Done, e.Total), "elapsed", (time.Duration(e.DurationMS) * time.Millisecond).String()}
	for _, s := range []model.Status{model.StatusChanged, model.StatusOK, model.StatusSkipped, model.StatusFailed, model.StatusIgnored, model.StatusUnreachable} {
		if n := e.Counts[s]; n > 0 {
			kv = append(kv, string(s), n)
		}
	}
	if e.Counts[model.StatusFailed]+e.Counts[model.StatusUnreachable] > 0 {
		t.log.Error("TASK "+taskTitle(e), kv...)
	} else {
		t.log.Info("TASK "+taskTitle(e), kv...)
	}
}

// addPartial adds one host's end of a task; the line is printed when every
// host of the play has ended it. The elapsed time is the slowest host's.
func (t *Text) addPartial(e model.Event) {
	key := fmt.Sprintf("%s\x00%s\x00%s\x00%v", e.Play, e.Pos, e.Task, e.Handler)
	sum, ok := t.partial[key]
	if !ok {
		if t.partial == nil {
			t.partial = map[string]*model.Event{}
		}
		first := e
		first.Counts = map[model.Status]int{}
		first.Done, first.DurationMS = 0, 0
		sum = &first
		t.partial[key] = sum
		t.order = append(t.order, key)
	}
	sum.Done += e.Done
	sum.DurationMS = max(sum.DurationMS, e.DurationMS)
	for s, n := range e.Counts {
		sum.Counts[s] += n
	}
	if sum.Done >= sum.Total {
		t.taskLine(*sum)
		delete(t.partial, key)
	}
}

// flushPartial prints the tasks that some hosts never reached (they failed
// or ended earlier), in the order they were first ended.
func (t *Text) flushPartial() {
	for _, key := range t.order {
		if sum, ok := t.partial[key]; ok {
			t.taskLine(*sum)
		}
	}
	t.partial, t.order = nil, nil
}

func (t *Text) streams(e model.Event) {
	for _, s := range []struct{ name, text string }{{"stdout", e.Stdout}, {"stderr", e.Stderr}} {
		if s.text == "" {
			continue
		}
		fmt.Fprintf(t.w, "  %s:\n", s.name)
		for _, line := range strings.Split(strings.TrimRight(s.text, "\n"), "\n") {
			fmt.Fprintf(t.w, "    %s\n", line)
		}
	}
}

func taskTitle(e model.Event) string {
	title := e.Task
	if e.Role != "" {
		title = e.Role + " : " + title
	}
	if e.Handler {
		title = "handler " + title
	}
	return title
}

func (t *Text) recap(e model.Event) {
	rc := e.Recap
	if rc == nil {
		return
	}
	fmt.Fprintln(t.w)
	fmt.Fprintln(t.w, "RECAP")
	tw := tabwriter.NewWriter(t.w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "HOST\tOK\tCHANGED\tSKIPPED\tFAILED\tUNREACHABLE\tIGNORED\tRESCUED\t")
	hosts := rc.Order
	for _, h := range hosts {
		s := rc.Hosts[h]
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t\n", h, s.OK, s.Changed, s.Skipped, s.Failed, s.Unreachable, s.Ignored, s.Rescued)
	}
	_ = tw.Flush()
	for _, h := range hosts {
		if s := rc.Hosts[h]; s.Error != "" && (s.Failed > 0 || s.Unreachable > 0) {
			fmt.Fprintf(t.w, "  %s: %s\n", h, s.Error)
		}
	}
	for _, in := range rc.Interrupted {
		fmt.Fprintf(t.w, "  interrupted: %s in task %q (%s)\n", in.Host, in.Task, in.Pos)
	}
	state := "finished"
	switch {
	case rc.Cancelled:
		state = "cancelled"
	case rc.Failed:
		state = "FAILED"
	}
	fmt.Fprintf(t.w, "run %s %s in %s", rc.RunID, state, rc.Duration.Round(time.Millisecond))
	if rc.Aborted != "" {
		fmt.Fprintf(t.w, " (%s)", rc.Aborted)
	}
	fmt.Fprintln(t.w)
	if rc.Journal != "" && (rc.Failed || rc.Cancelled) {
		fmt.Fprintf(t.w, "continue it with: --resume=%s\n", rc.RunID)
	}
}
