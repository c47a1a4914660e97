package engine

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/mensylisir/kubexm/engine/model"

	"github.com/mensylisir/kubexm/engine/transport"
	"github.com/mensylisir/kubexm/inventory"
)

// A task before --start-at-task's is pruned before its when: is looked at:
// the facts it reads come from tasks that did not run (issue 46: create-cluster
// --start-at-task 'etcd : ...' stopped on os_package_list). A task tagged
// always still runs there, with what it needs.
func TestStartAtPrunesBeforeEvaluating(t *testing.T) {
	files := map[string]string{
		"playbook.yaml": `name: t
plays:
  - name: os
    hosts: web
    tags: [os]
    when: os_ready
    tasks:
      - {name: guard, tags: [always], set_fact: {guard_list: [a]}}
      - {name: guard check, tags: [always], probe: guard, when: len(guard_list) > 0}
      - {name: choose, set_fact: {pkg_list: [x]}}
      - name: install
        include_tasks: pkgs.yaml
        when: len(pkg_list) > 0
      - name: gate
        meta: end_host
        when: pkg_list[0] == "y"
      - block:
          - {name: in block, probe: inblock}
        when: pkg_list[0] == "x"
  - name: play before
    hosts: web
    when: not_yet_defined
    tasks:
      - {name: before, probe: before}
  - name: etcd
    hosts: web
    tags: [etcd]
    tasks:
      - {name: "etcd - member address", probe: member}
      - {name: after, probe: after}
`,
		"pkgs.yaml": "- {name: pkg, probe: pkg}\n",
	}
	inv := testInventory()
	inv.Vars["os_ready"] = true
	rr := runFilesInv(t, files, inv, RunOptions{StartAt: "etcd - member address", NoJournal: true})
	if rr.err != nil {
		t.Fatalf("start at a later play: %v", rr.err)
	}
	want := "h1:after h1:guard h1:member h2:after h2:guard h2:member"
	if got := strings.Join(rr.calls.sorted(), " "); got != want {
		t.Errorf("ran %s, want %s", got, want)
	}

	// A start point inside an include and a block: what leads there runs.
	rr = runFilesInv(t, files, inv, RunOptions{StartAt: "pkg", NoJournal: true})
	if rr.err == nil || !strings.Contains(rr.recap.Hosts["h1"].Error, "pkg_list") {
		// The include's when: reads a fact of a task before it, which did
		// not run: the run names it.
		t.Errorf("start inside an include whose when reads a skipped fact: %v", rr.err)
	}

	// --tags: a play with no selected task is pruned before its when:.
	rr = runFilesInv(t, files, inv, RunOptions{Tags: []string{"etcd"}, NoJournal: true})
	if rr.err != nil {
		t.Fatalf("--tags etcd: %v: %s", rr.err, rr.recap.Hosts["h1"].Error)
	}
	if got := strings.Join(rr.calls.sorted(), " "); got != want {
		t.Errorf("--tags etcd ran %s, want %s", got, want)
	}

	// A play of no tasks still runs without --tags (it may only gather
	// facts, or only notify its handlers' flush).
	rr = runFilesInv(t, map[string]string{"playbook.yaml": "name: t\nplays:\n  - name: empty\n    hosts: web\n    tasks: []\n"}, inv, RunOptions{NoJournal: true})
	if rr.err != nil || len(rr.eventsOf(model.EventPlayStart)) != 1 {
		t.Errorf("a play of no tasks: %v, %d play starts", rr.err, len(rr.eventsOf(model.EventPlayStart)))
	}
}

// A --start-at-task that names no task is refused before any host is
// reached, naming the nearest tasks.
func TestStartAtNoMatchRefusedWithNearest(t *testing.T) {
	dir := writeFiles(t, map[string]string{"playbook.yaml": `name: t
plays:
  - hosts: all
    roles: [etcd]
`, "roles/etcd/tasks/main.yaml": `- {name: "etcd - member address", probe: a}
- {name: "etcd - binaries", probe: b}
- {name: "etcd - unit", probe: c}
`})
	pb, err := Load(context.Background(), dir, LoadOptions{Builtins: testRegistry(&calls{})})
	if err != nil {
		t.Fatal(err)
	}
	dialed := 0
	inv := &inventory.Inventory{Hosts: []inventory.Host{{Name: "r1", Address: "192.0.2.1"}}, Groups: map[string][]string{}}
	_, err = Run(context.Background(), pb, inv, RunOptions{StartAt: "etcd : etcd - member adress", NoJournal: true,
		Connect: func(context.Context, *inventory.Host) (transport.Transport, error) {
			dialed++
			return nil, errors.New("no")
		}})
	if err == nil || dialed > 0 {
		t.Fatalf("refused: %v, hosts dialed: %d", err, dialed)
	}
	for _, want := range []string{`"etcd : etcd - member adress" names no task`, `the nearest are ["etcd : etcd - member address"`, "--list-tasks"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the refusal does not say %s: %v", want, err)
		}
	}
	if err := CheckStartAt(pb, inv, "etcd : etcd - unit"); err != nil {
		t.Errorf("a role task by role : name: %v", err)
	}
	if err := CheckStartAt(pb, inv, "etcd - b*"); err != nil {
		t.Errorf("a glob: %v", err)
	}
}
