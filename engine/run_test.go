package engine

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/mensylisir/kubexm/engine/model"
	"github.com/mensylisir/kubexm/engine/run"
)

func TestRunFeatures(t *testing.T) {
	cases := []struct {
		name    string
		files   map[string]string
		opts    RunOptions
		want    map[string]model.HostStats
		calls   []string // sorted probe records, when set
		wantErr string
	}{
		{
			name: "when, loop and register",
			files: map[string]string{"playbook.yaml": `
name: t
version: 1.0.0
plays:
  - name: p
    hosts: web
    tasks:
      - probe: {id: a, msg: "{{ .inventory_hostname }}-{{ .port }}", changed: true}
        register: r
      - probe: {id: b, msg: "{{ .item }}"}
        loop: [x, y]
      - probe: {id: c}
        when: r.changed and inventory_hostname == "h1"
      - probe: {id: d, msg: "{{ .it }}/{{ .i }}"}
        loop: "{{ .groups.web }}"
        loop_control: {loop_var: it, index_var: i}
        when: it != "h2"
`},
			want:  map[string]model.HostStats{"h1": stats(4, 1, 0, 0), "h2": stats(3, 1, 1, 0)},
			calls: []string{"h1:a=h1-80", "h1:b=x", "h1:b=y", "h1:c", "h1:d=h1/0", "h2:a=h2-80", "h2:b=x", "h2:b=y", "h2:d=h1/0"},
		},
		{
			name: "failed host leaves the play, others go on",
			files: map[string]string{"playbook.yaml": `
- hosts: all
  tasks:
    - probe: {id: a, fail: "{{ eq .inventory_hostname \"h2\" }}"}
    - probe: b
`},
			want:    map[string]model.HostStats{"h1": stats(2, 0, 0, 0), "h2": stats(0, 0, 0, 1), "h3": stats(2, 0, 0, 0)},
			calls:   []string{"h1:a", "h1:b", "h2:a", "h3:a", "h3:b"},
			wantErr: "failed on h2",
		},
		{
			name: "ignore_errors, changed_when, failed_when",
			files: map[string]string{"playbook.yaml": `
- hosts: h1
  tasks:
    - probe: {id: a, fail: true}
      ignore_errors: true
    - probe: {id: b, data: {rc: 3}}
      register: out
      failed_when: out.rc > 2
      ignore_errors: true
    - probe: {id: c, changed: true}
      changed_when: false
    - probe: {id: d, fail: true}
      failed_when: false
      changed_when: result.host == "h1"
    - probe: {id: e}
      changed_when: true
      failed_when: true
      ignore_errors: true
`},
			// As Ansible: an ignored failure is ok and ignored, and changed
			// when it changed (e).
			want:  map[string]model.HostStats{"h1": {OK: 5, Changed: 2, Ignored: 3}},
			calls: []string{"h1:a", "h1:b", "h1:c", "h1:d", "h1:e"},
		},
		{
			name: "block rescue always",
			files: map[string]string{"playbook.yaml": `
- hosts: web
  tasks:
    - name: guarded
      block:
        - probe: {id: a, fail: "{{ eq .inventory_hostname \"h1\" }}"}
        - probe: b
      rescue:
        - probe: rescue
      always:
        - probe: always
    - probe: after
`},
			want:  map[string]model.HostStats{"h1": {OK: 3, Rescued: 1}, "h2": stats(4, 0, 0, 0)},
			calls: []string{"h1:a", "h1:after", "h1:always", "h1:rescue", "h2:a", "h2:after", "h2:always", "h2:b"},
		},
		{
			name: "failure in rescue fails the host, always still runs",
			files: map[string]string{"playbook.yaml": `
- hosts: h1
  tasks:
    - block:
        - probe: {id: a, fail: true}
      rescue:
        - probe: {id: r, fail: true}
      always:
        - probe: always
    - probe: after
`},
			want:    map[string]model.HostStats{"h1": {OK: 1, Failed: 2}},
			calls:   []string{"h1:a", "h1:always", "h1:r"},
			wantErr: "failed on h1",
		},
		{
			name: "retries until",
			files: map[string]string{"playbook.yaml": `
- hosts: h1
  tasks:
    - set_fact: {n: 0}
    - probe: {id: a, data: {v: 1}}
      register: r
      until: r.attempts >= 3
      retries: 5
      delay: 0
    - probe: {id: b, msg: "{{ .r.attempts }}"}
    - probe: {id: c}
      until: false
      retries: 1
      delay: 0
`},
			want:    map[string]model.HostStats{"h1": {OK: 3, Failed: 1}},
			calls:   []string{"h1:a", "h1:a", "h1:a", "h1:b=3", "h1:c", "h1:c"},
			wantErr: "failed",
		},
		{
			name: "run_once and delegate_to",
			files: map[string]string{"playbook.yaml": `
- hosts: all
  tasks:
    - probe: {id: once, msg: "{{ .inventory_hostname }}"}
      run_once: true
      register: o
    - probe: {id: got, msg: "{{ .o.host }}"}
    - probe: {id: del}
      delegate_to: localhost
      when: inventory_hostname == "h3"
      register: d
    - probe: {id: dh, msg: "{{ .d.delegate_to }}"}
      when: inventory_hostname == "h3"
`},
			want:  map[string]model.HostStats{"h1": stats(2, 0, 2, 0), "h2": stats(1, 0, 2, 0), "h3": stats(3, 0, 0, 0)},
			calls: []string{"h1:got=h1", "h1:once=h1", "h2:got=h1", "h3:del", "h3:dh=localhost", "h3:got=h1"},
		},
		{
			name: "handlers run once at the end on notifying hosts, and on flush",
			files: map[string]string{"playbook.yaml": `
- hosts: all
  tasks:
    - probe: {id: a, changed: "{{ ne .inventory_hostname \"h3\" }}"}
      notify: restart
    - probe: {id: b, changed: true}
      notify: [reload, restart]
      when: inventory_hostname == "h1"
    - meta: flush_handlers
    - probe: {id: c, changed: true}
      notify: later
      when: inventory_hostname == "h2"
  handlers:
    - name: restart
      probe: restart
    - name: reload
      probe: reload
    - name: other
      probe: {id: late}
      listen: later
`},
			want:  map[string]model.HostStats{"h1": stats(4, 2, 1, 0), "h2": stats(4, 2, 1, 0), "h3": stats(1, 0, 2, 0)},
			calls: []string{"h1:a", "h1:b", "h1:reload", "h1:restart", "h2:a", "h2:c", "h2:late", "h2:restart", "h3:a"},
		},
		{
			name: "meta end_host and end_play",
			files: map[string]string{"playbook.yaml": `
- hosts: all
  tasks:
    - meta: end_host
      when: inventory_hostname == "h2"
    - probe: a
- hosts: all
  tasks:
    - probe: b
    - meta: end_play
    - probe: never
- hosts: h1
  tasks:
    - probe: c
`},
			want:  map[string]model.HostStats{"h1": stats(3, 0, 0, 0), "h2": stats(1, 0, 0, 0), "h3": stats(2, 0, 0, 0)},
			calls: []string{"h1:a", "h1:b", "h1:c", "h2:b", "h3:a", "h3:b"},
		},
		{
			name: "tags and skip tags with always and never",
			files: map[string]string{"playbook.yaml": `
- hosts: h1
  tags: [play]
  tasks:
    - probe: a
      tags: [x]
    - probe: b
      tags: [y]
    - probe: c
      tags: [always]
    - probe: d
      tags: [never, debug]
    - block:
        - probe: e
      tags: [x]
`},
			opts:  RunOptions{Tags: []string{"x"}},
			want:  map[string]model.HostStats{"h1": stats(3, 0, 0, 0)},
			calls: []string{"h1:a", "h1:c", "h1:e"},
		},
		{
			name: "skip tags and never on request",
			files: map[string]string{"playbook.yaml": `
- hosts: h1
  tasks:
    - probe: a
      tags: [x]
    - probe: b
    - probe: d
      tags: [never, debug]
`},
			opts:  RunOptions{Tags: []string{"debug", "untagged"}, SkipTags: []string{"x"}},
			want:  map[string]model.HostStats{"h1": stats(2, 0, 0, 0)},
			calls: []string{"h1:b", "h1:d"},
		},
		{
			name: "start at task glob",
			files: map[string]string{"playbook.yaml": `
- hosts: h1
  tasks:
    - {name: one, probe: a}
    - {name: install two, probe: b}
    - {name: three, probe: c}
`},
			opts:  RunOptions{StartAt: "install*"},
			want:  map[string]model.HostStats{"h1": stats(2, 0, 0, 0)},
			calls: []string{"h1:b", "h1:c"},
		},
		{
			// A guard tagged always (the cluster's identity) runs before the
			// start point too: a partial re-run must not skip what a whole
			// one would refuse on.
			name: "start at task runs always-tagged tasks before it",
			files: map[string]string{"playbook.yaml": `
- hosts: h1
  tags: [always]
  tasks:
    - {name: guard, probe: g}
- hosts: h1
  tasks:
    - {name: one, probe: a}
    - {name: install two, probe: b}
    - {name: three, probe: c}
`},
			opts:  RunOptions{StartAt: "install*"},
			want:  map[string]model.HostStats{"h1": stats(3, 0, 0, 0)},
			calls: []string{"h1:b", "h1:c", "h1:g"},
		},
		{
			// The guide's example: the name as --list-tasks prints it.
			name: "start at a role's task as listed",
			files: map[string]string{"playbook.yaml": `
- hosts: h1
  roles: [etcd]
`, "roles/etcd/tasks/main.yaml": `
- {name: Install etcd, probe: a}
- {name: Start etcd, probe: b}
- {name: Check etcd, probe: c}
`},
			opts:  RunOptions{StartAt: "etcd : Start*"},
			want:  map[string]model.HostStats{"h1": stats(2, 0, 0, 0)},
			calls: []string{"h1:b", "h1:c"},
		},
		{
			name: "limit and host patterns",
			files: map[string]string{"playbook.yaml": `
- hosts: "all:!db"
  tasks:
    - probe: a
- hosts: "web:&h*"
  tasks:
    - probe: b
- hosts: localhost
  tasks:
    - probe: c
`},
			opts:  RunOptions{Limit: "h1,localhost"},
			want:  map[string]model.HostStats{"h1": stats(2, 0, 0, 0), "localhost": stats(1, 0, 0, 0)},
			calls: []string{"h1:a", "h1:b", "localhost:c"},
		},
		{
			name: "any_errors_fatal stops everything",
			files: map[string]string{"playbook.yaml": `
- hosts: all
  any_errors_fatal: true
  tasks:
    - probe: {id: a, fail: "{{ eq .inventory_hostname \"h1\" }}"}
    - probe: b
- hosts: all
  tasks:
    - probe: c
`},
			want:    map[string]model.HostStats{"h1": stats(0, 0, 0, 1), "h2": stats(1, 0, 0, 0), "h3": stats(1, 0, 0, 0)},
			calls:   []string{"h1:a", "h2:a", "h3:a"},
			wantErr: "any_errors_fatal",
		},
		{
			name: "serial batches and max_fail_percentage",
			files: map[string]string{"playbook.yaml": `
- hosts: all
  serial: 1
  max_fail_percentage: 0
  tasks:
    - probe: {id: a, fail: "{{ eq .inventory_hostname \"h2\" }}"}
    - probe: b
`},
			want:    map[string]model.HostStats{"h1": stats(2, 0, 0, 0), "h2": stats(0, 0, 0, 1)},
			calls:   []string{"h1:a", "h1:b", "h2:a"},
			wantErr: "max_fail_percentage",
		},
		{
			name: "serial from a template",
			files: map[string]string{"playbook.yaml": `
- hosts: all
  serial: "{{ .batch }}"
  max_fail_percentage: 0
  tasks:
    - probe: {id: a, fail: "{{ eq .inventory_hostname \"h3\" }}"}
    - probe: b
`},
			opts:    RunOptions{ExtraVars: map[string]any{"batch": 2}},
			want:    map[string]model.HostStats{"h1": stats(2, 0, 0, 0), "h2": stats(2, 0, 0, 0), "h3": stats(0, 0, 0, 1)},
			calls:   []string{"h1:a", "h1:b", "h2:a", "h2:b", "h3:a"},
			wantErr: "max_fail_percentage",
		},
		{
			name: "serial from a template that is no size",
			files: map[string]string{"playbook.yaml": `
- hosts: all
  serial: "{{ .batch }}"
  tasks:
    - probe: a
`},
			opts:    RunOptions{ExtraVars: map[string]any{"batch": "many"}},
			want:    map[string]model.HostStats{},
			wantErr: `serial: "many" is not a number of hosts`,
		},
		{
			name: "free strategy",
			files: map[string]string{"playbook.yaml": `
- hosts: all
  strategy: free
  tasks:
    - probe: {id: a, sleep: "{{ if eq .inventory_hostname \"h1\" }}50ms{{ else }}0s{{ end }}"}
    - probe: b
`},
			want:  map[string]model.HostStats{"h1": stats(2, 0, 0, 0), "h2": stats(2, 0, 0, 0), "h3": stats(2, 0, 0, 0)},
			calls: []string{"h1:a", "h1:b", "h2:a", "h2:b", "h3:a", "h3:b"},
		},
		{
			name: "variable precedence",
			files: map[string]string{"playbook.yaml": `
- hosts: h1
  gather_facts: true
  vars:
    pv: play
    port: 8080
    x: play
  tasks:
    - probe: {id: a, msg: "{{ .spec.name }} {{ .gv }} {{ .role }} {{ .port }} {{ .facts.hostname }} {{ .x }}"}
    - set_fact: {x: fact}
    - probe: {id: b, msg: "{{ .x }} {{ .tv }}"}
      vars: {x: task, tv: "{{ .pv }}-t"}
    - probe: {id: c, msg: "{{ .e }} {{ .hostvars.h1.x }}"}
    - block:
        - probe: {id: d, msg: "{{ .bv }}"}
      vars: {bv: "{{ .x }}-b"}
`},
			opts:  RunOptions{ExtraVars: map[string]any{"e": "extra", "port": 9}},
			want:  map[string]model.HostStats{"h1": stats(6, 0, 0, 0)},
			calls: []string{"h1:a=test web web 9 h1 play", "h1:b=fact play-t", "h1:c=extra fact", "h1:d=fact-b", "h1:setup"},
		},
		{
			name: "a play variable derived from another one sees -e",
			files: map[string]string{"playbook.yaml": `
- hosts: h1
  vars:
    a: one
    b: "{{ .a }}-derived"
  tasks:
    - probe: {id: x, msg: "{{ .a }} {{ .b }}"}
`},
			opts:  RunOptions{ExtraVars: map[string]any{"a": "two"}},
			want:  map[string]model.HostStats{"h1": stats(1, 0, 0, 0)},
			calls: []string{"h1:x=two two-derived"},
		},
		{
			name: "check mode reaches builtins",
			files: map[string]string{"playbook.yaml": `
- hosts: h1
  tasks:
    - probe: a
`},
			opts:  RunOptions{Check: true},
			want:  map[string]model.HostStats{"h1": stats(1, 0, 0, 0)},
			calls: []string{"h1:a(check)"},
		},
		{
			name: "changed_when and failed_when are not judged on a skipped result",
			files: map[string]string{"playbook.yaml": `
- hosts: h1
  tasks:
    - probe: {id: a, skip: true}
      register: out
      changed_when: out.stdout == "x"
      failed_when: out.rc != 0
      until: out.rc == 0
      retries: 3
`},
			want:  map[string]model.HostStats{"h1": stats(0, 0, 1, 0)},
			calls: []string{"h1:a"},
		},
		{
			name: "check_mode overrides --check per task and block",
			files: map[string]string{"playbook.yaml": `
- hosts: h1
  tasks:
    - probe: a
      check_mode: false
    - block:
        - probe: b
      check_mode: false
    - probe: c
    - probe: d
      check_mode: true
`},
			opts:  RunOptions{Check: true},
			want:  map[string]model.HostStats{"h1": stats(4, 0, 0, 0)},
			calls: []string{"h1:a", "h1:b", "h1:c(check)", "h1:d(check)"},
		},
		{
			name: "import and include tasks",
			files: map[string]string{
				"playbook.yaml": `
- hosts: web
  tasks:
    - import_tasks: common.yaml
      when: inventory_hostname == "h1"
    - include_tasks: "{{ .role }}.yaml"
    - include_tasks: {file: loop.yaml, vars: {pre: p}}
      loop: [1, 2]
`,
				"common.yaml": "- probe: common\n- probe: common2\n",
				"web.yaml":    "- probe: {id: web, msg: \"{{ .inventory_hostname }}\"}\n",
				"loop.yaml":   "- probe: {id: loop, msg: \"{{ .pre }}{{ .item }}\"}\n",
			},
			want:  map[string]model.HostStats{"h1": stats(5, 0, 0, 0), "h2": stats(3, 0, 2, 0)},
			calls: []string{"h1:common", "h1:common2", "h1:loop=p1", "h1:loop=p2", "h1:web=h1", "h2:loop=p1", "h2:loop=p2", "h2:web=h2"},
		},
		{
			name: "roles with defaults, vars, params, deps, handlers and include_role",
			files: map[string]string{
				"playbook.yaml": `
- hosts: h1
  vars: {who: play}
  roles:
    - role: app
      vars: {param: p1}
  tasks:
    - include_role: {name: app, tasks_from: extra}
    - import_role: {name: base}
`,
				"roles/app/defaults/main.yaml": "who: default\nparam: none\n",
				"roles/app/vars/main.yaml":     "rv: rolevar\n",
				"roles/app/meta/main.yaml":     "dependencies: [base]\n",
				"roles/app/tasks/main.yaml":    "- probe: {id: app, msg: \"{{ .who }} {{ .param }} {{ .rv }}\", changed: true}\n  notify: app restarted\n",
				"roles/app/tasks/extra.yaml":   "- probe: {id: extra, msg: \"{{ .role_name }}\"}\n",
				"roles/app/handlers/main.yaml": "- name: app restarted\n  probe: handler\n",
				"roles/base/tasks/main.yml":    "- probe: base\n",
			},
			want:  map[string]model.HostStats{"h1": stats(5, 1, 0, 0)},
			calls: []string{"h1:app=play p1 rolevar", "h1:base", "h1:base", "h1:extra=app", "h1:handler"},
		},
		{
			name: "a variable redefined by an imported role reaches the outer variables derived from it",
			files: map[string]string{
				"playbook.yaml": `
- hosts: h1
  vars: {base: x}
  roles: [outer]
`,
				"roles/outer/defaults/main.yaml": "a: \"{{ .base }}\"\nb: \"{{ .a }}-b\"\n",
				"roles/outer/tasks/main.yaml":    "- import_role: {name: inner}\n",
				"roles/inner/defaults/main.yaml": "a: \"{{ .base }}-inner\"\n",
				"roles/inner/tasks/main.yaml":    "- probe: {id: p, msg: \"{{ .a }} {{ .b }}\"}\n",
			},
			want:  map[string]model.HostStats{"h1": stats(1, 0, 0, 0)},
			calls: []string{"h1:p=x-inner x-inner-b"},
		},
		{
			name: "shell through the local transport with environment",
			files: map[string]string{"playbook.yaml": `
- hosts: localhost
  tasks:
    - shell: echo "$GREETING {{ .inventory_hostname }}"
      environment: {GREETING: hello}
      register: out
    - probe: {id: out, msg: "{{ index .out.stdout_lines 0 }} rc={{ .out.rc }}"}
    - shell: exit 3
      register: bad
      failed_when: bad.rc != 3
`},
			want:  map[string]model.HostStats{"localhost": stats(3, 2, 0, 0)},
			calls: []string{"localhost:out=hello localhost rc=0"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rr := runFiles(t, tc.files, tc.opts)
			if tc.wantErr == "" && rr.err != nil {
				t.Fatalf("run: %v", rr.err)
			}
			if tc.wantErr != "" {
				if rr.err == nil || !strings.Contains(rr.err.Error(), tc.wantErr) {
					t.Fatalf("run error = %v, want it to contain %q", rr.err, tc.wantErr)
				}
				if !errors.Is(rr.err, run.ErrFailed) {
					t.Errorf("run error %v does not wrap ErrFailed", rr.err)
				}
			}
			checkRecap(t, rr.recap, tc.want)
			if tc.calls != nil {
				if got := rr.calls.sorted(); !slices.Equal(got, tc.calls) {
					t.Errorf("calls:\n got %q\nwant %q", got, tc.calls)
				}
			}
		})
	}
}
