package validate

import (
	. "github.com/mensylisir/kubexm/schema"
	"github.com/mensylisir/kubexm/schema/rolevars"

	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const roleVarsCluster = `apiVersion: kubexm.mensylisir.io/v1alpha1
kind: Cluster
metadata: {name: site}
spec:
  hosts:
  - {name: node1, address: 10.0.0.1}
  - {name: node2, address: 10.0.0.2}
  roleGroups: {etcd: [node1], master: [node1], worker: [node1, node2]}
`

// writeClusterWith writes a valid cluster file with extra text under spec and
// returns its path.
func writeClusterWith(t *testing.T, dir, extra string) string {
	t.Helper()
	f := filepath.Join(dir, "cluster.yaml")
	if err := os.WriteFile(f, []byte(roleVarsCluster+extra), 0o600); err != nil {
		t.Fatal(err)
	}
	return f
}

func loadProblems(t *testing.T, err error) []Problem {
	t.Helper()
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("want a validation error, got %v", err)
	}
	return e.Problems
}

func TestRoleVarsRefusedAtTheirLine(t *testing.T) {
	cases := []struct {
		name, vars, want, hint string
	}{
		{"etcd data dir in /etc", "  roleGroupVars:\n    etcd:\n      etcd_data_dir: /etc\n", "role variable etcd_data_dir (role etcd) follows spec.etcd.dataDir", "set spec.etcd.dataDir"},
		{"a data dir of a role in /etc", "  roleGroupVars:\n    all:\n      etcd_config_dir: /etc\n", `/etc is a system directory`, "give one of its own"},
		{"apt option as a package", "  roleGroupVars:\n    all:\n      os_packages_deb: [curl, --allow-unauthenticated]\n", `item 2: "--allow-unauthenticated" is an option, not a package name`, "package name"},
		{"apt -o option as a package", "  roleGroupVars:\n    all:\n      os_chrony_package: \"-o APT::Get::AllowUnauthenticated=true\"\n", "is an option, not a package name", "package name"},
		{"port out of range", "  roleGroupVars:\n    all:\n      etcd_client_port: 70000\n", "70000 is not a valid port", "1-65535"},
		{"advert below VRRPv3's centisecond", "  roleGroupVars:\n    loadbalancer:\n      lb_vrrp_advert_int: 0.005\n", "0.005 is not a number of seconds", "at most 2 decimals"},
		{"advert as an expression", "  roleGroupVars:\n    loadbalancer:\n      lb_vrrp_advert_int: \"1e0\"\n", `"1e0" is not a number of seconds`, "such as 1 or 0.5"},
		{"newline in a unit value", "  roleGroupVars:\n    all:\n      lb_haproxy_unit: \"x\\nExecStartPre=/bin/sh\"\n", "is not a valid name", "systemd unit"},
		{"template", "  roleGroupVars:\n    all:\n      etcd_client_port: \"{{ .x }}\"\n", "is a template", "write the value itself"},
		{"template item", "  roleGroupVars:\n    all:\n      os_kernel_modules: [overlay, \"{{ .m }}\"]\n", `item 2: "{{ .m }}" is a template`, "write the value itself"},
		{"an image tag with a space", "  roleGroupVars:\n    all:\n      nodelocaldns_version: \"1.25 --x\"\n", "is not a valid tag", "an image tag"},
		{"a variable no longer read", "  roleGroupVars:\n    etcd:\n      nodes_etcd_cert: /etc/ssl/admin.pem\n", "role variable nodes_etcd_cert (role nodes) is no longer read", "set etcd_client_cert instead"},
		{"typo of a role variable", "  roleGroupVars:\n    all:\n      kubelet_extra_confg: {maxPods: 10}\n", `unknown variable "kubelet_extra_confg", close to role variable kubelet_extra_config`, "did you mean kubelet_extra_config"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := writeClusterWith(t, t.TempDir(), c.vars)
			_, _, err := Load(f)
			ps := loadProblems(t, err)
			var found *Problem
			for i := range ps {
				if strings.Contains(ps[i].Message, c.want) {
					found = &ps[i]
				}
			}
			if found == nil {
				t.Fatalf("want a problem %q, got %v", c.want, err)
			}
			lines := strings.Count(string(mustRead(t, f)), "\n")
			if found.Pos.File != f || found.Pos.Line != lines {
				t.Errorf("problem at %s:%d, want %s:%d (the variable's line)", found.Pos.File, found.Pos.Line, f, lines)
			}
			if !strings.Contains(found.Hint, c.hint) {
				t.Errorf("hint %q, want it to say %q", found.Hint, c.hint)
			}
		})
	}
}

func TestRoleVarsLegalOverrides(t *testing.T) {
	dir := t.TempDir()
	f := writeClusterWith(t, dir, "  roleGroupVars:\n    all:\n      etcd_client_port: 12379\n      kubelet_extra_config: {maxPods: 150}\n"+
		"      os_packages_deb: [curl, libc6:amd64]\n      lb_timeout_client: 30m\n      my_site_setting: \"{{ .anything }}\"\n"+
		"      nodelocaldns_version: coredns-v1.14.6\n      lb_vrrp_advert_int: 0.5\n      lb_vrrp_check_interval: 1\n")
	c, _, err := Load(f)
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Spec.RoleGroupVars["all"]["etcd_client_port"]; got == nil {
		t.Error("the override was lost")
	}
	// group_vars/ and host_vars/ files beside the cluster file: the same
	// rules, at the file's line.
	putVars := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	gv := putVars("group_vars/all.yaml", "# site\nkubelet_extra_config: {maxPods: 150}\ncontainerd_bin_dir: relative/bin\n")
	_, _, err = Load(f)
	ps := loadProblems(t, err)
	if len(ps) != 1 || ps[0].Pos.File != gv || ps[0].Pos.Line != 3 || !strings.Contains(ps[0].Message, "containerd_bin_dir") {
		t.Errorf("want one problem at %s:3 naming containerd_bin_dir, got %v", gv, err)
	}
}

func TestRoleVarsExtraVars(t *testing.T) {
	rv, err := rolevars.BuiltinRoleVars()
	if err != nil {
		t.Fatal(err)
	}
	if err := rv.CheckExtraVars(map[string]any{"etcd_version": "v3.5.21", "nodes": "node3", "my_own": "{{ x }}", "containerd_pause_tag": "3.9", "backup_key_file": "backup.key"}); err != nil {
		t.Errorf("legal -e refused: %v", err)
	}
	err = rv.CheckExtraVars(map[string]any{"etcd_data_dir": "/etc", "os_packages_deb": []any{"-o", "APT::Get::AllowUnauthenticated=1"}, "nodes_etcd_key": "/k.pem"})
	for _, want := range []string{"-e etcd_data_dir: role variable etcd_data_dir (role etcd): /etc is a system directory", "-e os_packages_deb:", "is an option", "nodes_etcd_key (role nodes) is no longer read"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("want %q, got %v", want, err)
		}
	}
}

func TestRoleVarsDeclarationsChecked(t *testing.T) {
	_, err := rolevars.ParseRoleVars("m.yaml", []byte("variables:\n  a: {type: pth}\n  b: {type: str, of: path}\n  c: {type: str, rule: x}\n"))
	for _, want := range []string{`variables.a: unknown type "pth"`, "variables.b: of", "variables.c:"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("want %q, got %v", want, err)
		}
	}
}

// TestRoleReadmesListTheVariables: each role's README carries the table of
// its declared variables. KUBEXM_UPDATE_DOCS=1 writes it.
func TestRoleReadmesListTheVariables(t *testing.T) {
	const begin, end = "<!-- begin: role variables (generated from meta/main.yaml) -->\n", "<!-- end: role variables -->\n"
	metas, err := filepath.Glob("../../roles/*/meta/main.yaml")
	if err != nil {
		t.Fatal(err)
	}
	nested, _ := filepath.Glob("../../roles/*/*/meta/main.yaml")
	for _, meta := range append(metas, nested...) {
		dir := filepath.Dir(filepath.Dir(meta))
		data := mustRead(t, meta)
		table, err := rolevars.RoleVarsMarkdown(meta, data)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(data), "variables:") {
			continue
		}
		readme := filepath.Join(dir, "README.md")
		text := string(mustRead(t, readme))
		section := begin + "\n" + table + "\n" + end
		before, rest, ok1 := strings.Cut(text, begin)
		_, after, ok2 := strings.Cut(rest, end)
		var want string
		if ok1 && ok2 {
			want = before + section + after
		} else {
			want = strings.TrimRight(text, "\n") + "\n\n## What each variable may hold\n\nWhat cluster.yaml (`vars`, `roleGroupVars`, group_vars/, host_vars/) and `-e` may set\n" +
				"each variable of defaults/main.yaml to, as declared in meta/main.yaml and checked before\nany task runs (docs/guide.md, \"Role variables\").\n\n" + section
		}
		if want == text {
			continue
		}
		if os.Getenv("KUBEXM_UPDATE_DOCS") == "1" {
			if err := os.WriteFile(readme, []byte(want), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		t.Errorf("%s: its variables table differs from meta/main.yaml; run KUBEXM_UPDATE_DOCS=1 go test ./schema -run TestRoleReadmesListTheVariables", readme)
	}
}
