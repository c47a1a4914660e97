package cli

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mensylisir/kubexm"
	"github.com/mensylisir/kubexm/builtins"
	"github.com/mensylisir/kubexm/engine"
	"github.com/mensylisir/kubexm/lifecycle"
)

func exitCode(err error) int {
	var e *lifecycle.ExitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &e):
		return e.Code
	}
	return 1
}

// TestPlaybookDiff: a fresh export equals the built-ins (exit 0); a changed
// template, a removed file, a site overlay and a hook are reported (exit
// 1), as text and as JSON; a directory that is no fork is an error (exit 2).
func TestPlaybookDiff(t *testing.T) {
	t.Chdir(t.TempDir())
	a := newApp(lifecycle.Runner{Builtins: builtins.ByName(), BuiltinFS: kubexm.Content()})
	if _, err := kubexm.Export(kubexm.Content(), "fork", false); err != nil {
		t.Fatal(err)
	}
	pb := filepath.Join("fork", "playbooks", "create-cluster")
	out, err := runCmd(t, a, "playbook", "diff", pb)
	if exitCode(err) != 0 || !strings.Contains(out, "0 files changed") {
		t.Fatalf("fresh export: %v\n%s", err, out)
	}
	tmpl := filepath.Join("fork", "roles", "containerd", "templates", "config.toml.tmpl")
	data, err := os.ReadFile(tmpl)
	if err != nil {
		t.Fatal(err)
	}
	putFile(t, tmpl, []byte(string(data)+"# site mirror\n"))
	if err := os.Remove(filepath.Join("fork", "roles", "os", "tasks", "main.yaml")); err != nil {
		t.Fatal(err)
	}
	putFile(t, filepath.Join("fork", "site", "roles", "kubernetes", "node", "templates", "kubelet-config.yaml.tmpl"), []byte("overlaid\n"))
	putFile(t, filepath.Join("fork", "site", "hooks", "create-cluster", "after-network.yaml"), []byte("- hosts: all\n  tasks: []\n"))
	putFile(t, filepath.Join("ov", "roles", "etcd", "files", "new.txt"), []byte("x\n"))
	out, err = runCmd(t, a, "playbook", "diff", pb, "--overlay", "ov")
	if exitCode(err) != 1 {
		t.Fatalf("changed fork: exit %d (%v)\n%s", exitCode(err), err, out)
	}
	for _, want := range []string{
		"--- a/roles/containerd/templates/config.toml.tmpl\n+++ b/roles/containerd/templates/config.toml.tmpl\n",
		"+# site mirror\n",
		"+++ b/roles/kubernetes/node/templates/kubelet-config.yaml.tmpl",
		"+overlaid\n",
		"Only in the fork: " + filepath.Join("fork", "site", "hooks", "create-cluster", "after-network.yaml"),
		"Only in the fork: " + filepath.Join("ov", "roles", "etcd", "files", "new.txt"),
		"Only in the built-in: builtin:roles/os/tasks/main.yaml",
		"2 files changed",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("diff output lacks %q:\n%s", want, out)
		}
	}
	out, err = runCmd(t, a, "playbook", "diff", pb, "-o", "json")
	if exitCode(err) != 1 {
		t.Fatalf("json: exit %d", exitCode(err))
	}
	var d engine.ForkDiff
	if err := json.Unmarshal([]byte(out), &d); err != nil {
		t.Fatalf("json: %v\n%s", err, out)
	}
	if d.Playbook != "create-cluster" || len(d.Changed) != 2 || len(d.OnlyInFork) != 1 || len(d.OnlyInBuiltin) != 1 {
		t.Errorf("json: %+v", d)
	}
	// The same document in YAML.
	out, err = runCmd(t, a, "playbook", "diff", pb, "-o", "yaml")
	if exitCode(err) != 1 || !strings.Contains(out, "playbook: create-cluster\n") || strings.HasPrefix(out, "{") {
		t.Errorf("yaml: exit %d\n%s", exitCode(err), out)
	}
	if _, err := runCmd(t, a, "playbook", "diff", "fork"); exitCode(err) != 2 || !strings.Contains(err.Error(), "not a playbook directory") {
		t.Errorf("not a fork: exit %d %v", exitCode(err), err)
	}
	putFile(t, filepath.Join("mine", "playbook.yaml"), []byte("name: mine\nplays: []\n"))
	if _, err := runCmd(t, a, "playbook", "diff", "mine"); exitCode(err) != 2 || !strings.Contains(err.Error(), "no built-in playbook named mine") {
		t.Errorf("no counterpart: exit %d %v", exitCode(err), err)
	}
}

const hookCluster = `apiVersion: kubexm.mensylisir.io/v1alpha1
kind: Cluster
metadata: {name: site}
spec:
  hosts:
  - {name: node1, address: localhost}
  roleGroups: {etcd: [node1], master: [node1], worker: [node1]}
  hooks:
  - {playbook: create-cluster, phase: network, when: after, file: hooks/label-nodes.yaml}
  - {playbook: delete, phase: network, when: before, file: hooks/not-this-playbook.yaml}
`

// TestCreateClusterSiteHooks: with the built-in create-cluster playbook, a
// site hook after the network phase and one declared in cluster.yaml are
// listed right after the network play, before CoreDNS, with the network
// play's tags; a hook of a phase create-cluster lacks is refused.
func TestCreateClusterSiteHooks(t *testing.T) {
	t.Chdir(t.TempDir())
	a := newApp(lifecycle.Runner{LoadInventory: lifecycle.LoadInventory, Builtins: builtins.ByName(), BuiltinFS: kubexm.Content()})
	putFile(t, "cluster.yaml", []byte(hookCluster))
	putFile(t, filepath.Join("hooks", "label-nodes.yaml"), []byte("- name: Label the nodes (cluster.yaml hook)\n  hosts: master\n  tasks:\n    - name: label\n      command: {argv: [kubectl, label, nodes, --all, site=dc1, --overwrite]}\n"))
	putFile(t, filepath.Join("site", "hooks", "create-cluster", "after-network.yaml"), []byte("- name: Site check after the network\n  hosts: k8s_cluster\n  tasks:\n    - name: site check\n      command: {argv: [true]}\n"))
	out, err := runCmd(t, a, "create-cluster", "--list-tasks", "-i", "cluster.yaml", "--overlay", "site")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if !strings.Contains(out, "phases: preflight, os, etcd, runtime, control-plane, nodes, network, addons, finalize, health") {
		t.Errorf("phases not listed:\n%s", out)
	}
	network := strings.Index(out, "Cluster network\tPHASE: network")
	site := strings.Index(out, "Site check after the network\tPHASE: network (hook after-network")
	declared := strings.Index(out, "Label the nodes (cluster.yaml hook)\tPHASE: network (hook after-network")
	coredns := strings.Index(out, "CoreDNS\tPHASE: addons")
	if network < 0 || site < 0 || declared < 0 || coredns < 0 || !(network < site && site < declared && declared < coredns) {
		t.Errorf("hook placement: network %d, site %d, declared %d, coredns %d\n%s", network, site, declared, coredns, out)
	}
	if !strings.Contains(out, "site check\tTAGS: [network, cni]") {
		t.Errorf("the hook does not carry the network phase's tags:\n%s", out)
	}
	// --tags network lists the hooks, --tags os does not.
	out, _ = runCmd(t, a, "create-cluster", "--list-tasks", "-i", "cluster.yaml", "--overlay", "site", "--tags", "os")
	if strings.Contains(out, "site check\t") {
		t.Errorf("--tags os lists the network hook:\n%s", out)
	}
	putFile(t, filepath.Join("site", "hooks", "create-cluster", "after-netwrk.yaml"), []byte("[]\n"))
	_, err = runCmd(t, a, "create-cluster", "--syntax-check", "--overlay", "site")
	if err == nil || !strings.Contains(err.Error(), `did you mean "network"?`) || !strings.Contains(err.Error(), "its phases are preflight, os,") {
		t.Errorf("unknown phase: %v", err)
	}
}

// TestOverlayOnBuiltinRole: --overlay replaces one template of a built-in
// role (the run loads), and a misspelt overlay file is refused with the
// role's real file suggested.
func TestOverlayOnBuiltinRole(t *testing.T) {
	t.Chdir(t.TempDir())
	a := newApp(lifecycle.Runner{Builtins: builtins.ByName(), BuiltinFS: kubexm.Content()})
	putFile(t, filepath.Join("ov", "roles", "containerd", "templates", "config.toml.tmpl"), []byte("version = 3\n"))
	if out, err := runCmd(t, a, "create-cluster", "--syntax-check", "--overlay", "ov"); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	putFile(t, filepath.Join("ov", "roles", "containerd", "templates", "config.tml"), []byte("version = 3\n"))
	_, err := runCmd(t, a, "create-cluster", "--syntax-check", "--overlay", "ov")
	if err == nil || !strings.Contains(err.Error(), filepath.Join("ov", "roles", "containerd", "templates", "config.tml")+" shadows nothing") ||
		!strings.Contains(err.Error(), `did you mean "config.toml.tmpl"?`) {
		t.Errorf("typo: %v", err)
	}
}

// TestOverlayCheckDiff: --check --diff renders the overlaid template, not
// the role's own.
func TestOverlayCheckDiff(t *testing.T) {
	t.Chdir(t.TempDir())
	a := realApp()
	dest := filepath.Join(t.TempDir(), "out.conf")
	putFile(t, filepath.Join("fork", "playbooks", "demo", "playbook.yaml"), []byte("name: demo\nplays:\n  - hosts: localhost\n    roles: [r]\n"))
	putFile(t, filepath.Join("fork", "roles", "r", "tasks", "main.yaml"), []byte("- name: render\n  template: {src: c.conf.tmpl, dest: "+dest+"}\n"))
	putFile(t, filepath.Join("fork", "roles", "r", "templates", "c.conf.tmpl"), []byte("role {{ .playbook_name }}\n"))
	putFile(t, filepath.Join("ov", "roles", "r", "templates", "c.conf.tmpl"), []byte("overlay {{ .playbook_name }}\n"))
	out, err := runCmd(t, a, filepath.Join("fork", "playbooks", "demo"), "--check", "--diff", "--overlay", "ov")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if !strings.Contains(out, "+overlay demo") || strings.Contains(out, "role demo") {
		t.Errorf("--check --diff:\n%s", out)
	}
	if _, err := os.Stat(dest); err == nil {
		t.Error("--check wrote the file")
	}
}

// TestOverlayFlagEverywhere: every command that runs a playbook takes
// --overlay.
func TestOverlayFlagEverywhere(t *testing.T) {
	root := newRootCmd()
	for _, path := range [][]string{{"play"}, {"plan", "cluster"}, {"create", "cluster"}, {"add", "nodes"}, {"delete", "nodes"},
		{"delete", "cluster"}, {"upgrade", "cluster"}, {"backup", "cluster"}, {"restore", "cluster"}, {"certs", "renew"}, {"playbook", "diff"}} {
		cmd, _, err := root.Find(path)
		if err != nil || cmd.Name() != path[len(path)-1] {
			t.Errorf("%v: no such command (%v)", path, err)
			continue
		}
		if cmd.Flags().Lookup("overlay") == nil {
			t.Errorf("kubexm %s has no --overlay", strings.Join(path, " "))
		}
	}
}
