package output

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/mensylisir/kubexm/engine/model"
)

func events() []model.Event {
	now := time.Date(2026, 11, 22, 5, 0, 0, 0, time.UTC)
	rc := &model.Recap{RunID: "r1", Order: []string{"n1", "n2"}, Duration: 1500 * time.Millisecond, Failed: true, Journal: "/tmp/j",
		Hosts: map[string]*model.HostStats{"n1": {OK: 2, Changed: 1}, "n2": {OK: 1, Failed: 1, Error: "rc=1"}}}
	return []model.Event{
		{Time: now, Kind: model.EventPlayStart, Run: "r1", Play: "install", Message: "hosts: all"},
		{Time: now, Kind: model.EventTaskStart, Run: "r1", Play: "install", Task: "copy", Total: 2},
		{Time: now, Kind: model.EventHostResult, Run: "r1", Task: "copy", Host: "n1", Status: model.StatusChanged, Stdout: "copied\n"},
		{Time: now, Kind: model.EventHostResult, Run: "r1", Task: "copy", Role: "etcd", Host: "n2", Status: model.StatusFailed, Message: "rc=1", Stderr: "boom"},
		{Time: now, Kind: model.EventTaskEnd, Run: "r1", Play: "install", Task: "copy", Role: "etcd", Done: 2, Total: 2, DurationMS: 1200,
			Counts: map[model.Status]int{model.StatusChanged: 1, model.StatusFailed: 1}},
		{Time: now, Kind: model.EventRecap, Run: "r1", Recap: rc},
	}
}

func TestText(t *testing.T) {
	for _, tc := range []struct {
		verbosity int
		want      []string
		not       []string
	}{
		{0, []string{"PLAY install", "TASK etcd : copy", "hosts=2/2", "elapsed=1.2s", "changed=1", "failed=1", "FAILED", "host=n2", `reason="rc=1"`, "boom",
			"RECAP", "HOST", "n1", "n2: rc=1", "run r1 FAILED in 1.5s", "--resume=r1"}, []string{"copied"}},
		{1, []string{"copied", "host=n1"}, nil},
	} {
		var buf bytes.Buffer
		s := NewText(&buf, tc.verbosity)
		for _, e := range events() {
			s.Emit(e)
		}
		out := buf.String()
		for _, w := range tc.want {
			if !strings.Contains(out, w) {
				t.Errorf("-v=%d: output lacks %q:\n%s", tc.verbosity, w, out)
			}
		}
		for _, w := range tc.not {
			if strings.Contains(out, w) {
				t.Errorf("-v=%d: output has %q:\n%s", tc.verbosity, w, out)
			}
		}
		recapLine := ""
		for _, l := range strings.Split(out, "\n") {
			if strings.HasPrefix(l, "n2 ") {
				recapLine = strings.Join(strings.Fields(l), " ")
			}
		}
		if recapLine != "n2 1 0 0 1 0 0 0" {
			t.Errorf("recap row for n2 = %q", recapLine)
		}
	}
}

func TestJSON(t *testing.T) {
	var buf bytes.Buffer
	s := NewJSON(&buf)
	for _, e := range events() {
		s.Emit(e)
	}
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != len(events()) {
		t.Fatalf("%d lines for %d events", len(lines), len(events()))
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(lines[3]), &m); err != nil {
		t.Fatal(err)
	}
	if m["host"] != "n2" || m["status"] != "failed" || m["message"] != "rc=1" || m["role"] != "etcd" {
		t.Errorf("event = %v", m)
	}
}

// Under the free strategy each host ends a task on its own: the view prints
// one line per task when the last host is done, and at the end of the play
// the tasks some hosts never reached.
func TestTextFreeStrategyOneLinePerTask(t *testing.T) {
	var buf bytes.Buffer
	s := NewText(&buf, 0)
	end := func(task string, ms int64, st model.Status) model.Event {
		return model.Event{Kind: model.EventTaskEnd, Play: "p", Task: task, Pos: "pb.yaml:" + task, Done: 1, Total: 3,
			DurationMS: ms, Counts: map[model.Status]int{st: 1}}
	}
	s.Emit(model.Event{Kind: model.EventPlayStart, Play: "p", Message: "hosts: all"})
	s.Emit(end("a", 100, model.StatusOK))
	s.Emit(end("a", 300, model.StatusChanged))
	if strings.Contains(buf.String(), "TASK a") {
		t.Fatalf("a line before every host ended the task:\n%s", buf.String())
	}
	s.Emit(end("b", 50, model.StatusOK)) // a fast host runs ahead
	s.Emit(end("a", 200, model.StatusFailed))
	s.Emit(end("b", 70, model.StatusOK)) // the host that failed a never gets to b
	s.Emit(model.Event{Kind: model.EventPlayEnd, Play: "p"})
	out := buf.String()
	lines := strings.Split(strings.TrimSpace(out), "\n")
	var tasks []string
	for _, l := range lines {
		if strings.Contains(l, "TASK") {
			tasks = append(tasks, l)
		}
	}
	if len(tasks) != 2 {
		t.Fatalf("want one line per task, got:\n%s", out)
	}
	for _, want := range []string{"TASK a", "hosts=3/3", "elapsed=300ms", "changed=1", "ok=1", "failed=1"} {
		if !strings.Contains(tasks[0], want) {
			t.Errorf("task a's line %q lacks %q", tasks[0], want)
		}
	}
	for _, want := range []string{"TASK b", "hosts=2/3", "ok=2"} {
		if !strings.Contains(tasks[1], want) {
			t.Errorf("task b's line %q lacks %q", tasks[1], want)
		}
	}
}

// TestTextShowsDebugByDefault: a debug result is what the user asked to see,
// so it is printed at the default verbosity, as in Ansible.
func TestTextShowsDebugByDefault(t *testing.T) {
	var buf bytes.Buffer
	s := NewText(&buf, 0)
	s.Emit(model.Event{Kind: model.EventHostResult, Task: "debug", Host: "n1", Status: model.StatusOK, Message: "value is 42", Report: true})
	s.Emit(model.Event{Kind: model.EventHostResult, Task: "copy", Host: "n1", Status: model.StatusOK, Message: "copied"})
	if out := buf.String(); !strings.Contains(out, "value is 42") || strings.Contains(out, "copied") {
		t.Errorf("output:\n%s", out)
	}
}
