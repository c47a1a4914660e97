package validate

import (
	. "github.com/mensylisir/kubexm/schema"

	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
)

const varsCluster = `apiVersion: kubexm.mensylisir.io/v1alpha1
kind: Cluster
metadata: {name: site}
spec:
  hosts:
  - name: node1
    address: localhost
    vars: {kubelet_extra_args: ["--max-pods=200"], site_zone: a}
  - {name: node2, address: 10.0.0.2, connection: local}
  roleGroups: {etcd: [node1], master: [node1], worker: [node1, node2]}
  roleGroupVars:
    all: {site_ntp: ntp.example}
    worker: {site_zone: w, registry_token: s3cr3t-token}
`

func writeCluster(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, content := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return filepath.Join(dir, "cluster.yaml")
}

func TestClusterVarsReachTheInventory(t *testing.T) {
	t.Setenv("HOME", t.TempDir())
	path := writeCluster(t, map[string]string{
		"cluster.yaml":           varsCluster,
		"group_vars/worker.yaml": "site_zone: from-file\nworker_only: 1\n",
		"group_vars/all.yml":     "site_dns: 10.0.0.53\n",
		"host_vars/node2.yaml":   "site_zone: b\nnested: {password: hunter2-pw, port: 1}\n",
		"host_vars/README":       "not a vars file",
	})
	c, _, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	inv, err := Inventory(c, "")
	if err != nil {
		t.Fatal(err)
	}
	if inv.Vars["site_ntp"] != "ntp.example" || inv.Vars["site_dns"] != "10.0.0.53" {
		t.Errorf("all vars = %v", inv.Vars)
	}
	if w := inv.GroupVars["worker"]; w["site_zone"] != "from-file" || w["worker_only"] != 1 || w["registry_token"] != "s3cr3t-token" {
		t.Errorf("worker group vars = %v (group_vars/worker.yaml over roleGroupVars.worker)", w)
	}
	h1, h2 := inv.Hosts[0], inv.Hosts[1]
	if h1.Vars["site_zone"] != "a" || !reflect.DeepEqual(h1.Vars["kubelet_extra_args"], []any{"--max-pods=200"}) || h1.Vars["arch"] != "amd64" {
		t.Errorf("node1 vars = %v", h1.Vars)
	}
	if h2.Vars["site_zone"] != "b" {
		t.Errorf("node2 vars = %v (host_vars/node2.yaml)", h2.Vars)
	}
	secrets := inv.Secrets()
	for _, s := range []string{"s3cr3t-token", "hunter2-pw"} {
		if !slices.Contains(secrets, s) {
			t.Errorf("secret %q is not masked in runs (secrets %q)", s, secrets)
		}
	}
	out, err := Marshal(c.Masked())
	if err != nil {
		t.Fatal(err)
	}
	view := string(out)
	for _, want := range []string{"roleGroupVars:", "worker_only: 1", "site_zone: b", "site_dns: 10.0.0.53", "kubelet_extra_args:"} {
		if !strings.Contains(view, want) {
			t.Errorf("config view lacks %q:\n%s", want, view)
		}
	}
	for _, secret := range []string{"s3cr3t-token", "hunter2-pw"} {
		if strings.Contains(view, secret) {
			t.Errorf("config view shows secret %q:\n%s", secret, view)
		}
	}
	if !strings.Contains(view, "port: 1") {
		t.Errorf("config view masked a value that is not secret:\n%s", view)
	}
}

func TestClusterVarsValidated(t *testing.T) {
	t.Setenv("HOME", t.TempDir())
	cases := []struct{ name, cluster, file, content, want string }{
		{"bad name", strings.Replace(varsCluster, "site_zone: a", "site-zone: a", 1), "", "", `spec.hosts[0].vars.site-zone: "site-zone" is not a variable name`},
		{"reserved", strings.Replace(varsCluster, "site_zone: a", "arch: arm64", 1), "", "", `variable "arch" is reserved`},
		{"unknown group", strings.Replace(varsCluster, "worker: {site_zone", "workers: {site_zone", 1), "", "", `spec.roleGroupVars.workers: unknown group "workers"`},
		{"unknown host file", varsCluster, "host_vars/node3.yaml", "x: 1\n", `host_vars/node3: no host "node3"`},
		{"group file not a mapping", varsCluster, "group_vars/worker.yaml", "- 1\n", "a vars file is a mapping"},
		{"bad name in file", varsCluster, "group_vars/master.yaml", "\"1x\": 1\n", `"1x" is not a variable name`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			files := map[string]string{"cluster.yaml": tc.cluster}
			if tc.file != "" {
				files[tc.file] = tc.content
			}
			_, _, err := Load(writeCluster(t, files))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error = %v, want it to contain %q", err, tc.want)
			}
		})
	}
}
