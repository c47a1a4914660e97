package engine

import (
	"fmt"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/mensylisir/kubexm/inventory"
)

// TestUnusedTemplateBombIsHarmless is issue 45's reproduction: a host
// variable `{{ repeat 2000000000 "x" }}` that no task reads took a play to
// 2 GB and a fatal out-of-memory. Now the play runs without allocating it,
// and the task that reads it fails naming the variable and the limit.
func TestUnusedTemplateBombIsHarmless(t *testing.T) {
	inv := &inventory.Inventory{
		Hosts: []inventory.Host{{Name: "h1", Local: true, Vars: map[string]any{
			"bomb": `{{ repeat 2000000000 "x" }}`,
			"nice": "n-{{ .inventory_hostname }}",
		}}},
		Source: "cluster.yaml",
	}
	files := map[string]string{
		"playbook.yaml": "- hosts: h1\n  tasks:\n" +
			"    - probe: {id: a, msg: \"{{ .nice }}\"}\n" +
			"    - probe: {id: b, msg: \"{{ .nice }}\"}\n",
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	rr := runFilesInv(t, files, inv, RunOptions{})
	runtime.ReadMemStats(&after)
	if rr.err != nil {
		t.Fatalf("a play that never reads the bomb: %v", rr.err)
	}
	if got := rr.calls.sorted(); !slices.Equal(got, []string{"h1:a=n-h1", "h1:b=n-h1"}) {
		t.Errorf("calls %q", got)
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 64<<20 {
		t.Errorf("the play allocated %d MiB", alloc>>20)
	}

	files["playbook.yaml"] = "- hosts: h1\n  tasks:\n    - probe: {id: c, msg: \"{{ .bomb }}\"}\n"
	rr = runFilesInv(t, files, inv, RunOptions{})
	events := fmt.Sprintf("%+v", rr.events)
	if rr.err == nil || len(rr.calls.sorted()) != 0 || !strings.Contains(events, `undefined variable "bomb"`) ||
		!strings.Contains(events, "repeat: would make 2000000000 bytes, more than the 16 MiB a template may produce") {
		t.Errorf("the task reading the bomb: %v, calls %q\n%s", rr.err, rr.calls.sorted(), events)
	}
}

// TestInventoryTemplatesBoundedTogether: many inventory variables each under
// the bound of one template are bounded together per task-host, or a
// cluster.yaml of a hundred 15 MiB variables would take 1.5 GB for every
// task running at once.
func TestInventoryTemplatesBoundedTogether(t *testing.T) {
	inv := &inventory.Inventory{
		Hosts: []inventory.Host{{Name: "h1", Local: true, Vars: map[string]any{
			"a": `{{ repeat 7000000 "x" }}`, "b": `{{ repeat 7000000 "x" }}`, "c": `{{ repeat 7000000 "x" }}`,
		}}},
		Source: "cluster.yaml",
	}
	files := map[string]string{"playbook.yaml": "- hosts: h1\n  tasks:\n" +
		"    - probe: {id: none}\n" +
		"    - probe: {id: two, msg: \"{{ add (len .a) (len .b) }}\"}\n" +
		"    - probe: {id: all, msg: \"{{ add (len .a) (len .b) (len .c) }}\"}\n"}
	rr := runFilesInv(t, files, inv, RunOptions{})
	events := fmt.Sprintf("%+v", rr.events)
	if got := rr.calls.sorted(); !slices.Equal(got, []string{"h1:none", "h1:two=14000000"}) {
		t.Errorf("calls %q", got)
	}
	if rr.err == nil || !strings.Contains(events, `undefined variable "c"`) ||
		!strings.Contains(events, "more than the 16 MiB of text the inventory's templates may make for one host") {
		t.Errorf("the task reading all three: %v\n%.2000s", rr.err, events)
	}
}
