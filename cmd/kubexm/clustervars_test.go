package main

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/mensylisir/kubexm"
	"github.com/mensylisir/kubexm/engine/step"
)

// TestClusterVarsOverRoleDefaults: a role default is changed per group by
// roleGroupVars and per host by host_vars/ beside cluster.yaml, in a real
// run; a secret-named site variable is masked in the output.
func TestClusterVarsOverRoleDefaults(t *testing.T) {
	t.Setenv("HOME", t.TempDir())
	dir := t.TempDir()
	t.Chdir(dir) // the run's journal goes to ./.kubexm
	putFile(t, filepath.Join(dir, "cluster.yaml"), []byte(`apiVersion: kubexm.mensylisir.io/v1alpha1
kind: Cluster
metadata: {name: site}
spec:
  hosts:
  - {name: n1, address: localhost, connection: local}
  - {name: n2, address: localhost, connection: local}
  - {name: n3, address: localhost, connection: local, vars: {site_token: tok-73x9}}
  roleGroups: {etcd: [n1], master: [n1], worker: [n2, n3]}
  roleGroupVars:
    worker: {flag: from-group}
`))
	putFile(t, filepath.Join(dir, "host_vars", "n3.yaml"), []byte("flag: from-host\n"))
	pb := filepath.Join(dir, "pb")
	putFile(t, filepath.Join(pb, "playbook.yaml"), []byte("- hosts: all\n  roles: [r]\n"))
	putFile(t, filepath.Join(pb, "roles", "r", "defaults", "main.yaml"), []byte("flag: from-role-default\nsite_token: none\n"))
	putFile(t, filepath.Join(pb, "roles", "r", "tasks", "main.yaml"), []byte("- fake: \"{{ .flag }} {{ .site_token }}\"\n"))
	var calls []string
	a := &app{loadInventory: loadInventory, builtins: map[string]step.Builtin{"fake": newFakeStep(&calls)}, builtinFS: kubexm.Content()}
	out, err := runCmd(t, a, pb, "-i", filepath.Join(dir, "cluster.yaml"), "-v")
	if err != nil {
		t.Fatalf("run: %v\n%s", err, out)
	}
	slices.Sort(calls)
	want := []string{"n1:from-role-default none", "n2:from-group none", "n3:from-host tok-73x9"}
	if !slices.Equal(calls, want) {
		t.Errorf("calls = %q, want %q", calls, want)
	}
	if !strings.Contains(out, "from-host") {
		t.Fatalf("the output does not show the task's message, so it cannot show masking:\n%s", out)
	}
	if strings.Contains(out, "tok-73x9") {
		t.Errorf("the output shows the secret-named variable's value:\n%s", out)
	}
}
