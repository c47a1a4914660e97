package engine

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/mensylisir/kubexm/inventory"
)

// TestPrecedenceLevels sets x at every level up to one and checks that
// this level wins, in a template and in `when:` alike: one case per level
// of Ansible's table that kubexm has.
func TestPrecedenceLevels(t *testing.T) {
	levels := []string{"builtin", "shared_default", "role_default", "inventory", "group", "host", "play", "vars_file",
		"role_var", "block", "task", "set_fact", "role_param", "include_param", "extra"}
	for i, top := range levels {
		t.Run(top, func(t *testing.T) {
			on := func(l string) bool { return slices.Index(levels, l) <= i }
			set := func(l string) string {
				if on(l) {
					return fmt.Sprintf("{x: %s}", l)
				}
				return "{}"
			}
			pb := "defaults_files: [df.yaml]\nplays:\n  - hosts: h1\n    vars: " + set("play") + "\n    vars_files: [vf.yaml]\n    tasks:\n"
			if on("set_fact") {
				pb += "      - set_fact: {x: set_fact}\n"
			}
			pb += "      - include_role: {name: r, vars: " + set("role_param") + "}\n"
			files := map[string]string{
				"playbook.yaml":              pb,
				"vf.yaml":                    strings.Trim(set("vars_file"), "{}") + "\n",
				"df.yaml":                    strings.Trim(set("shared_default"), "{}") + "\n",
				"roles/r/defaults/main.yaml": strings.Trim(set("role_default"), "{}") + "\n",
				"roles/r/vars/main.yaml":     strings.Trim(set("role_var"), "{}") + "\n",
				"roles/r/tasks/main.yaml":    "- include_tasks: inner.yaml\n  vars: " + set("include_param") + "\n",
				"roles/r/tasks/inner.yaml": "- block:\n    - probe: {id: x, msg: \"{{ .x }}\"}\n      when: x == \"" + top + "\"\n      vars: " + set("task") +
					"\n  vars: " + set("block") + "\n",
			}
			inv := &inventory.Inventory{
				Hosts:     []inventory.Host{{Name: "h1", Local: true, Vars: map[string]any{}}},
				Groups:    map[string][]string{"g": {"h1"}},
				GroupVars: map[string]map[string]any{"g": {}},
				Vars:      map[string]any{},
				Source:    "test",
			}
			opts := RunOptions{Defaults: map[string]any{}, ExtraVars: map[string]any{}}
			for l, m := range map[string]map[string]any{"builtin": opts.Defaults, "inventory": inv.Vars, "group": inv.GroupVars["g"], "host": inv.Hosts[0].Vars, "extra": opts.ExtraVars} {
				if on(l) {
					m["x"] = l
				}
			}
			rr := runFilesInv(t, files, inv, opts)
			if rr.err != nil {
				t.Fatalf("run: %v", rr.err)
			}
			if got, want := rr.calls.sorted(), []string{"h1:x=" + top}; !slices.Equal(got, want) {
				t.Errorf("x at %s: calls %q, want %q (the template or when: saw a lower level)", top, got, want)
			}
		})
	}
}

// TestRoleDefaultTemplatesSeeHigherLevels: a role default derived from
// another variable reads the highest-precedence value of it, so a host
// var reaches a role's derived defaults.
func TestRoleDefaultTemplatesSeeHigherLevels(t *testing.T) {
	files := map[string]string{
		"playbook.yaml":              "- hosts: h1\n  roles: [r]\n",
		"roles/r/defaults/main.yaml": "flag: \"--v={{ .level }}\"\nlevel: 1\n",
		"roles/r/tasks/main.yaml":    "- probe: {id: flag, msg: \"{{ .flag }}\"}\n",
	}
	inv := &inventory.Inventory{Hosts: []inventory.Host{{Name: "h1", Local: true, Vars: map[string]any{"level": 4}}}, Source: "test"}
	rr := runFilesInv(t, files, inv, RunOptions{})
	if rr.err != nil {
		t.Fatal(rr.err)
	}
	if got := rr.calls.sorted(); !slices.Equal(got, []string{"h1:flag=--v=4"}) {
		t.Errorf("calls %q, want the host var in the role default's template", got)
	}
}

// TestInventoryTemplates: group, host and all variables holding {{ }} are
// rendered like any other layer's, against the highest-precedence values
// (a shared default, a role default, another host's own value), per host;
// the spec stays data; a template that does not parse fails the run before
// any task, naming the inventory, host and variable.
func TestInventoryTemplates(t *testing.T) {
	files := map[string]string{
		"playbook.yaml":              "defaults_files: [df.yaml]\nplays:\n  - hosts: all\n    roles: [r]\n",
		"df.yaml":                    "version: v1\n",
		"roles/r/defaults/main.yaml": "arch: amd64\n",
		"roles/r/tasks/main.yaml":    "- probe: {id: v, msg: \"{{ toJson .images }} {{ .file }} {{ .spec.password }}\"}\n- probe: {id: secret, msg: \"{{ eq .token \\\"t{{ .version }}\\\" }}\"}\n",
	}
	inv := &inventory.Inventory{
		Hosts: []inventory.Host{
			{Name: "h1", Local: true, Vars: map[string]any{}},
			{Name: "h2", Local: true, Vars: map[string]any{"arch": "arm64"}},
		},
		Groups:    map[string][]string{"g": {"h1", "h2"}},
		GroupVars: map[string]map[string]any{"g": {"file": "f-{{ .arch }}-{{ .version }}"}},
		Vars: map[string]any{
			"images": []any{map[string]any{"tag": "{{ .version }}"}},
			"spec":   map[string]any{"password": "p{{w"},
			"token":  "t{{ .version }}",
		},
		OtherSecrets: []string{"t{{ .version }}"},
		Source:       "cluster.yaml",
	}
	rr := runFilesInv(t, files, inv, RunOptions{})
	if rr.err != nil {
		t.Fatal(rr.err)
	}
	// The secret's value is used as written, never rendered.
	want := []string{"h1:secret=true", `h1:v=[{"tag":"v1"}] f-amd64-v1 p{{w`, "h2:secret=true", `h2:v=[{"tag":"v1"}] f-arm64-v1 p{{w`}
	if got := rr.calls.sorted(); !slices.Equal(got, want) {
		t.Errorf("calls %q, want %q", got, want)
	}

	inv.GroupVars["g"]["file"] = "f-{{ .arch "
	rr = runFilesInv(t, files, inv, RunOptions{})
	if rr.err == nil || !strings.Contains(rr.err.Error(), "cluster.yaml: host h1: variable file: ") || len(rr.calls.sorted()) != 0 {
		t.Errorf("a broken template in group vars: %v, calls %q", rr.err, rr.calls.sorted())
	}
}

// TestInventoryTemplatesWhereUnrendered: an inventory template reading a
// variable only some playbooks have (their shared defaults) does not stop
// a play that lacks it: it is undefined there (?? and defined() see that),
// and a task that uses it fails saying why.
func TestInventoryTemplatesWhereUnrendered(t *testing.T) {
	inv := &inventory.Inventory{
		Hosts:  []inventory.Host{{Name: "h1", Local: true, Vars: map[string]any{}}},
		Vars:   map[string]any{"extra": []any{map[string]any{"file": "{{ .plugin_file }}"}}},
		Source: "cluster.yaml",
	}
	files := map[string]string{
		"playbook.yaml": "- hosts: h1\n  tasks:\n" +
			"    - probe: {id: a, msg: \"{{ len (.extra | default (list)) }}\"}\n      when: not defined(\"extra\") && len(extra ?? []) == 0\n" +
			"    - probe: {id: b, msg: \"{{ .extra }}\"}\n",
	}
	rr := runFilesInv(t, files, inv, RunOptions{})
	if got := rr.calls.sorted(); !slices.Equal(got, []string{"h1:a=0"}) {
		t.Errorf("calls %q, want only the task that does not need extra", got)
	}
	if events := fmt.Sprintf("%+v", rr.events); rr.err == nil || !strings.Contains(events, `the inventory sets it, but its template could not be rendered here: undefined variable "plugin_file"`) {
		t.Errorf("the task using extra: %v\n%s", rr.err, events)
	}
}

// TestDerivedDefaultsFollowWhatTheyRead: a role default derived from other
// variables is rendered again whenever one of them holds a new value (a
// set_fact, a register, a loop item, a role parameter), on each host, and
// a template on the clock or randomness every time, while a rendering whose
// inputs are unchanged is reused.
func TestDerivedDefaultsFollowWhatTheyRead(t *testing.T) {
	files := map[string]string{
		"playbook.yaml": "- hosts: all\n  roles: [r]\n- hosts: all\n  roles: [{role: r, vars: {level: 9}}]\n",
		"roles/r/defaults/main.yaml": "flag: \"--v={{ .level }}{{ with .out | default \\\"\\\" }}/{{ .msg }}{{ end }}\"\nlevel: 1\n" +
			"derived: \"{{ .flag }}+\"\nitems: \"{{ list .inventory_hostname .level }}\"\nstamp: \"{{ randAlphaNum 12 }}\"\n",
		"roles/r/tasks/main.yaml": `
- probe: {id: a, msg: "{{ .derived }}"}
- set_fact: {level: 2}
- probe: {id: b, msg: "{{ .derived }}"}
- probe: {id: reg, msg: "r{{ .level }}"}
  register: out
- probe: {id: c, msg: "{{ .derived }} {{ index .items 1 }}"}
- probe: {id: s1, msg: "{{ .stamp }}"}
- probe: {id: s2, msg: "{{ .stamp }}"}
`,
	}
	inv := &inventory.Inventory{Hosts: []inventory.Host{
		{Name: "h1", Local: true, Vars: map[string]any{}},
		{Name: "h2", Local: true, Vars: map[string]any{"level": 5}},
	}, Source: "test"}
	rr := runFilesInv(t, files, inv, RunOptions{})
	if rr.err != nil {
		t.Fatal(rr.err)
	}
	var got, stamps []string
	for _, c := range rr.calls.sorted() {
		if strings.Contains(c, ":s1=") || strings.Contains(c, ":s2=") {
			stamps = append(stamps, c[strings.Index(c, "=")+1:])
			continue
		}
		got = append(got, c)
	}
	// Play 1: the set_fact (level 2) wins over the default and h2's host
	// var (5) from b on; play 2: the role parameter (9) wins over both, and
	// the register of play 1 is still there until play 2's own.
	want := []string{
		"h1:a=--v=1+", "h1:a=--v=9/r2+",
		"h1:b=--v=2+", "h1:b=--v=9/r2+",
		"h1:c=--v=2/r2+ 2", "h1:c=--v=9/r9+ 9",
		"h1:reg=r2", "h1:reg=r9",
		"h2:a=--v=5+", "h2:a=--v=9/r2+",
		"h2:b=--v=2+", "h2:b=--v=9/r2+",
		"h2:c=--v=2/r2+ 2", "h2:c=--v=9/r9+ 9",
		"h2:reg=r2", "h2:reg=r9",
	}
	if !slices.Equal(got, want) {
		t.Errorf("calls\n%q\nwant\n%q", got, want)
	}
	if len(stamps) != 8 || len(slices.Compact(slices.Sorted(slices.Values(stamps)))) != 8 {
		t.Errorf("a random default must render anew for every task: %q", stamps)
	}
}

// TestTaskVarsReachDerivedDefaults: a task's vars reach the defaults
// derived from them, in a list too, for that task only (roles/nodes runs
// roles/etcd's client files of another member so: etcd_client_member).
func TestTaskVarsReachDerivedDefaults(t *testing.T) {
	files := map[string]string{
		"playbook.yaml": "- hosts: h1\n  roles: [r]\n",
		"roles/r/defaults/main.yaml": "member: \"{{ .inventory_hostname }}\"\ncert: \"admin-{{ .member }}.pem\"\n" +
			"ctl:\n  - ctl\n  - \"--cert={{ .cert }}\"\npeer: h9\n",
		"roles/r/tasks/main.yaml": `
- probe: {id: own, msg: "{{ index .ctl 1 }}"}
- probe: {id: peer, msg: "{{ index .ctl 1 }}"}
  vars: {member: "{{ .peer }}"}
- probe: {id: after, msg: "{{ index .ctl 1 }}"}
`,
	}
	inv := &inventory.Inventory{Hosts: []inventory.Host{{Name: "h1", Local: true, Vars: map[string]any{}}}, Source: "test"}
	rr := runFilesInv(t, files, inv, RunOptions{})
	if rr.err != nil {
		t.Fatal(rr.err)
	}
	want := []string{"h1:after=--cert=admin-h1.pem", "h1:own=--cert=admin-h1.pem", "h1:peer=--cert=admin-h9.pem"}
	if got := rr.calls.sorted(); !slices.Equal(got, want) {
		t.Errorf("calls %q, want %q", got, want)
	}
}
