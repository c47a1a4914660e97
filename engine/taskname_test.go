package engine

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mensylisir/kubexm/engine/model"
)

// TestTaskNameRendered: a task name with a template is shown rendered with
// the task's variables (a role's include vars here, as roles/kubectl-apply
// names its tasks) in every event and journal record of the task, and a
// name that cannot render, or would show a secret, is never shown raw.
// Each is rendered once per task, a skipped include's included.
func TestTaskNameRendered(t *testing.T) {
	work := t.TempDir()
	files := map[string]string{
		"playbook.yaml": `
- hosts: web
  tasks:
    - include_role:
        name: apply
        vars: {what: deployment/metrics-server}
    - name: "{{ .nothing }} - undefined"
      probe: {id: undefined}
    - name: "password {{ .token }}"
      probe: {id: secret}
    - name: "skipped on {{ .inventory_hostname }}"
      include_role:
        name: apply
        vars: {what: nothing}
      when: false
`,
		"roles/apply/tasks/main.yaml": `
- name: "{{ .what }} - apply"
  probe: {id: apply, changed: true}
  run_once: true
- name: "{{ .what }} on {{ .inventory_hostname }} - loop"
  probe: {id: "{{ .item }}"}
  loop: [a, b]
`,
	}
	inv := testInventory()
	inv.OtherSecrets = []string{"s3cr3t-token"}
	inv.Vars["token"] = "s3cr3t-token"
	rr := runFilesInv(t, files, inv, RunOptions{WorkDir: work, Verbosity: 1})
	if rr.err != nil {
		t.Fatal(rr.err)
	}
	seen := map[string]map[model.EventKind]int{}
	for _, e := range rr.events {
		if e.Task == "" {
			continue
		}
		if strings.Contains(e.Task, "{{") || strings.Contains(e.Task, "s3cr3t") || strings.Contains(e.Task, "****") {
			t.Errorf("%s event names task %q", e.Kind, e.Task)
		}
		if seen[e.Task] == nil {
			seen[e.Task] = map[model.EventKind]int{}
		}
		seen[e.Task][e.Kind]++
	}
	for name, want := range map[string]map[model.EventKind]int{
		// run_once: one result, on the first host.
		"deployment/metrics-server - apply": {model.EventTaskStart: 1, model.EventHostResult: 1, model.EventTaskEnd: 1},
		// Named once with the first host's variables, as Ansible does;
		// verbosity 1 shows each item besides each host's result.
		"deployment/metrics-server on h1 - loop": {model.EventTaskStart: 1, model.EventHostResult: 6, model.EventTaskEnd: 1},
		"… - undefined":                          {model.EventTaskStart: 1, model.EventHostResult: 2, model.EventTaskEnd: 1},
		"password …":                             {model.EventTaskStart: 1, model.EventHostResult: 2, model.EventTaskEnd: 1},
		// A skipped include too: named once, with the first host's.
		"skipped on h1": {model.EventHostResult: 2},
	} {
		for k, n := range want {
			if seen[name][k] != n {
				t.Errorf("task %q: %d %s events, want %d (events by task: %v)", name, seen[name][k], k, n, seen)
			}
		}
	}
	var changed []string
	for _, e := range rr.eventsOf(model.EventHostResult) {
		if e.Status == model.StatusChanged {
			changed = append(changed, e.Host+": "+e.Task)
		}
	}
	if strings.Join(changed, "; ") != "h1: deployment/metrics-server - apply" {
		t.Errorf("changed: %v", changed)
	}
	runs, err := os.ReadDir(filepath.Join(work, "runs"))
	if err != nil || len(runs) != 1 {
		t.Fatalf("runs: %v %v", runs, err)
	}
	j := readJournal(t, filepath.Join(work, "runs", runs[0].Name()))
	for _, want := range []string{`"task":"deployment/metrics-server - apply"`, `"task":"deployment/metrics-server on h1 - loop"`, `"task":"… - undefined"`} {
		if !strings.Contains(j, want) {
			t.Errorf("journal has no %s:\n%s", want, j)
		}
	}
	if strings.Contains(j, "{{") || strings.Contains(j, "s3cr3t") {
		t.Errorf("journal holds a raw template or a secret:\n%s", j)
	}
}
