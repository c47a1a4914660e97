package engine

import (
	"context"
	"path/filepath"
	"testing"
	"testing/fstest"
)

// TestRolesFile: a file shared by a tree's roles is found as roles are:
// the fork's roles/ beside its playbooks/ before --roles-path before the
// built-in tree.
func TestRolesFile(t *testing.T) {
	builtin := fstest.MapFS{
		"playbooks/demo/playbook.yaml": {Data: []byte("name: demo\nplays:\n  - hosts: localhost\n    tasks: []\n")},
		"roles/shared.yaml":            {Data: []byte("builtin")},
	}
	t.Chdir(t.TempDir())
	read := func(ref string, rolesPath ...string) (string, string, bool) {
		t.Helper()
		pb, err := Load(context.Background(), ref, LoadOptions{BuiltinFS: builtin, RolesPath: rolesPath})
		if err != nil {
			t.Fatal(err)
		}
		data, where, ok, err := pb.RolesFile("shared.yaml")
		if err != nil {
			t.Fatal(err)
		}
		return string(data), where, ok
	}
	if data, where, ok := read("demo"); !ok || data != "builtin" || where != "builtin:roles/shared.yaml" {
		t.Errorf("built-in: %q %q %v", data, where, ok)
	}
	extra := writeFiles(t, map[string]string{"shared.yaml": "roles-path"})
	if data, _, _ := read("demo", extra); data != "roles-path" {
		t.Errorf("--roles-path: %q", data)
	}
	fork := writeFiles(t, map[string]string{
		"playbooks/demo/playbook.yaml": "name: demo\nplays:\n  - hosts: localhost\n    tasks: []\n",
		"roles/shared.yaml":            "fork",
	})
	if data, where, _ := read(filepath.Join(fork, "playbooks", "demo"), extra); data != "fork" || filepath.Base(where) != "shared.yaml" {
		t.Errorf("fork: %q %q", data, where)
	}
	if _, _, ok, err := mustLoad(t, builtin).RolesFile("absent.yaml"); ok || err != nil {
		t.Errorf("absent file: ok %v err %v", ok, err)
	}
}

func mustLoad(t *testing.T, builtin fstest.MapFS) *Playbook {
	t.Helper()
	pb, err := Load(context.Background(), "demo", LoadOptions{BuiltinFS: builtin})
	if err != nil {
		t.Fatal(err)
	}
	return pb
}
