package main

import (
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/mensylisir/kubexm"
	"github.com/mensylisir/kubexm/engine/step"
)

// TestClusterTemplateBomb is issue 45's reproduction end to end: a
// cluster.yaml host variable `{{ repeat 2000000000 "x" }}` that no task
// reads took a play to 2 GB and a fatal out-of-memory. The play, config
// validate and config view all run in a few MiB; a task that reads it
// fails naming the limit.
func TestClusterTemplateBomb(t *testing.T) {
	t.Setenv("HOME", t.TempDir())
	dir := t.TempDir()
	t.Chdir(dir)
	putFile(t, filepath.Join(dir, "cluster.yaml"), []byte(`apiVersion: kubexm.mensylisir.io/v1alpha1
kind: Cluster
metadata: {name: bomb}
spec:
  hosts:
  - {name: n1, address: localhost, connection: local, vars: {bomb: '{{ repeat 2000000000 "x" }}', nice: 'n-{{ .inventory_hostname }}'}}
  roleGroups: {etcd: [n1], master: [n1], worker: [n1]}
`))
	pb := filepath.Join(dir, "pb")
	putFile(t, filepath.Join(pb, "playbook.yaml"), []byte("- hosts: all\n  tasks:\n    - fake: \"{{ .nice }}\"\n"))
	var calls []string
	a := &app{loadInventory: loadInventory, builtins: map[string]step.Builtin{"fake": newFakeStep(&calls)}, builtinFS: kubexm.Content()}
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
