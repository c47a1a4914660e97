package engine

import (
	"context"
	"sync"
	"testing"

	"github.com/mensylisir/kubexm/engine/model"

	"github.com/mensylisir/kubexm/engine/step"
)

// A builtin sees its Spec's default for an argument the task leaves out or
// renders empty, so its Run never restates the default.
func TestBuiltinDefaultsAfterTemplating(t *testing.T) {
	var mu sync.Mutex
	seen := map[string]string{}
	reg := map[string]step.Builtin{"persist": fakeBuiltin{
		spec: step.Spec{Name: "persist", Args: []step.Arg{
			{Name: "id", Type: step.String, Required: true},
			{Name: "file", Type: step.String, Default: "/etc/default.conf"},
		}},
		run: func(_ context.Context, _ *step.Env, a step.Args) (step.Result, error) {
			mu.Lock()
			seen[a.String("id")] = a.String("file")
			mu.Unlock()
			return step.Result{}, nil
		},
	}}
	dir := writeFiles(t, map[string]string{"playbook.yaml": `
- hosts: h1
  vars: {empty: "", mine: /etc/mine.conf}
  tasks:
    - persist: {id: left-out}
    - persist: {id: rendered-empty, file: "{{ .empty }}"}
    - persist: {id: given, file: "{{ .mine }}"}
`})
	pb, err := Load(context.Background(), dir, LoadOptions{Builtins: reg})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Run(context.Background(), pb, testInventory(), RunOptions{Output: model.SinkFunc(func(model.Event) {})}); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"left-out": "/etc/default.conf", "rendered-empty": "/etc/default.conf", "given": "/etc/mine.conf"}
	for id, f := range want {
		if seen[id] != f {
			t.Errorf("%s: file %q, want %q", id, seen[id], f)
		}
	}
}
