package validate

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestHooks: spec.hooks resolves its files from the cluster file's
// directory and reports every wrong field at its file:line:col.
func TestHooks(t *testing.T) {
	t.Setenv("HOME", t.TempDir())
	good := varsCluster + `  hooks:
  - {playbook: create-cluster, phase: network, when: after, file: hooks/label.yaml}
`
	path := writeCluster(t, map[string]string{"cluster.yaml": good, "hooks/label.yaml": "- hosts: all\n  tasks: []\n"})
	c, _, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	file, at := c.HookFile(0)
	if file != filepath.Join(filepath.Dir(path), "hooks", "label.yaml") || at.Line != 15 {
		t.Errorf("HookFile = %s at %s", file, at)
	}
	bad := varsCluster + `  hooks:
  - {playbook: create-cluster, phase: Network, when: afterwards, file: hooks/label.yaml}
  - {playbook: create-cluster, phase: network, when: after, file: hooks/missing.yaml}
  - {when: before}
`
	path = writeCluster(t, map[string]string{"cluster.yaml": bad, "hooks/label.yaml": "[]"})
	_, _, err = Load(path)
	if err == nil {
		t.Fatal("loaded")
	}
	for _, want := range []string{
		"cluster.yaml:15:", `"Network" is not a phase name`,
		`invalid value "afterwards"`,
		"cluster.yaml:16:", "hooks/missing.yaml not found",
		"cluster.yaml:17:", "a hook names the playbook it hooks", "a hook names the phase it runs beside", "a hook names its playbook file",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
}
