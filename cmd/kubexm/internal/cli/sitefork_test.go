package cli

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/mensylisir/kubexm/engine/eval"
)

// TestSiteForkExample keeps docs/examples/site-fork (run on machines by the
// cluster suite) true to the kubexm it ships with: its overlay template
// replaces the registry block of the built-in one and nothing else (a
// change to the built-in template's blocks must be carried into the
// example), and create-cluster with its overlay and roles runs the site's
// network role and hook, and no chrony task.
func TestSiteForkExample(t *testing.T) {
	root := repoRoot(t)
	ex := filepath.Join(root, "docs", "examples", "site-fork")
	builtin, err := os.ReadFile(filepath.Join(root, "roles", "containerd", "templates", "config.toml.tmpl"))
	if err != nil {
		t.Fatal(err)
	}
	overlayFile := filepath.Join(ex, "overlay", "roles", "containerd", "templates", "config.toml.tmpl")
	overlay, err := os.ReadFile(overlayFile)
	if err != nil {
		t.Fatal(err)
	}
	if blocks, only, err := eval.TemplateBlocks(string(overlay)); err != nil || !only || len(blocks) != 1 || blocks[0].Name != "registry" {
		t.Fatalf("the example's overlay is no longer the registry block of roles/containerd/templates/config.toml.tmpl alone: %v (%s, a file of blocks only: %v)", err, eval.BlockNames(blocks), only)
	}
	vars := map[string]any{"containerd_restrict_oom_score_adj": false, "runc_bin": "/usr/local/bin/runc", "cni_bin_dir": "/opt/cni/bin",
		"containerd_registry_auths": map[string]any{"r.example": map[string]any{"username": "u", "password": "p"}}, "containerd_certs_dir": "/etc/containerd/certs.d",
		"containerd_sandbox_image": "registry.k8s.io/pause:3.10", "containerd_data_dir": "/var/lib/containerd", "containerd_state_dir": "/run/containerd",
		"containerd_extra_config": map[string]any{}}
	ev := eval.New()
	plain, err := ev.RenderBlocks(string(builtin), nil, vars)
	if err != nil {
		t.Fatal(err)
	}
	site, err := ev.RenderBlocks(string(builtin), []eval.BlockFile{{File: overlayFile, Text: string(overlay)}}, vars)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(site, "endpoint = ['https://mirror.site.example', 'https://registry.k8s.io']") || strings.Contains(site, "config_path") {
		t.Errorf("the example's registry block does not give containerd the site's mirror instead of config_path:\n%s", site)
	}
	for _, l := range strings.Split(plain, "\n") {
		if !strings.Contains(l, "registry") && !strings.Contains(l, "config_path") && !strings.Contains(l, "username") && !strings.Contains(l, "password") && !strings.Contains(site, l) {
			t.Errorf("the example's overlay changed more than the registry table: %q is gone", l)
		}
	}

	out, err := runCmd(t, realApp(), "create-cluster", "-i", filepath.Join(ex, "cluster.yaml"),
		"--overlay", filepath.Join(ex, "overlay"), "--roles-path", filepath.Join(ex, "roles"), "--skip-tags", "chrony", "--list-tasks")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	var names []string
	for _, l := range strings.Split(out, "\n") {
		name, _, _ := strings.Cut(strings.TrimSpace(l), "\t")
		names = append(names, name)
	}
	for _, want := range []string{"cni : CNI - the site's network role", "Site - label the nodes site.example/dc=dc1"} {
		if !slices.Contains(names, want) {
			t.Errorf("create-cluster with the example lists no %q:\n%s", want, out)
		}
	}
	if !strings.Contains(out, "(hook after-health, ") {
		t.Errorf("the example's hook is not listed as after-health:\n%s", out)
	}
	if strings.Contains(out, "Chrony - ") {
		t.Errorf("--skip-tags chrony still lists chrony tasks:\n%s", out)
	}
}
