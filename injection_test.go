package kubexm_test

// Regression tests of issue 13 (items 2 and 3) with cluster.yaml validation
// bypassed: the hostile values go straight into the variables of the real
// roles' tasks, run through a playbook on this machine (local transport)
// inside a temporary directory, under --check and without. Nothing may run
// the values as shell code, and no delete may reach a system directory.

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/goccy/go-yaml"

	"github.com/mensylisir/kubexm"
	"github.com/mensylisir/kubexm/builtins"
	"github.com/mensylisir/kubexm/engine"
	"github.com/mensylisir/kubexm/engine/output"
	"github.com/mensylisir/kubexm/engine/step"
	"github.com/mensylisir/kubexm/inventory"
)

// roleTasks returns the named tasks of a built-in role's task file, as YAML,
// so a test runs exactly the role's text.
func roleTasks(t *testing.T, file string, names ...string) string {
	t.Helper()
	data, err := fs.ReadFile(kubexm.Content(), file)
	if err != nil {
		t.Fatal(err)
	}
	var tasks []map[string]any
	if err := yaml.Unmarshal(data, &tasks); err != nil {
		t.Fatal(err)
	}
	var picked []map[string]any
	for _, n := range names {
		found := false
		for _, task := range tasks {
			if task["name"] == n {
				picked = append(picked, task)
				found = true
			}
		}
		if !found {
			t.Fatalf("%s has no task %q", file, n)
		}
	}
	out, err := yaml.Marshal(picked)
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}

// runLocal runs a playbook on one local host n1 (in the groups given) with
// extra vars, and returns the recap error.
func runLocal(t *testing.T, playbook string, groups []string, vars map[string]any, check bool) (string, error) {
	t.Helper()
	m := map[string]step.Builtin{}
	for _, b := range builtins.All() {
		m[b.Spec().Name] = b
	}
	pb, err := engine.LoadBytes(context.Background(), "injection.yaml", []byte(playbook), engine.LoadOptions{Builtins: m, BuiltinFS: kubexm.Content()})
	if err != nil {
		t.Fatal(err)
	}
	inv := &inventory.Inventory{
		Hosts:  []inventory.Host{{Name: "n1", Local: true, Vars: map[string]any{"internal_address": "127.0.0.1", "address": "127.0.0.1", "arch": "amd64"}}},
		Groups: map[string][]string{"all": {"n1"}},
		Vars:   map[string]any{},
	}
	for _, g := range groups {
		inv.Groups[g] = []string{"n1"}
	}
	var log strings.Builder
	_, err = engine.Run(context.Background(), pb, inv, engine.RunOptions{
		Check: check, ExtraVars: vars, WorkDir: t.TempDir(), NoJournal: true,
		Output: output.NewText(&log, 1),
	})
	t.Logf("check=%v:\n%s", check, log.String())
	return log.String(), err
}

func assertNoPwned(t *testing.T, dir string) {
	t.Helper()
	if _, err := os.Stat(filepath.Join(dir, "PWNED")); err == nil {
		t.Fatal("the injected command ran: PWNED exists")
	}
}

func TestInjectionPreflightEtcdDataDir(t *testing.T) {
	if testing.Short() {
		t.Skip("runs shell on this machine")
	}
	dir := t.TempDir()
	pb := "- hosts: all\n  gather_facts: false\n  tasks:\n" + indent(roleTasks(t, "roles/preflight/tasks/main.yaml",
		"Existing installation - look for Kubernetes and etcd leftovers"), 4)
	for _, check := range []bool{true, false} {
		_, err := runLocal(t, pb, []string{"etcd"}, map[string]any{
			"preflight_cluster_marker": filepath.Join(dir, "marker"),
			"cluster_name":             "c1",
			// spec.etcd.dataDir, as roles/preflight's defaults map it.
			"preflight_etcd_data_dir": "/x'; touch " + dir + "/PWNED; echo '",
		}, check)
		if err != nil {
			t.Fatalf("check=%v: %v", check, err)
		}
		assertNoPwned(t, dir)
	}
}

func TestInjectionOSPackages(t *testing.T) {
	if testing.Short() {
		t.Skip("runs shell on this machine")
	}
	dir := t.TempDir()
	pb := "- hosts: all\n  gather_facts: false\n  tasks:\n" + indent(roleTasks(t, "roles/os/tasks/main.yaml",
		"Packages - choose the list for this host")+
		"- set_fact: {os_install_list: \"{{ .os_package_list }}\"}\n"+
		roleTasks(t, "roles/os/tasks/packages.yaml", "Packages - find the ones not installed yet"), 4)
	for _, check := range []bool{true, false} {
		_, err := runLocal(t, pb, nil, map[string]any{
			"os_packages": "", "os_packages_deb": []any{}, "os_packages_rpm": []any{},
			"os_pkg_family": "deb", "os_chrony_package": "chrony",
			// spec.system.debs and rpms, as roles/os's defaults map them.
			"os_system_debs": []any{"curl$(touch " + dir + "/PWNED)", "x`touch " + dir + "/PWNED`"}, "os_system_rpms": []any{},
		}, check)
		if err != nil {
			t.Fatalf("check=%v: %v", check, err)
		}
		assertNoPwned(t, dir)
	}
}

// The whole containerd delete, every path in the temporary directory: the
// quote break-out in the data directory runs nothing, and a data directory
// of / or /etc is refused by the file builtin on the host.
func TestInjectionContainerdDelete(t *testing.T) {
	if testing.Short() {
		t.Skip("runs shell on this machine")
	}
	dir := t.TempDir()
	hostile := filepath.Join(dir, "x'; touch "+dir+"/PWNED; echo '")
	if err := os.MkdirAll(filepath.Join(hostile, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	vars := func(data string) map[string]any {
		return map[string]any{
			"containerd_unit_file": filepath.Join(dir, "containerd.service"), "containerd_bin_dir": filepath.Join(dir, "bin"),
			"containerd_state_dir": filepath.Join(dir, "state"), "containerd_config_dir": filepath.Join(dir, "etc"),
			"runc_bin": filepath.Join(dir, "runc"), "cni_bin_dir": filepath.Join(dir, "cni", "bin"),
			"containerd_data_dir": data,
			"spec": map[string]any{"kubernetes": map[string]any{"containerRuntime": map[string]any{"type": "containerd", "version": "1.7.27",
				"containerd": map[string]any{"registryMirrors": []any{}, "insecureRegistries": []any{}}}},
				"registry": map[string]any{"privateRegistry": "", "namespaceOverride": ""}},
			// The cluster's choices the playbooks load (roles/artifacts/defaults/main.yaml).
			"container_runtime_type": "containerd", "registry_type": "", "registry_auths": map[string]any{},
		}
	}
	pb := "- hosts: all\n  gather_facts: false\n  tasks:\n    - include_role: {name: containerd, tasks_from: delete}\n"
	for _, check := range []bool{true, false} {
		if _, err := runLocal(t, pb, nil, vars(hostile), check); err != nil {
			t.Fatalf("check=%v: %v", check, err)
		}
		assertNoPwned(t, dir)
	}
	if _, err := os.Stat(hostile); !os.IsNotExist(err) {
		t.Errorf("the oddly named data directory is still there: %v", err)
	}
	// Through a symbolic link the path looks harmless but reaches /etc.
	if err := os.Symlink("/", filepath.Join(dir, "root")); err != nil {
		t.Fatal(err)
	}
	for _, sys := range []string{"/", "/etc", filepath.Join(dir, "root", "etc")} {
		for _, check := range []bool{true, false} {
			log, err := runLocal(t, pb, nil, vars(sys), check)
			if err == nil || !strings.Contains(log, "refusing to remove") {
				t.Fatalf("check=%v: deleting with containerd_data_dir %s was not refused: %v", check, sys, err)
			}
		}
	}
	if _, err := os.Stat("/etc/passwd"); err != nil {
		t.Fatal(err)
	}
}

// A label key --server must reach kubectl as a label (after --), never as
// its --server flag. kubectl is a script recording its arguments.
func TestInjectionLabelKeyIsNoFlag(t *testing.T) {
	if testing.Short() {
		t.Skip("runs shell on this machine")
	}
	dir := t.TempDir()
	kubectl := filepath.Join(dir, "kubectl")
	logFile := filepath.Join(dir, "argv")
	script := "#!/bin/sh\nprintf '%s\\n' \"$*\" >> " + logFile + "\n"
	if err := os.WriteFile(kubectl, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	pb := "- hosts: all\n  gather_facts: false\n  roles: [cluster-finalize]\n"
	vars := map[string]any{
		"kubectl_bin": kubectl, "kubectl_host": "n1", "kubernetes_admin_kubeconfig": filepath.Join(dir, "admin.kubeconfig"),
		"labels": map[string]any{"--server": "https://evil.example.com"},
	}
	// --check runs no kubectl at all.
	if _, err := runLocal(t, pb, []string{"master", "worker", "k8s_cluster"}, vars, true); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(logFile); err == nil {
		t.Fatal("kubectl ran under --check")
	}
	if _, err := runLocal(t, pb, []string{"master", "worker", "k8s_cluster"}, vars, false); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(logFile)
	if err != nil {
		t.Fatal(err)
	}
	var label string
	for _, l := range strings.Split(string(data), "\n") {
		if strings.Contains(l, " label ") {
			label = l
		}
	}
	before, after, ok := strings.Cut(label, " -- ")
	if !ok || strings.Contains(before, "--server") || !strings.Contains(after, "--server=https://evil.example.com") {
		t.Fatalf("kubectl label argv %q: --server must come after --", label)
	}
}

func indent(s string, n int) string {
	pad := strings.Repeat(" ", n)
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	for i, l := range lines {
		lines[i] = pad + l
	}
	return strings.Join(lines, "\n") + "\n"
}
