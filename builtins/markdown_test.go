package builtins

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/goccy/go-yaml"

	"github.com/mensylisir/kubexm/engine/step"
	"github.com/mensylisir/kubexm/internal/textdiff"
)

var update = flag.Bool("update", false, "rewrite docs/builtins.md")

// TestDocsUpToDate fails when docs/builtins.md no longer matches the Specs.
// Regenerate with: go test ./builtins -run TestDocsUpToDate -update
func TestDocsUpToDate(t *testing.T) {
	p := filepath.Join("..", "docs", "builtins.md")
	want := Markdown(All())
	if *update {
		if err := os.WriteFile(p, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(p)
	if err != nil {
		t.Fatalf("%v (generate it with: go test ./builtins -run TestDocsUpToDate -update)", err)
	}
	if string(got) != want {
		t.Fatalf("docs/builtins.md is stale; regenerate with: go test ./builtins -run TestDocsUpToDate -update\n%s",
			textdiff.Unified("docs/builtins.md", got, []byte(want), true))
	}
}

// TestSpecs checks what the engine and the docs rely on: unique names,
// documented arguments of known types, valid defaults and choices.
func TestSpecs(t *testing.T) {
	seen := map[string]bool{}
	types := map[step.Type]bool{step.String: true, step.Int: true, step.Bool: true, step.List: true, step.Map: true, step.Any: true, step.Mode: true, step.Duration: true}
	for _, b := range All() {
		s := b.Spec()
		if s.Name == "" || seen[s.Name] || s.Summary == "" {
			t.Errorf("%q: missing or duplicate name, or no summary", s.Name)
		}
		seen[s.Name] = true
		args := map[string]bool{}
		for _, a := range s.Args {
			for _, n := range append([]string{a.Name}, a.Aliases...) {
				if args[n] {
					t.Errorf("%s: argument %s declared twice", s.Name, n)
				}
				args[n] = true
			}
			if !types[a.Type] || a.Doc == "" {
				t.Errorf("%s.%s: type %q, doc %q", s.Name, a.Name, a.Type, a.Doc)
			}
			if len(a.Choices) > 0 && a.Default != nil && !strings.Contains(","+strings.Join(a.Choices, ",")+",", ","+a.Default.(string)+",") {
				t.Errorf("%s.%s: default %v is not a choice", s.Name, a.Name, a.Default)
			}
			if a.Required && a.Default != nil {
				t.Errorf("%s.%s: required with a default", s.Name, a.Name)
			}
		}
		if s.FreeForm != "" && !args[s.FreeForm] {
			t.Errorf("%s: free-form argument %s is not declared", s.Name, s.FreeForm)
		}
	}
}

// TestDocExamplesAreTaskLists checks that every example in docs/builtins.md
// is a task list a playbook could hold: a list of mappings, one of which
// calls the builtin the example belongs to (an example written as a list
// of tasks must not come out nested in a second list).
func TestDocExamplesAreTaskLists(t *testing.T) {
	for _, b := range All() {
		s := b.Spec()
		for i, ex := range s.Examples {
			text := exampleTasks(ex)
			var tasks []map[string]any
			if err := yaml.Unmarshal([]byte(text), &tasks); err != nil {
				t.Errorf("%s example %d is not a list of tasks: %v\n%s", s.Name, i, err, text)
				continue
			}
			calls := false
			for _, task := range tasks {
				if _, ok := task[s.Name]; ok {
					calls = true
				}
			}
			if len(tasks) == 0 || !calls {
				t.Errorf("%s example %d has no task calling %s:\n%s", s.Name, i, s.Name, text)
			}
		}
	}
	if got := exampleTasks("copy:\n  src: a\n  dest: b"); got != "- copy:\n    src: a\n    dest: b" {
		t.Errorf("single task: %q", got)
	}
	if got := exampleTasks("- name: x\n  debug: {msg: y}\n"); got != "- name: x\n  debug: {msg: y}" {
		t.Errorf("task list: %q", got)
	}
}
