package engine

import (
	"slices"
	"testing"
)

// The tests of this file pin the playbook language to Ansible's behaviour
// (issue 16); each names the Ansible promise it keeps.

func TestIncludeWhenCheckedOnce(t *testing.T) {
	rr := runFiles(t, map[string]string{
		"playbook.yaml": `
- hosts: h1
  tasks:
    - set_fact: {done: false}
    - include_tasks: steps.yaml
      when: not done
    - import_tasks: steps2.yaml
      when: not done
`,
		"steps.yaml": `
- set_fact: {done: true}
- probe: STEP2
`,
		"steps2.yaml": `
- probe: IMPORTED
`,
	}, RunOptions{})
	if rr.err != nil {
		t.Fatal(rr.err)
	}
	// The include's condition held when it ran, so STEP2 runs; an import's
	// condition is copied to each imported task, which sees done = true.
	if got := rr.calls.sorted(); !slices.Equal(got, []string{"h1:STEP2"}) {
		t.Errorf("calls %v, want [h1:STEP2]", got)
	}
}
