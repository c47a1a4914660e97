package engine

import (
	"context"
	"os"
	"path/filepath"
	"testing"
)

func FuzzLoad(f *testing.F) {
	seeds := []string{
		"- hosts: all\n  tasks:\n    - probe: a\n",
		"name: x\nversion: 1\nrequires: {kubexm: \">=0.1\"}\nplays:\n  - hosts: web:&db:!h1\n    serial: [1, 50%]\n    tasks:\n      - block: [{probe: a}]\n        rescue: [{meta: end_host}]\n",
		"- hosts: all\n  tasks:\n    - probe: {id: \"{{ .x }}\", count: 3}\n      loop: \"{{ .l }}\"\n      loop_control: {loop_var: y}\n      when: [a, b == 1]\n      until: r.ok\n      register: r\n",
		"a: &x {b: 1}\nc: *x\n<<: *x\n",
		"- hosts: all\n  roles: [{role: nope}]\n",
		"- {hosts: all, tasks: [{include_tasks: {file: x.yaml}}, {import_role: {name: r}}]}\n",
	}
	if b, err := os.ReadFile("testdata/everykey/playbook.yaml"); err == nil {
		seeds = append(seeds, string(b))
	}
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	reg := testRegistry(&calls{})
	dir := f.TempDir()
	name := filepath.Join(dir, "playbook.yaml")
	f.Fuzz(func(t *testing.T, data []byte) {
		pb, err := LoadBytes(context.Background(), name, data, LoadOptions{Builtins: reg, Version: "0.1.0"})
		if err == nil && pb == nil {
			t.Fatal("nil playbook without error")
		}
		if err == nil {
			_ = pb.ListTasks(discard{}, nil, nil)
		}
	})
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }

// FuzzExtraVars feeds -e @file the untrusted files it may be given: it must
// return a mapping or an error, never panic, and stay within its bounds.
func FuzzExtraVars(f *testing.F) {
	for _, s := range []string{"a: 1\n", "a: &x {b: [1, 2]}\nc: *x\n", "[1, 2]\n", "{a: {b: {c: d}}}", "", "a: !!str 1\n"} {
		f.Add([]byte(s))
	}
	file := filepath.Join(f.TempDir(), "vars.yaml")
	f.Fuzz(func(t *testing.T, data []byte) {
		if err := os.WriteFile(file, data, 0o600); err != nil {
			t.Fatal(err)
		}
		m, err := ParseExtraVars([]string{"@" + file})
		if err == nil && m == nil {
			t.Fatal("nil mapping without error")
		}
	})
}
