package cli

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestSiteForkExample keeps docs/examples/site-fork (run on machines by the
// cluster suite) true to the kubexm it ships with: its overlay template is
// the built-in one plus the site's lines (a change to the built-in template
// must be carried into the example), and create-cluster with its overlay
// and roles runs the site's network role and hook, and no chrony task.
func TestSiteForkExample(t *testing.T) {
	root := repoRoot(t)
	ex := filepath.Join(root, "docs", "examples", "site-fork")
	builtin, err := os.ReadFile(filepath.Join(root, "roles", "containerd", "templates", "config.toml.tmpl"))
	if err != nil {
		t.Fatal(err)
	}
	overlay, err := os.ReadFile(filepath.Join(ex, "overlay", "roles", "containerd", "templates", "config.toml.tmpl"))
	if err != nil {
		t.Fatal(err)
	}
	var site []string
	var rest []string
	for _, l := range strings.SplitAfter(string(overlay), "\n") {
		if strings.Contains(l, "site") {
			site = append(site, l)
			continue
		}
		rest = append(rest, l)
	}
	if strings.Join(rest, "") != string(builtin) || len(site) != 2 {
		t.Errorf("the example's overlay is no longer roles/containerd/templates/config.toml.tmpl plus the site's 2 lines (%d found): re-base it on the built-in template", len(site))
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
