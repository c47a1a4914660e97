package cli

import (
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/mensylisir/kubexm"
	"github.com/mensylisir/kubexm/engine/step"
	"github.com/mensylisir/kubexm/lifecycle"
)

// TestClusterVarsOverRoleDefaults: a role default is changed per group by
// roleGroupVars and per host by host_vars/ beside cluster.yaml, in a real
// run; a secret-named site variable is masked in the output.
func TestClusterVarsOverRoleDefaults(t *testing.T) {
	dir := clusterDir(t, "site", `  hosts:
  - {name: n1, address: localhost, connection: local}
  - {name: n2, address: localhost, connection: local}
  - {name: n3, address: localhost, connection: local, vars: {site_token: tok-73x9}}
  roleGroups: {etcd: [n1], master: [n1], worker: [n2, n3]}
  roleGroupVars:
    worker: {flag: from-group}
`)
	putFile(t, filepath.Join(dir, "host_vars", "n3.yaml"), []byte("flag: from-host\n"))
	pb := filepath.Join(dir, "pb")
	putFile(t, filepath.Join(pb, "playbook.yaml"), []byte("- hosts: all\n  roles: [r]\n"))
	putFile(t, filepath.Join(pb, "roles", "r", "defaults", "main.yaml"), []byte("flag: from-role-default\nsite_token: none\n"))
	putFile(t, filepath.Join(pb, "roles", "r", "tasks", "main.yaml"), []byte("- fake: \"{{ .flag }} {{ .site_token }}\"\n"))
	var calls []string
	out, err := runCmd(t, fakeStepApp(&calls), pb, "-i", filepath.Join(dir, "cluster.yaml"), "-v")
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

// clusterDir is a fresh current directory (where a run's journal goes, under
// .kubexm) and HOME, holding the cluster.yaml of cluster name with spec.
func clusterDir(t *testing.T, name, spec string) string {
	t.Helper()
	t.Setenv("HOME", t.TempDir())
	dir := t.TempDir()
	t.Chdir(dir)
	putFile(t, filepath.Join(dir, "cluster.yaml"), []byte("apiVersion: kubexm.mensylisir.io/v1alpha1\nkind: Cluster\nmetadata: {name: "+name+"}\nspec:\n"+spec))
	return dir
}

// fakeStepApp runs playbooks whose only builtin is fake, recording calls.
func fakeStepApp(calls *[]string) *app {
	return newApp(lifecycle.Runner{LoadInventory: lifecycle.LoadInventory, Builtins: map[string]step.Builtin{"fake": newFakeStep(calls)}, BuiltinFS: kubexm.Content()})
}

// TestClusterTemplateBomb is issue 45's reproduction end to end: a
// cluster.yaml host variable `{{ repeat 2000000000 "x" }}` that no task
// reads took a play to 2 GB and a fatal out-of-memory. The play, config
// validate and config view all run in a few MiB; a task that reads it
// fails naming the limit.
func TestClusterTemplateBomb(t *testing.T) {
	dir := clusterDir(t, "bomb", `  hosts:
  - {name: n1, address: localhost, connection: local, vars: {bomb: '{{ repeat 2000000000 "x" }}', nice: 'n-{{ .inventory_hostname }}'}}
  roleGroups: {etcd: [n1], master: [n1], worker: [n1]}
`)
	pb := filepath.Join(dir, "pb")
	putFile(t, filepath.Join(pb, "playbook.yaml"), []byte("- hosts: all\n  tasks:\n    - fake: \"{{ .nice }}\"\n"))
	var calls []string
	a := fakeStepApp(&calls)
	allocated := func(f func()) uint64 {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		f()
		runtime.ReadMemStats(&after)
		return after.TotalAlloc - before.TotalAlloc
	}
	var out string
	var err error
	if n := allocated(func() { out, err = runCmd(t, a, pb, "-i", filepath.Join(dir, "cluster.yaml")) }); err != nil || n > 128<<20 {
		t.Fatalf("play: %v, %d MiB allocated\n%s", err, n>>20, out)
	}
	if !slices.Equal(calls, []string{"n1:n-n1"}) {
		t.Errorf("calls %q", calls)
	}
	for _, args := range [][]string{{"config", "validate", "-f", "cluster.yaml"}, {"config", "view", "-f", "cluster.yaml"}} {
		var code int
		if n := allocated(func() { out, code = runMain(t, args...) }); code != 0 || n > 128<<20 {
			t.Errorf("%s: exit %d, %d MiB allocated\n%s", strings.Join(args, " "), code, n>>20, out)
		}
	}

	putFile(t, filepath.Join(pb, "playbook.yaml"), []byte("- hosts: all\n  tasks:\n    - fake: \"{{ .bomb }}\"\n"))
	calls = nil
	out, err = runCmd(t, a, pb, "-i", filepath.Join(dir, "cluster.yaml"))
	if err == nil || len(calls) != 0 || !strings.Contains(out, "repeat: would make 2000000000 bytes, more than the 16 MiB a template may produce") {
		t.Errorf("the task reading the bomb: %v, calls %q\n%s", err, calls, out)
	}
}
