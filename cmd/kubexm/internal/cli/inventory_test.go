package cli

import (
	"os"
	"strings"
	"testing"
)

// TestAnsibleInventory runs a playbook that is not about a cluster on an
// Ansible-style inventory (INI and YAML), and refuses one for the built-in
// lifecycle playbooks, which need a cluster.yaml.
func TestAnsibleInventory(t *testing.T) {
	t.Chdir(t.TempDir())
	files := map[string]string{
		"hosts.ini":  "[web]\nw1\nw2 greeting=hi\n\n[all:vars]\nansible_connection=local\ngreeting=hello\n",
		"hosts.yaml": "all:\n  vars: {ansible_connection: local, greeting: hello}\n  children:\n    web:\n      hosts:\n        w1:\n        w2: {greeting: hi}\n",
		"site.yaml":  "- hosts: web[1]\n  tasks:\n    - debug: {msg: \"{{ .greeting }} from {{ .inventory_hostname }} in {{ .groups.web }}\"}\n",
	}
	for name, data := range files {
		if err := os.WriteFile(name, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	a := realApp()
	for _, inv := range []string{"hosts.ini", "hosts.yaml"} {
		out, err := runCmd(t, a, "site.yaml", "-i", inv, "--no-journal")
		if err != nil || !strings.Contains(out, "hi from w2 in [w1 w2]") || strings.Contains(out, "from w1") {
			t.Errorf("%s: %v\n%s", inv, err, out)
		}
	}
	_, err := runCmd(t, a, "create-cluster", "-i", "hosts.ini", "--check")
	if err == nil || !strings.Contains(err.Error(), "needs a cluster") || !strings.Contains(err.Error(), "inventory: cluster") {
		t.Errorf("create-cluster on an Ansible inventory: %v", err)
	}
	_, err = runCmd(t, a, "create-cluster", "--check")
	if err == nil || !strings.Contains(err.Error(), "-i cluster.yaml") {
		t.Errorf("create-cluster without inventory: %v", err)
	}
}
