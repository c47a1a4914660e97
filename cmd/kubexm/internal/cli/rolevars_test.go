package cli

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestRoleVarsChecked: cluster.yaml's variables and -e values are checked
// against the declarations of the roles the playbook runs, a fork's own
// roles included, before any task runs; a legal override reaches the task.
func TestRoleVarsChecked(t *testing.T) {
	spec := `  hosts:
  - {name: n1, address: localhost, connection: local}
  roleGroups: {etcd: [n1], master: [n1], worker: [n1]}
  roleGroupVars:
    all: {site_port: %s}
`
	dir := clusterDir(t, "site", strings.Replace(spec, "%s", "99999", 1))
	pb := filepath.Join(dir, "pb")
	putFile(t, filepath.Join(pb, "playbook.yaml"), []byte("- hosts: all\n  roles: [r]\n"))
	putFile(t, filepath.Join(pb, "roles", "r", "defaults", "main.yaml"), []byte("site_port: 80\n"))
	putFile(t, filepath.Join(pb, "roles", "r", "meta", "main.yaml"), []byte("variables:\n  site_port: {type: port}\n"))
	putFile(t, filepath.Join(pb, "roles", "r", "tasks", "main.yaml"), []byte("- fake: \"{{ .site_port }}\"\n"))
	cluster := filepath.Join(dir, "cluster.yaml")

	var calls []string
	out, err := runCmd(t, fakeStepApp(&calls), pb, "-i", cluster)
	if err == nil || !strings.Contains(err.Error(), "cluster.yaml:9:22") || !strings.Contains(err.Error(), "role variable site_port (role r): 99999 is not a valid port") {
		t.Fatalf("want the bad port refused at cluster.yaml:9:22, got %v\n%s", err, out)
	}
	if len(calls) > 0 {
		t.Errorf("tasks ran: %q", calls)
	}

	putFile(t, cluster, []byte("apiVersion: kubexm.mensylisir.io/v1alpha1\nkind: Cluster\nmetadata: {name: site}\nspec:\n"+strings.Replace(spec, "%s", "8080", 1)))
	for _, c := range []struct{ e, want string }{
		{"site_port=0", "-e site_port: role variable site_port (role r): 0 is not a valid port"},
		{"etcd_data_dir=/usr", "-e etcd_data_dir: role variable etcd_data_dir (role etcd): /usr is a system directory"},
		{`{"os_packages_deb": ["--allow-unauthenticated"]}`, `"--allow-unauthenticated" is an option, not a package name`},
	} {
		calls = nil
		_, err := runCmd(t, fakeStepApp(&calls), pb, "-i", cluster, "-e", c.e)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("-e %s: want %q, got %v", c.e, c.want, err)
		}
		if len(calls) > 0 {
			t.Errorf("-e %s: tasks ran: %q", c.e, calls)
		}
	}
	calls = nil
	if out, err := runCmd(t, fakeStepApp(&calls), pb, "-i", cluster); err != nil || len(calls) != 1 || calls[0] != "n1:8080" {
		t.Errorf("legal override: calls %q, err %v\n%s", calls, err, out)
	}
	calls = nil
	if out, err := runCmd(t, fakeStepApp(&calls), pb, "-i", cluster, "-e", "site_port=8443"); err != nil || len(calls) != 1 || calls[0] != "n1:8443" {
		t.Errorf("legal -e: calls %q, err %v\n%s", calls, err, out)
	}
}
