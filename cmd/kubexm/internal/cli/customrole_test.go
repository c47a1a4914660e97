package cli

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/mensylisir/kubexm"
	"github.com/mensylisir/kubexm/builtins"
	"github.com/mensylisir/kubexm/lifecycle"
)

// TestCustomNetworkRole: network.plugin custom runs the fork's custom-cni
// through the built-in cni role (install and delete), and a customRole the
// tree lacks is refused before any task runs, naming the directories
// searched.
func TestCustomNetworkRole(t *testing.T) {
	t.Setenv("HOME", t.TempDir())
	shared, err := filepath.Abs("../../../../roles/artifacts/defaults/main.yaml")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	t.Chdir(dir)
	cluster := func(extra string) string {
		p := filepath.Join(dir, "cluster"+strings.ReplaceAll(strings.TrimSpace(extra), " ", "")+".yaml")
		putFile(t, p, []byte(`apiVersion: kubexm.mensylisir.io/v1alpha1
kind: Cluster
metadata: {name: site}
spec:
  hosts:
  - {name: n1, address: localhost, connection: local}
  - {name: n2, address: localhost, connection: local}
  roleGroups: {etcd: [n1], master: [n1], worker: [n2]}
  network:
    plugin: custom
`+extra))
		return p
	}
	fork := filepath.Join(dir, "site")
	pb := filepath.Join(fork, "playbooks", "net")
	putFile(t, filepath.Join(pb, "playbook.yaml"), []byte("inventory: cluster\ndefaults_files: ["+shared+"]\nplays:\n  - hosts: k8s_cluster\n    roles: [cni, {role: cni, tasks_from: delete}]\n"))
	putFile(t, filepath.Join(fork, "roles", "custom-cni", "tasks", "main.yaml"), []byte("- fake: \"site network {{ .site_net_mtu }}\"\n"))
	putFile(t, filepath.Join(fork, "roles", "custom-cni", "tasks", "delete.yaml"), []byte("- fake: site network removed\n"))
	putFile(t, filepath.Join(fork, "roles", "custom-cni", "defaults", "main.yaml"), []byte("site_net_mtu: 1450\n"))

	var calls []string
	reg := builtins.ByName()
	reg["fake"] = newFakeStep(&calls)
	a := newApp(lifecycle.Runner{LoadInventory: lifecycle.LoadInventory, Builtins: reg, BuiltinFS: kubexm.Content()})
	out, err := runCmd(t, a, pb, "-i", cluster(""))
	if err != nil {
		t.Fatalf("run: %v\n%s", err, out)
	}
	slices.Sort(calls)
	want := []string{"n1:site network 1450", "n1:site network removed", "n2:site network 1450", "n2:site network removed"}
	if !slices.Equal(calls, want) {
		t.Errorf("calls = %q, want %q\n%s", calls, want, out)
	}

	calls = nil
	out, err = runCmd(t, a, pb, "-i", cluster("    customRole: site/net\n"))
	if err == nil {
		t.Fatalf("a missing custom role was accepted:\n%s", out)
	}
	for _, w := range []string{"spec.network.customRole", `role "site/net" has no tasks/main.yaml in`, filepath.Join("site", "roles"), "builtin:roles"} {
		if !strings.Contains(err.Error()+out, w) {
			t.Errorf("the refusal lacks %q: %v\n%s", w, err, out)
		}
	}
	if len(calls) != 0 {
		t.Errorf("tasks ran before the refusal: %q", calls)
	}
}
