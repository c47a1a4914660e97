package engine

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/mensylisir/kubexm/engine/model"

	"github.com/mensylisir/kubexm/engine/transport"
	"github.com/mensylisir/kubexm/inventory"
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

func TestFailLimitsJudgedAfterRescue(t *testing.T) {
	for _, limit := range []string{"any_errors_fatal: true", "max_fail_percentage: 0"} {
		t.Run(limit, func(t *testing.T) {
			rr := runFiles(t, map[string]string{"playbook.yaml": `
- hosts: all
  ` + limit + `
  tasks:
    - block:
        - probe: {id: a, fail: "{{ eq .inventory_hostname \"h2\" }}"}
      rescue:
        - probe: rescued
    - probe: after
`}, RunOptions{})
			if rr.err != nil {
				t.Fatalf("the rescue recovered the failure, yet: %v", rr.err)
			}
			if n := rr.calls.count("h2:rescued"); n != 1 {
				t.Errorf("rescue ran %d times on h2", n)
			}
			for _, h := range []string{"h1", "h2", "h3"} {
				if rr.calls.count(h+":after") != 1 {
					t.Errorf("%s did not continue: %v", h, rr.calls.sorted())
				}
			}
			// An unrescued failure still stops the run.
			rr = runFiles(t, map[string]string{"playbook.yaml": `
- hosts: all
  ` + limit + `
  tasks:
    - block:
        - probe: {id: a, fail: "{{ eq .inventory_hostname \"h2\" }}"}
      rescue:
        - probe: {id: rescue, fail: true}
    - probe: after
`}, RunOptions{})
			if rr.err == nil || rr.calls.count("h1:after") != 0 {
				t.Errorf("a failed rescue must stop the run: err %v, calls %v", rr.err, rr.calls.sorted())
			}
		})
	}
}

func TestPlayVarsResolveInAnyOrder(t *testing.T) {
	rr := runFiles(t, map[string]string{"playbook.yaml": `
- hosts: h1
  vars:
    url: "https://{{ .host }}:{{ .port }}"
    host: "{{ .name }}.example"
    name: x
  tasks:
    - probe: {id: a, msg: "{{ .url }}"}
`}, RunOptions{})
	if rr.err != nil {
		t.Fatal(rr.err)
	}
	if got := rr.calls.sorted(); !slices.Equal(got, []string{"h1:a=https://x.example:80"}) {
		t.Errorf("calls %v", got)
	}
}

func TestRecursiveVariablesAreAnError(t *testing.T) {
	for what, vars := range map[string]string{
		"play": "  vars: {y: \"{{ .x }}-y\", x: \"{{ .y }}-x\"}\n  tasks:\n    - probe: {id: a, msg: \"{{ .x }}\"}\n",
		"task": "  tasks:\n    - probe: {id: a, msg: \"{{ .x }}\"}\n      vars: {y: \"{{ .x }}-y\", x: \"{{ .y }}-x\"}\n",
		"self": "  vars: {x: \"{{ .x }}-x\"}\n  tasks:\n    - probe: {id: a, msg: \"{{ .x }}\"}\n",
	} {
		t.Run(what, func(t *testing.T) {
			rr := runFiles(t, map[string]string{"playbook.yaml": "- hosts: h1\n" + vars}, RunOptions{NoJournal: true})
			if rr.err == nil || rr.calls.count("h1:a") != 0 {
				t.Fatalf("a cycle must fail the task: err %v, calls %v", rr.err, rr.calls.sorted())
			}
			msg := rr.recap.Hosts["h1"].Error
			if !strings.Contains(msg, "refers to itself") || !strings.Contains(msg, "x -> ") || !strings.Contains(msg, "playbook.yaml:") {
				t.Errorf("message %q does not name the cycle and where", msg)
			}
		})
	}
}

func TestRolesRunOncePerPlay(t *testing.T) {
	files := map[string]string{
		"playbook.yaml": `
- hosts: h1
  roles:
    - ra
    - rb
    - rb
    - {role: rb, vars: {v: other}}
    - dup
    - dup
  tasks:
    - import_role: {name: ra}
- hosts: h1
  roles: [ra]
`,
		"roles/common/tasks/main.yaml": "- probe: common\n",
		"roles/ra/meta/main.yaml":      "dependencies: [common]\n",
		"roles/ra/tasks/main.yaml":     "- probe: ra\n",
		"roles/rb/meta/main.yaml":      "dependencies: [common]\n",
		"roles/rb/defaults/main.yaml":  "v: default\n",
		"roles/rb/tasks/main.yaml":     "- probe: {id: rb, msg: \"{{ .v }}\"}\n",
		"roles/dup/meta/main.yaml":     "allow_duplicates: true\n",
		"roles/dup/tasks/main.yaml":    "- probe: dup\n",
	}
	rr := runFiles(t, files, RunOptions{})
	if rr.err != nil {
		t.Fatal(rr.err)
	}
	// Once per play each, except for other parameters, allow_duplicates and
	// import_role; the second play runs its roles again.
	for id, want := range map[string]int{"h1:common": 2, "h1:ra": 3, "h1:rb=default": 1, "h1:rb=other": 1, "h1:dup": 2} {
		if got := rr.calls.count(id); got != want {
			t.Errorf("%s ran %d times, want %d (calls %v)", id, got, want, rr.calls.sorted())
		}
	}
}

func TestAnsibleKeywordsPointToTheKubexmWay(t *testing.T) {
	for src, want := range map[string]string{
		"  tasks:\n    - probe: a\n      with_items: [1, 2]\n":        "use loop:",
		"  tasks:\n    - probe: a\n      with_fileglob: ['*.conf']\n": "register, then loop",
		"  tasks:\n    - probe: a\n      become_user: postgres\n":     "runuser",
		"  tasks:\n    - include_vars: vars.yaml\n":                   "vars_files",
		"  tasks:\n    - block: [{probe: a}]\n      become_user: x\n": "runuser",
		"  become_user: postgres\n  tasks:\n    - probe: a\n":         "runuser",
		"  tasks:\n    - local_action: {module: probe}\n":             "delegate_to: localhost",
	} {
		_, err := LoadBytes(t.Context(), "pb.yaml", []byte("- hosts: all\n"+src), LoadOptions{Builtins: testRegistry(&calls{})})
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want a pointer with %q", src, err, want)
		}
	}
}

func TestRunEndMessages(t *testing.T) {
	// No journal: nothing to resume, so the error does not offer it.
	rr := runFiles(t, map[string]string{"playbook.yaml": "- hosts: h1\n  tasks:\n    - probe: {id: a, fail: true}\n"}, RunOptions{NoJournal: true})
	if rr.err == nil || strings.Contains(rr.err.Error(), "--resume") {
		t.Errorf("no-journal run: %v", rr.err)
	}
	rr = runFiles(t, map[string]string{"playbook.yaml": "- hosts: h1\n  tasks:\n    - probe: {id: a, fail: true}\n"}, RunOptions{WorkDir: t.TempDir()})
	if rr.err == nil || !strings.Contains(rr.err.Error(), "--resume="+rr.recap.RunID) {
		t.Errorf("journaled run: %v", rr.err)
	}
	// An exhausted until with an empty last message says so instead of
	// ending with a dangling ": ".
	rr = runFiles(t, map[string]string{"playbook.yaml": "- hosts: h1\n  tasks:\n    - probe: {id: a, msg: \"\"}\n      register: r\n      until: r.changed\n      retries: 1\n      delay: 0\n"}, RunOptions{})
	if msg := rr.recap.Hosts["h1"].Error; msg != `until "r.changed" still false after 2 attempts in 0s; last seen: no message and no output` {
		t.Errorf("until message %q", msg)
	}
	// An unnamed play is called by its host pattern.
	rr = runFiles(t, map[string]string{"playbook.yaml": "- hosts: web:db\n  tasks:\n    - probe: a\n"}, RunOptions{})
	if ps := rr.eventsOf(model.EventPlayStart); len(ps) != 1 || ps[0].Play != "web:db" {
		t.Errorf("play start events %+v", ps)
	}
}

func TestUnreachableOnlyRunSaysUnreachable(t *testing.T) {
	dir := writeFiles(t, map[string]string{"playbook.yaml": "- hosts: all\n  tasks:\n    - probe: a\n"})
	pb, err := Load(t.Context(), dir, LoadOptions{Builtins: testRegistry(&calls{})})
	if err != nil {
		t.Fatal(err)
	}
	inv := testInventory()
	inv.Hosts[1].Local = false
	_, err = Run(t.Context(), pb, inv, RunOptions{NoJournal: true,
		Connect: func(context.Context, *inventory.Host) (transport.Transport, error) {
			return nil, errors.New("connection refused")
		}})
	if err == nil || !strings.Contains(err.Error(), "unreachable: h2") || strings.Contains(err.Error(), "failed on") {
		t.Errorf("err = %v, want it to say h2 was unreachable", err)
	}
}

func TestRecapHostsSorted(t *testing.T) {
	rr := runFiles(t, map[string]string{"playbook.yaml": "- hosts: h3\n  tasks: [{probe: a}]\n- hosts: h1:localhost:h2\n  tasks: [{probe: b}]\n"}, RunOptions{})
	if !slices.Equal(rr.recap.Order, []string{"h1", "h2", "h3", "localhost"}) {
		t.Errorf("recap order %v", rr.recap.Order)
	}
}

func TestForceHandlers(t *testing.T) {
	pb := func(extra string) map[string]string {
		return map[string]string{"playbook.yaml": `
- hosts: all
` + extra + `
  tasks:
    - probe: {id: change, changed: true}
      notify: restart
    - probe: {id: b, fail: "{{ eq .inventory_hostname \"h2\" }}"}
  handlers:
    - name: restart
      probe: restart
`}
	}
	for _, tc := range []struct {
		name  string
		extra string
		opts  RunOptions
		want  int // hosts running the handler
	}{
		{"default", "", RunOptions{}, 2},
		{"keyword", "  force_handlers: true", RunOptions{}, 3},
		{"flag", "", RunOptions{ForceHandlers: true}, 3},
		{"fatal", "  any_errors_fatal: true", RunOptions{}, 0},
		{"fatal+forced", "  any_errors_fatal: true\n  force_handlers: true", RunOptions{}, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rr := runFiles(t, pb(tc.extra), tc.opts)
			if got := rr.calls.count("h1:restart") + rr.calls.count("h2:restart") + rr.calls.count("h3:restart"); got != tc.want {
				t.Errorf("handler ran on %d hosts, want %d: %v", got, tc.want, rr.calls.sorted())
			}
			if rr.err == nil {
				t.Error("h2 failed, the run must fail")
			}
		})
	}
}

func TestRescueSeesTheFailure(t *testing.T) {
	rr := runFiles(t, map[string]string{"playbook.yaml": `
- hosts: h1
  tasks:
    - block:
        - name: breaks
          probe: {id: a, error: boom}
      rescue:
        - probe: {id: r, msg: "{{ .failed_task.name }}|{{ .failed_task.action }}|{{ .failed_result.msg }}"}
`}, RunOptions{})
	if rr.err != nil {
		t.Fatal(rr.err)
	}
	if got := rr.calls.sorted(); !slices.Equal(got, []string{"h1:a", "h1:r=breaks|probe|boom"}) {
		t.Errorf("calls %v", got)
	}
}

func TestStrategyTemplate(t *testing.T) {
	files := map[string]string{"playbook.yaml": `
- hosts: all
  vars: {strat: linear}
  strategy: "{{ .strat }}"
  tasks:
    - probe: a
`}
	perHost := func(rr *runResult) int {
		n := 0
		for _, e := range rr.eventsOf(model.EventTaskEnd) {
			if e.Done == 1 && e.Total == 3 {
				n++
			}
		}
		return n
	}
	rr := runFiles(t, files, RunOptions{})
	if rr.err != nil || perHost(rr) != 0 {
		t.Errorf("linear: %v, %d per-host task ends", rr.err, perHost(rr))
	}
	rr = runFiles(t, files, RunOptions{ExtraVars: map[string]any{"strat": "free"}})
	if rr.err != nil || perHost(rr) != 3 {
		t.Errorf("free: %v, %d per-host task ends", rr.err, perHost(rr))
	}
	rr = runFiles(t, files, RunOptions{ExtraVars: map[string]any{"strat": "fastest"}})
	if rr.err == nil || !strings.Contains(rr.recap.Hosts["h1"].Error, `strategy must be linear or free, not "fastest"`) || rr.calls.count("h1:a") != 0 {
		t.Errorf("bad strategy: %v %+v", rr.err, rr.recap.Hosts["h1"])
	}
}

func TestPlayKeywordsApplyToTasks(t *testing.T) {
	rr := runFiles(t, map[string]string{"playbook.yaml": `
- hosts: h1
  ignore_errors: true
  check_mode: true
  environment: {GREETING: "hi {{ .inventory_hostname }}"}
  tasks:
    - shell: 'test "$GREETING" = "hi h1"'
      check_mode: false
    - probe: {id: a, fail: true}
    - probe: b
`}, RunOptions{})
	if rr.err != nil {
		t.Fatal(rr.err)
	}
	checkRecap(t, rr.recap, map[string]model.HostStats{"h1": {OK: 3, Changed: 1, Ignored: 1}})
	if got := rr.calls.sorted(); !slices.Equal(got, []string{"h1:a(check)", "h1:b(check)"}) {
		t.Errorf("calls %v", got)
	}
}

func TestCycleBrokenByExtraVars(t *testing.T) {
	rr := runFiles(t, map[string]string{"playbook.yaml": `
- hosts: h1
  vars: {y: "{{ .x }}-y", x: "{{ .y }}-x"}
  tasks:
    - probe: {id: a, msg: "{{ .y }}"}
`}, RunOptions{ExtraVars: map[string]any{"x": "e"}})
	if rr.err != nil {
		t.Fatal(rr.err)
	}
	if got := rr.calls.sorted(); !slices.Equal(got, []string{"h1:a=e-y"}) {
		t.Errorf("calls %v", got)
	}
}

func TestPlayConnectionLocal(t *testing.T) {
	dir := writeFiles(t, map[string]string{"playbook.yaml": `
- hosts: all
  connection: local
  tasks:
    - shell: "test {{ .inventory_hostname }} = h2 && echo local"
      register: r
      when: inventory_hostname == "h2"
    - probe: {id: a, msg: "{{ .r.stdout | trim }}"}
      when: inventory_hostname == "h2"
`})
	c := &calls{}
	pb, err := Load(t.Context(), dir, LoadOptions{Builtins: testRegistry(c)})
	if err != nil {
		t.Fatal(err)
	}
	inv := testInventory()
	inv.Hosts[1].Local = false
	_, err = Run(t.Context(), pb, inv, RunOptions{NoJournal: true,
		Connect: func(context.Context, *inventory.Host) (transport.Transport, error) {
			return nil, errors.New("must not connect")
		}})
	if err != nil || !slices.Equal(c.sorted(), []string{"h2:a=local"}) {
		t.Errorf("err %v, calls %v", err, c.sorted())
	}
	if _, err := LoadBytes(t.Context(), "pb.yaml", []byte("- hosts: all\n  connection: winrm\n  tasks: []\n"), LoadOptions{Builtins: testRegistry(c)}); err == nil {
		t.Error("connection: winrm loaded")
	}
}

// A role skipped by its `when:` skips a looped task whose loop names what
// an earlier task of the role registers (skipped too, so never
// registered); conditions that name the item are still per item.
func TestRoleWhenSkipsLoopsBeforeRenderingThem(t *testing.T) {
	files := map[string]string{
		"playbook.yaml": `
- hosts: h1
  vars: {mode: b}
  roles:
    - {role: ra, when: mode == "a"}
    - {role: rb, when: mode == "b"}
`,
		"roles/ra/tasks/main.yaml": `
- probe: {id: ra-first, data: {list: [x, y]}}
  register: ra_first
- probe: "ra-{{ .item }}"
  loop: "{{ .ra_first.data.list }}"
`,
		"roles/rb/tasks/main.yaml": `
- probe: "rb-{{ .item }}"
  loop: [1, 2, 3]
  when: item != 2
`,
	}
	rr := runFiles(t, files, RunOptions{})
	if rr.err != nil {
		t.Fatal(rr.err)
	}
	if got := rr.calls.sorted(); strings.Join(got, " ") != "h1:rb-1 h1:rb-3" {
		t.Errorf("calls %v, want rb-1 and rb-3 only", got)
	}
}
