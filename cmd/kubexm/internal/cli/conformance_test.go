package cli

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/mensylisir/kubexm/engine/model"

	"github.com/mensylisir/kubexm/lifecycle"
)

// conformanceInventory is three local hosts: web = h1, h2; db = h3.
const conformanceInventory = `[web]
h1
h2
[db]
h3
[all:vars]
ansible_connection=local
`

// conformanceCase is one feature of the playbook language, run as
// `kubexm play` on the local hosts and judged on what a user observes.
type conformanceCase struct {
	name  string
	files map[string]string // site.yaml and whatever it includes
	args  []string
	// shown is what debug printed, per host, in order; hosts not listed
	// must print nothing.
	shown map[string][]string
	// order, when set, is the global order of "host: message" lines (for
	// serial and run_once, where it is deterministic).
	order []string
	recap map[string]string // host -> "ok changed skipped failed unreachable ignored rescued"
	exit  int               // 0, 2 (a host failed) or 4 (unreachable only)
	err   string            // in the error, when exit != 0
}

var conformanceCases = []conformanceCase{
	{name: "variable precedence: play < block < task < set_fact < -e",
		files: map[string]string{"site.yaml": `
- hosts: h1
  vars: {a: play, b: play, c: play, d: play, e: play}
  tasks:
    - block:
        - debug: {msg: "{{ .a }} {{ .b }} {{ .c }} {{ .d }} {{ .e }}"}
          vars: {c: task, d: task}
      vars: {b: block, c: block}
    - set_fact: {d: fact, e: fact}
    - debug: {msg: "{{ .d }} {{ .e }}"}
`}, args: []string{"-e", "e=extra"},
		shown: map[string][]string{"h1": {"play block task task extra", "fact extra"}},
		recap: map[string]string{"h1": "3 0 0 0 0 0 0"}},
	{name: "play vars resolve lazily in any order",
		files: map[string]string{"site.yaml": `
- hosts: h1
  vars: {url: "https://{{ .host }}:{{ .port }}", host: "{{ .name }}.example", name: api, port: 443}
  tasks:
    - debug: {msg: "{{ .url }}"}
`}, shown: map[string][]string{"h1": {"https://api.example:443"}}, recap: map[string]string{"h1": "1 0 0 0 0 0 0"}},
	{name: "recursive variables are an error naming the cycle",
		files: map[string]string{"site.yaml": `
- hosts: h1
  vars: {y: "{{ .x }}-y", x: "{{ .y }}-x"}
  tasks:
    - debug: {msg: "{{ .x }}"}
`}, recap: map[string]string{"h1": "0 0 0 1 0 0 0"}, exit: 2, err: "failed on h1"},
	{name: "host variables, group variables, hostvars and groups",
		files: map[string]string{"site.yaml": `
- hosts: all
  tasks:
    - set_fact: {me: "{{ .inventory_hostname }}-x"}
    - debug: {msg: "{{ .groups.web }} {{ index .hostvars \"h3\" \"me\" }}"}
      when: inventory_hostname == "h1"
`}, shown: map[string][]string{"h1": {"[h1 h2] h3-x"}},
		recap: map[string]string{"h1": "2 0 0 0 0 0 0", "h2": "1 0 1 0 0 0 0", "h3": "1 0 1 0 0 0 0"}},
	{name: "register, when, changed_when and failed_when",
		files: map[string]string{"site.yaml": `
- hosts: h1
  tasks:
    - command: echo hello
      register: out
      changed_when: false
    - debug: {msg: "said {{ .out.stdout }}"}
      when: out.stdout == "hello"
    - debug: {msg: never}
      when: out.rc != 0
    - command: "false"
      failed_when: false
`}, shown: map[string][]string{"h1": {"said hello"}}, recap: map[string]string{"h1": "3 1 1 0 0 0 0"}},
	{name: "loop with loop_control and a registered list",
		files: map[string]string{"site.yaml": `
- hosts: h1
  tasks:
    - set_fact: {x: "{{ .item }}"}
      loop: [a, b, c]
      loop_control: {index_var: i}
      register: r
    - debug: {msg: "{{ .x }} {{ len .r.results }} {{ (index .r.results 2).i }}"}
`}, shown: map[string][]string{"h1": {"c 3 2"}}, recap: map[string]string{"h1": "2 0 0 0 0 0 0"}},
	{name: "until retries until the condition holds",
		files: map[string]string{"site.yaml": `
- hosts: h1
  tasks:
    - command: sh -c 'n=$(cat n 2>/dev/null || echo 0); echo $((n+1)) > n; echo $((n+1))'
      register: r
      until: r.stdout == "3"
      retries: 5
      delay: 0
    - debug: {msg: "attempts {{ .r.attempts }}"}
`}, shown: map[string][]string{"h1": {"attempts 3"}}, recap: map[string]string{"h1": "2 1 0 0 0 0 0"}},
	{name: "block, rescue with failed_task and failed_result, always",
		files: map[string]string{"site.yaml": `
- hosts: web
  tasks:
    - block:
        - name: may fail
          command: "test {{ .inventory_hostname }} != h2"
          changed_when: false
        - debug: {msg: block}
      rescue:
        - debug: {msg: "rescued {{ .failed_task.name }} rc={{ .failed_result.rc }}"}
      always:
        - debug: {msg: always}
    - debug: {msg: after}
`}, shown: map[string][]string{"h1": {"block", "always", "after"}, "h2": {"rescued may fail rc=1", "always", "after"}},
		recap: map[string]string{"h1": "4 0 0 0 0 0 0", "h2": "3 0 0 0 0 0 1"}},
	{name: "any_errors_fatal is judged after rescue",
		files: map[string]string{"site.yaml": `
- hosts: all
  any_errors_fatal: true
  tasks:
    - block:
        - fail: {msg: boom}
          when: inventory_hostname == "h2"
      rescue:
        - debug: {msg: rescued}
    - debug: {msg: after}
`}, shown: map[string][]string{"h1": {"after"}, "h2": {"rescued", "after"}, "h3": {"after"}},
		recap: map[string]string{"h1": "1 0 1 0 0 0 0", "h2": "2 0 0 0 0 0 1", "h3": "1 0 1 0 0 0 0"}},
	{name: "any_errors_fatal stops every host",
		files: map[string]string{"site.yaml": `
- hosts: all
  any_errors_fatal: true
  tasks:
    - fail: {msg: boom}
      when: inventory_hostname == "h2"
    - debug: {msg: after}
`}, recap: map[string]string{"h1": "0 0 1 0 0 0 0", "h2": "0 0 0 1 0 0 0", "h3": "0 0 1 0 0 0 0"}, exit: 2, err: "any_errors_fatal"},
	{name: "max_fail_percentage",
		files: map[string]string{"site.yaml": `
- hosts: all
  max_fail_percentage: 50
  tasks:
    - fail: {msg: boom}
      when: inventory_hostname != "h3"
    - debug: {msg: after}
`}, recap: map[string]string{"h1": "0 0 0 1 0 0 0", "h2": "0 0 0 1 0 0 0", "h3": "0 0 1 0 0 0 0"}, exit: 2, err: "max_fail_percentage"},
	{name: "ignore_errors counts the failure as ok and ignored, and changed when it changed, and goes on",
		files: map[string]string{"site.yaml": `
- hosts: h1
  tasks:
    - fail: {msg: boom}
      ignore_errors: true
    - command: "false"
      ignore_errors: true
    - debug: {msg: after}
`}, shown: map[string][]string{"h1": {"after"}}, recap: map[string]string{"h1": "3 1 0 0 0 2 0"}},
	{name: "free-form name=value arguments are arguments, as in Ansible",
		files: map[string]string{"site.yaml": `
- hosts: h1
  vars: {x: the-value}
  tasks:
    - command: pwd chdir=/
      register: here
    - debug: {msg: "{{ .here.stdout }}"}
    - shell: echo hi > f creates=f
    - shell: echo again > f creates=f
    - command: cat f
      register: f
    - debug: {msg: "{{ .f.stdout }}"}
    - debug: var=x
    - debug: msg="two words"
`}, shown: map[string][]string{"h1": {"/", "hi", "x: the-value", "two words"}}, recap: map[string]string{"h1": "8 3 0 0 0 0 0"}},
	{name: "INI [group:vars] values are strings, host line values literals",
		files: map[string]string{"hosts.ini": "[web]\nh1 n=80\n[web:vars]\nhttp_port=80\nansible_connection=local\n", "site.yaml": `
- hosts: h1
  tasks:
    - debug: {msg: "group {{ .http_port }} is a string"}
      when: http_port == "80"
    - debug: {msg: "host {{ .n }} is a number"}
      when: n == 80
`}, shown: map[string][]string{"h1": {"group 80 is a string", "host 80 is a number"}}, recap: map[string]string{"h1": "2 0 0 0 0 0 0"}},
	{name: "a failed host stops, the others go on",
		files: map[string]string{"site.yaml": `
- hosts: web
  tasks:
    - fail: {msg: "boom on {{ .inventory_hostname }}"}
      when: inventory_hostname == "h1"
    - debug: {msg: after}
- hosts: all
  tasks:
    - debug: {msg: second play}
`}, shown: map[string][]string{"h2": {"after", "second play"}, "h3": {"second play"}},
		recap: map[string]string{"h1": "0 0 0 1 0 0 0", "h2": "2 0 1 0 0 0 0", "h3": "1 0 0 0 0 0 0"}, exit: 2, err: "failed on h1"},
	{name: "handlers run once at the end, in declaration order, on the notifying hosts",
		files: map[string]string{"site.yaml": `
- hosts: all
  tasks:
    - command: "true"
      notify: [second, first]
      when: inventory_hostname != "h3"
    - command: "true"
      notify: first
      when: inventory_hostname != "h3"
    - debug: {msg: tasks done}
  handlers:
    - name: first
      debug: {msg: first}
    - name: second
      debug: {msg: second}
      listen: restart
`}, shown: map[string][]string{"h1": {"tasks done", "first", "second"}, "h2": {"tasks done", "first", "second"}, "h3": {"tasks done"}},
		recap: map[string]string{"h1": "5 2 0 0 0 0 0", "h2": "5 2 0 0 0 0 0", "h3": "1 0 2 0 0 0 0"}},
	{name: "force_handlers runs handlers on a host that failed after notifying",
		files: map[string]string{"site.yaml": `
- hosts: h1
  force_handlers: true
  tasks:
    - command: "true"
      notify: h
    - fail: {msg: boom}
  handlers:
    - name: h
      debug: {msg: handler}
`}, shown: map[string][]string{"h1": {"handler"}}, recap: map[string]string{"h1": "2 1 0 1 0 0 0"}, exit: 2},
	{name: "tags select tasks; always and never",
		files: map[string]string{"site.yaml": `
- hosts: h1
  tasks:
    - debug: {msg: a}
      tags: [a]
    - debug: {msg: b}
      tags: [b]
    - debug: {msg: always}
      tags: [always]
    - debug: {msg: never}
      tags: [never]
`}, args: []string{"--tags", "b"}, shown: map[string][]string{"h1": {"b", "always"}}, recap: map[string]string{"h1": "2 0 0 0 0 0 0"}},
	{name: "include_tasks checks its when once; import_tasks on each task",
		files: map[string]string{"site.yaml": `
- hosts: h1
  tasks:
    - set_fact: {done: false}
    - include_tasks: steps.yaml
      when: not done
    - set_fact: {done: false}
    - import_tasks: steps.yaml
      when: not done
`, "steps.yaml": `
- set_fact: {done: true}
- debug: {msg: step2}
`}, shown: map[string][]string{"h1": {"step2"}}, recap: map[string]string{"h1": "5 0 1 0 0 0 0"}},
	{name: "include_tasks with a loop",
		files: map[string]string{"site.yaml": `
- hosts: h1
  tasks:
    - include_tasks: item.yaml
      loop: [x, y]
      loop_control: {loop_var: outer}
`, "item.yaml": `
- debug: {msg: "item {{ .outer }}"}
`}, shown: map[string][]string{"h1": {"item x", "item y"}}, recap: map[string]string{"h1": "2 0 0 0 0 0 0"}},
	{name: "roles run once per play with their dependencies; parameters and allow_duplicates",
		files: map[string]string{"site.yaml": `
- hosts: h1
  roles:
    - ra
    - rb
    - rb
    - {role: rb, vars: {v: other}}
`, "roles/common/tasks/main.yaml": "- debug: {msg: common}\n",
			"roles/ra/meta/main.yaml":     "dependencies: [common]\n",
			"roles/ra/tasks/main.yaml":    "- debug: {msg: ra}\n",
			"roles/rb/meta/main.yaml":     "dependencies: [common]\n",
			"roles/rb/defaults/main.yaml": "v: default\n",
			"roles/rb/tasks/main.yaml":    "- debug: {msg: \"rb {{ .v }}\"}\n"},
		shown: map[string][]string{"h1": {"common", "ra", "rb default", "rb other"}}, recap: map[string]string{"h1": "4 0 0 0 0 0 0"}},
	{name: "serial runs batches in order",
		files: map[string]string{"site.yaml": `
- hosts: all
  serial: 1
  tasks:
    - debug: {msg: one}
    - debug: {msg: two}
`}, order: []string{"h1: one", "h1: two", "h2: one", "h2: two", "h3: one", "h3: two"},
		recap: map[string]string{"h1": "2 0 0 0 0 0 0", "h2": "2 0 0 0 0 0 0", "h3": "2 0 0 0 0 0 0"}},
	// The run_once task counts for the host it ran on.
	{name: "run_once runs on the first host and gives every host its result",
		files: map[string]string{"site.yaml": `
- hosts: web
  tasks:
    - command: "echo {{ .inventory_hostname }}"
      run_once: true
      register: r
      changed_when: false
    - debug: {msg: "{{ .r.stdout }}"}
`}, shown: map[string][]string{"h1": {"h1"}, "h2": {"h1"}}, recap: map[string]string{"h1": "2 0 0 0 0 0 0", "h2": "1 0 0 0 0 0 0"}},
	{name: "delegate_to runs on another host with this host's variables",
		files: map[string]string{"site.yaml": `
- hosts: h2
  tasks:
    - command: "echo {{ .inventory_hostname }}"
      delegate_to: localhost
      register: r
      changed_when: false
    - debug: {msg: "{{ .r.stdout }}"}
`}, shown: map[string][]string{"h2": {"h2"}}, recap: map[string]string{"h2": "2 0 0 0 0 0 0"}},
	{name: "host patterns: subscripts, intersection, exclusion",
		files: map[string]string{"site.yaml": `
- hosts: web[0]
  tasks: [{debug: {msg: "first"}}]
- hosts: all[1:3]
  tasks: [{debug: {msg: "slice"}}]
- hosts: all:!web
  tasks: [{debug: {msg: "not web"}}]
- hosts: all:&db
  tasks: [{debug: {msg: "db"}}]
`}, shown: map[string][]string{"h1": {"first"}, "h2": {"slice"}, "h3": {"slice", "not web", "db"}},
		recap: map[string]string{"h1": "1 0 0 0 0 0 0", "h2": "1 0 0 0 0 0 0", "h3": "3 0 0 0 0 0 0"}},
	{name: "meta end_host and end_play",
		files: map[string]string{"site.yaml": `
- hosts: all
  tasks:
    - meta: end_host
      when: inventory_hostname == "h1"
    - debug: {msg: still}
    - meta: end_play
    - debug: {msg: never}
- hosts: h1
  tasks: [{debug: {msg: next play}}]
`}, shown: map[string][]string{"h1": {"next play"}, "h2": {"still"}, "h3": {"still"}},
		recap: map[string]string{"h1": "1 0 0 0 0 0 0", "h2": "1 0 0 0 0 0 0", "h3": "1 0 0 0 0 0 0"}},
	{name: "debug verbosity needs -v",
		files: map[string]string{"site.yaml": `
- hosts: h1
  tasks:
    - debug: {msg: quiet, verbosity: 1}
    - debug: {msg: loud}
`}, shown: map[string][]string{"h1": {"loud"}}, recap: map[string]string{"h1": "1 0 1 0 0 0 0"}},
	{name: "set_fact cacheable is not a variable",
		files: map[string]string{"site.yaml": `
- hosts: h1
  tasks:
    - set_fact: {x: 1, cacheable: true}
    - debug: {msg: "{{ .x }} {{ .cacheable | default \"unset\" }}"}
`}, shown: map[string][]string{"h1": {"1 unset"}}, recap: map[string]string{"h1": "2 0 0 0 0 0 0"}},
	{name: "check mode changes nothing; check_mode: false runs anyway",
		files: map[string]string{"site.yaml": `
- hosts: h1
  tasks:
    - command: "echo probe"
      check_mode: false
      register: r
      changed_when: false
    - command: "touch made"
    - debug: {msg: "{{ .r.stdout }}"}
`}, args: []string{"--check"}, shown: map[string][]string{"h1": {"probe"}}, recap: map[string]string{"h1": "2 0 1 0 0 0 0"}},
	{name: "strategy from a template",
		files: map[string]string{"site.yaml": `
- hosts: web
  strategy: "{{ .s }}"
  tasks: [{debug: {msg: "{{ .s }}"}}]
`}, args: []string{"-e", "s=free"}, shown: map[string][]string{"h1": {"free"}, "h2": {"free"}},
		recap: map[string]string{"h1": "1 0 0 0 0 0 0", "h2": "1 0 0 0 0 0 0"}},
	{name: "gather_facts sets facts.*",
		files: map[string]string{"site.yaml": `
- hosts: h1
  gather_facts: true
  tasks:
    - debug: {msg: "{{ gt .facts.cpus 0 }} {{ ne .facts.arch \"\" }}"}
`}, shown: map[string][]string{"h1": {"true true"}}, recap: map[string]string{"h1": "2 0 0 0 0 0 0"}},
	{name: "connection: local runs a play's hosts on the control machine",
		files: map[string]string{"site.yaml": `
- hosts: all
  connection: local
  tasks:
    - command: "echo {{ .inventory_hostname }}"
      register: r
      changed_when: false
    - debug: {msg: "{{ .r.stdout }}"}
`, "hosts.ini": "[web]\nfar ansible_host=192.0.2.1\n"},
		args:  []string{"-i", "hosts.ini"},
		shown: map[string][]string{"far": {"far"}}, recap: map[string]string{"far": "2 0 0 0 0 0 0"}},
	{name: "an unreachable host ends the run as unreachable",
		files: map[string]string{"site.yaml": `
- hosts: all
  tasks: [{debug: {msg: hi}}]
`, "hosts.ini": "[web]\nh1 ansible_connection=local\nfar ansible_host=192.0.2.1\n"},
		args:  []string{"-i", "hosts.ini"},
		shown: map[string][]string{"h1": {"hi"}}, recap: map[string]string{"h1": "1 0 0 0 0 0 0", "far": "0 0 0 0 1 0 0"}, exit: 4, err: "unreachable: far"},
}

// TestConformance runs one playbook per feature of the language through
// `kubexm play` on local hosts, and checks what a user sees: what each host
// printed and in which order, the recap counts, and the exit code.
func TestConformance(t *testing.T) {
	for _, tc := range conformanceCases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			t.Chdir(dir)
			files := maps.Clone(tc.files)
			if _, ok := files["hosts.ini"]; !ok {
				files["hosts.ini"] = conformanceInventory
			}
			for name, data := range files {
				p := filepath.Join(dir, name)
				if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			args := append([]string{"site.yaml", "-i", "hosts.ini", "--output", "json", "--no-journal"}, tc.args...)
			out, err := runCmd(t, realApp(), args...)
			exit := 0
			var ee *lifecycle.ExitError
			if errors.As(err, &ee) {
				exit = ee.Code
			} else if err != nil {
				t.Fatalf("run: %v\n%s", err, out)
			}
			if exit != tc.exit || (tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err))) {
				t.Errorf("exit %d (%v), want %d with %q", exit, err, tc.exit, tc.err)
			}
			shown := map[string][]string{}
			var order []string
			var recap *model.Recap
			sc := bufio.NewScanner(strings.NewReader(out))
			sc.Buffer(nil, 1<<20)
			for sc.Scan() {
				var e model.Event
				if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
					t.Fatalf("not JSON: %s", sc.Text())
				}
				if e.Kind == model.EventHostResult && e.Report && (e.Status == model.StatusOK || e.Status == model.StatusChanged) {
					shown[e.Host] = append(shown[e.Host], e.Message)
					order = append(order, e.Host+": "+e.Message)
				}
				if e.Kind == model.EventRecap {
					recap = e.Recap
				}
			}
			if tc.shown != nil || tc.order == nil {
				want := tc.shown
				if want == nil {
					want = map[string][]string{}
				}
				if !maps.EqualFunc(shown, want, slices.Equal) {
					t.Errorf("printed %q, want %q", shown, want)
				}
			}
			if tc.order != nil && !slices.Equal(order, tc.order) {
				t.Errorf("order %q, want %q", order, tc.order)
			}
			if recap == nil {
				t.Fatalf("no recap:\n%s", out)
			}
			got := map[string]string{}
			for h, s := range recap.Hosts {
				got[h] = fmt.Sprintf("%d %d %d %d %d %d %d", s.OK, s.Changed, s.Skipped, s.Failed, s.Unreachable, s.Ignored, s.Rescued)
			}
			if !maps.Equal(got, tc.recap) {
				t.Errorf("recap %v, want %v", got, tc.recap)
			}
			if !slices.IsSorted(recap.Order) {
				t.Errorf("recap hosts not sorted: %v", recap.Order)
			}
		})
	}
}
