package kubexm_test

// Regression tests of issue 13 (items 2 and 3) with cluster.yaml validation
// bypassed: the hostile values go straight into the variables of the real
// roles' tasks, run through a playbook on this machine (local transport)
// inside a temporary directory, under --check and without. Nothing may run
// the values as shell code, and no delete may reach a system directory.

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/goccy/go-yaml"

	"github.com/mensylisir/kubexm"
	"github.com/mensylisir/kubexm/builtins"
	"github.com/mensylisir/kubexm/builtins/kube/kubefake"
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
	m := map[string][]string{}
	for _, g := range groups {
		m[g] = []string{"n1"}
	}
	return runLocalGroups(t, playbook, m, vars, check)
}

// runLocalGroups is runLocal with the groups given, n1 in those that name
// it (a group may be empty).
func runLocalGroups(t *testing.T, playbook string, groups map[string][]string, vars map[string]any, check bool) (string, error) {
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
	for g, hosts := range groups {
		inv.Groups[g] = hosts
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
			"os_pkg_family": "deb", "os_chrony_package": "chrony",
			// spec.system.debs, as roles/os's defaults add it to the list.
			"os_package_list_deb": []any{"curl$(touch " + dir + "/PWNED)", "x`touch " + dir + "/PWNED`"}, "os_package_list_rpm": []any{},
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

// A label key that would be a flag to kubectl (--server) is data in the
// JSON merge patch the role sends to the API server named by the
// kubeconfig, never an option: the node of a fake API server gets it as a
// label, beside the role labels. The same run proves the taints: the
// control-plane taint is taken out of a master's that is also a worker (the
// other taints stay), and put back once it is not.
func TestInjectionLabelKeyIsData(t *testing.T) {
	srv := kubefake.New()
	defer srv.Close()
	node := kubefake.Kind{Version: "v1", Kind: "Node", Resource: "nodes"}
	if err := srv.Add(map[string]any{"apiVersion": "v1", "kind": "Node", "metadata": map[string]any{"name": "n1"},
		"spec": map[string]any{"taints": []any{
			map[string]any{"key": "node-role.kubernetes.io/control-plane", "effect": "NoSchedule"},
			map[string]any{"key": "example.com/keep", "effect": "NoExecute"}}}}); err != nil {
		t.Fatal(err)
	}
	kubeconfig := filepath.Join(t.TempDir(), "admin.kubeconfig")
	if err := os.WriteFile(kubeconfig, srv.Kubeconfig(), 0o600); err != nil {
		t.Fatal(err)
	}
	pb := "- hosts: all\n  gather_facts: false\n  roles: [cluster-finalize]\n"
	vars := map[string]any{
		"kubectl_host": "n1", "kubernetes_admin_kubeconfig": kubeconfig,
		"labels": map[string]any{"--server": "https://evil.example.com"},
	}
	if _, err := runLocal(t, pb, []string{"master", "worker", "k8s_cluster"}, vars, true); err != nil || len(srv.Writes()) > 0 {
		t.Fatalf("--check: %v; writes %v", err, srv.Writes())
	}
	taints := func() (keys []string) {
		spec, _ := srv.Get(node, "", "n1")["spec"].(map[string]any)
		list, _ := spec["taints"].([]any)
		for _, tt := range list {
			m, _ := tt.(map[string]any)
			keys = append(keys, fmt.Sprint(m["key"], ":", m["effect"]))
		}
		return keys
	}
	if _, err := runLocal(t, pb, []string{"master", "worker", "k8s_cluster"}, vars, false); err != nil {
		t.Fatal(err)
	}
	md, _ := srv.Get(node, "", "n1")["metadata"].(map[string]any)
	labels, _ := md["labels"].(map[string]any)
	if labels["--server"] != "https://evil.example.com" || labels["node-role.kubernetes.io/control-plane"] != "" || labels["node-role.kubernetes.io/worker"] != "" {
		t.Errorf("the node's labels %v", labels)
	}
	if got := taints(); !slices.Equal(got, []string{"example.com/keep:NoExecute"}) {
		t.Errorf("a master that is a worker: taints %v", got)
	}
	for _, s := range srv.Calls() {
		if strings.Contains(s, "evil") {
			t.Errorf("a call went elsewhere: %s", s)
		}
	}
	changes := srv.Changes()
	if _, err := runLocal(t, pb, []string{"master", "worker", "k8s_cluster"}, vars, false); err != nil || srv.Changes() != changes {
		t.Errorf("re-run: %v; %d objects changed", err, srv.Changes()-changes)
	}
	masterAlone := map[string][]string{"master": {"n1"}, "worker": {}, "k8s_cluster": {"n1"}}
	if _, err := runLocalGroups(t, pb, masterAlone, vars, false); err != nil {
		t.Fatal(err)
	}
	if got := taints(); !slices.Equal(got, []string{"example.com/keep:NoExecute", "node-role.kubernetes.io/control-plane:NoSchedule"}) {
		t.Errorf("a master alone: taints %v", got)
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

// TestInjectionPreflightPackages runs preflight's offline-bundle package
// check on this machine (it only reads): a package name is never shell
// text, and a package the host lacks that the bundle's set for its release
// does not carry is a finding naming it, while one the set carries is not.
func TestInjectionPreflightPackages(t *testing.T) {
	if testing.Short() {
		t.Skip("runs shell on this machine")
	}
	if _, err := os.Stat("/var/lib/dpkg/status"); err != nil {
		t.Skip("not a dpkg machine")
	}
	dir := t.TempDir()
	release := ""
	if data, err := os.ReadFile("/etc/os-release"); err == nil {
		var id, version string
		for _, l := range strings.Split(string(data), "\n") {
			if v, ok := strings.CutPrefix(l, "ID="); ok {
				id = strings.Trim(v, `"`)
			}
			if v, ok := strings.CutPrefix(l, "VERSION_ID="); ok {
				version = strings.Trim(v, `"`)
			}
		}
		release = id + version
	}
	// The bundle's manifest names its sets' files.
	if err := os.MkdirAll(filepath.Join(dir, "bundle"), 0o755); err != nil {
		t.Fatal(err)
	}
	manifest := fmt.Sprintf(`{"format": "kubexm-offline-bundle", "artifacts": [
  {"component": "packages", "version": %[1]q, "arch": "amd64", "file": "Packages"},
  {"component": "packages", "version": %[1]q, "arch": "amd64", "file": "kubexm-test-carried_1_amd64.deb"}]}`, release)
	if err := os.WriteFile(filepath.Join(dir, "bundle", "manifest.json"), []byte(manifest), 0o644); err != nil {
		t.Fatal(err)
	}
	var tasks string
	for _, name := range []string{"Packages - the lists an offline run installs here", "Packages - the host's release and the packages it lacks",
		"Packages - the offline bundle's package sets", "Packages - what the bundle cannot give this host", "Packages - the offline bundle has what this host lacks"} {
		tasks += roleTasks(t, "roles/preflight/tasks/main.yaml", name)
	}
	pb := "- hosts: all\n  gather_facts: false\n  tasks:\n" + indent("- set_fact: {preflight_findings: [], preflight_node: n1}\n"+tasks+
		"- debug: {msg: \"FINDINGS {{ range .preflight_findings }}{{ .msg }}{{ end }}\"}\n", 4)
	out, err := runLocalGroups(t, pb, map[string][]string{"k8s_cluster": {"n1"}, "master": {}}, map[string]any{
		"offline_bundle_dir":  filepath.Join(dir, "bundle"),
		"os_package_list_deb": []any{"kubexm-test-carried", "kubexm-test-absent$(touch " + dir + "/PWNED)"}, "os_package_list_rpm": []any{},
		"os_chrony_package": "chrony", "os_ntp_servers": []any{}, "kube_control_plane_lb": "internal-haproxy",
		"kube_control_plane_lb_packages": []any{"x`touch " + dir + "/PWNED`"},
	}, false)
	if err != nil {
		t.Fatal(err)
	}
	assertNoPwned(t, dir)
	_, findings, _ := strings.Cut(out, "FINDINGS ")
	if !strings.Contains(findings, "lacks kubexm-test-absent$(touch") || strings.Contains(findings, "kubexm-test-carried") {
		t.Errorf("the finding should name the package the set lacks and not the one it carries:\n%s", out)
	}
}
