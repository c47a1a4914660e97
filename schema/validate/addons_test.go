package validate

import (
	. "github.com/mensylisir/kubexm/schema"

	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestAddons: spec.addons takes names and KubeKey's entries with sources;
// the spec variable carries each entry's kind and its files resolved
// against the cluster file; chart values under secret-named keys are
// secrets of the inventory and masked by config view.
func TestAddons(t *testing.T) {
	t.Setenv("HOME", t.TempDir())
	good := varsCluster + `  addons:
  - metrics-server
  - name: team
    namespace: team
    sources:
      yaml: {path: [m/a.yaml, m/b.yaml]}
  - name: tiny
    sources:
      chart:
        path: charts/tiny
        valuesFile: values.yaml
        values: {greeting: hi, db: {password: hunter2-secret}}
  - name: kk
    sources:
      chart: {path: charts/tiny, values: ["a.b=1", "auth.token=tok-secret"]}
`
	path := writeCluster(t, map[string]string{"cluster.yaml": good, "m/a.yaml": "kind: ConfigMap\n", "m/b.yaml": "kind: ConfigMap\n",
		"charts/tiny/Chart.yaml": "apiVersion: v2\nname: tiny\nversion: 0.1.0\n", "values.yaml": "a: 1\n"})
	c, _, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Dir(path)
	var kinds []string
	for _, a := range c.Spec.Addons {
		kinds = append(kinds, a.Kind())
	}
	if !slices.Equal(kinds, []string{"builtin", "yaml", "chart", "chart"}) || c.Spec.Addons[0].Name != "metrics-server" {
		t.Fatalf("addons %+v, kinds %v", c.Spec.Addons, kinds)
	}
	inv, err := Inventory(c, "")
	if err != nil {
		t.Fatal(err)
	}
	addons := inv.Vars["spec"].(map[string]any)["addons"].([]any)
	team := addons[1].(map[string]any)
	if team["kind"] != "yaml" || !slices.Equal(team["sources"].(map[string]any)["yaml"].(map[string]any)["path"].([]any),
		[]any{filepath.Join(dir, "m/a.yaml"), filepath.Join(dir, "m/b.yaml")}) {
		t.Errorf("team add-on variable: %v", team)
	}
	chart := addons[2].(map[string]any)["sources"].(map[string]any)["chart"].(map[string]any)
	if chart["path"] != filepath.Join(dir, "charts/tiny") || chart["valuesFile"] != filepath.Join(dir, "values.yaml") {
		t.Errorf("tiny add-on variable: %v", chart)
	}
	for _, s := range []string{"hunter2-secret", "tok-secret"} {
		if !slices.Contains(inv.OtherSecrets, s) {
			t.Errorf("secrets %v lack %q", inv.OtherSecrets, s)
		}
	}
	if slices.Contains(inv.OtherSecrets, "hi") || slices.Contains(inv.OtherSecrets, "1") {
		t.Errorf("secrets hold values that are not: %v", inv.OtherSecrets)
	}
	m := c.Masked()
	if v := m.Spec.Addons[2].Sources.Chart.Values.(map[string]any)["db"].(map[string]any)["password"]; v != Mask {
		t.Errorf("masked password = %v", v)
	}
	if v := m.Spec.Addons[3].Sources.Chart.Values.([]any); v[1] != "auth.token="+Mask || v[0] != "a.b=1" {
		t.Errorf("masked entries = %v", v)
	}
	if c.Spec.Addons[2].Sources.Chart.Values.(map[string]any)["db"].(map[string]any)["password"] != "hunter2-secret" {
		t.Errorf("Masked changed the original")
	}
}

// TestAddonsRefused: every wrong entry at its line, with a hint, before
// anything runs.
func TestAddonsRefused(t *testing.T) {
	t.Setenv("HOME", t.TempDir())
	bad := varsCluster + `  addons:
  - metallb
  - name: Team_1
    sources: {yaml: {path: [m/a.yaml]}}
  - name: both
    sources: {yaml: {path: [m/a.yaml]}, chart: {path: charts/tiny}}
  - name: gone
    sources: {yaml: {path: [m/missing.yaml, "https://example.com/x.yaml", m]}}
  - name: repo-only
    sources: {chart: {name: nginx, repo: https://charts.example.com, version: 1.2.3}}
  - name: nochart
    sources: {chart: {path: m, valuesFile: nope.yaml, values: [novalue]}}
  - name: empty
    sources: {}
  - name: both
    namespace: Bad_NS
    sources: {yaml: {path: [m/a.yaml]}}
`
	path := writeCluster(t, map[string]string{"cluster.yaml": bad, "m/a.yaml": "kind: ConfigMap\n", "charts/tiny/Chart.yaml": "name: tiny\n"})
	_, _, err := Load(path)
	if err == nil {
		t.Fatal("loaded")
	}
	for _, want := range []string{
		"cluster.yaml:15:", "metallb is not supported yet",
		"cluster.yaml:16:", `"Team_1" is not an add-on name`,
		"cluster.yaml:19:", "an add-on has yaml or chart sources, not both", "split it into two add-ons",
		"cluster.yaml:21:", "m/missing.yaml not found", `"https://example.com/x.yaml" is a URL`, "is a directory",
		"cluster.yaml:23:", "a chart add-on needs path", "helm pull --repo https://charts.example.com nginx --version 1.2.3",
		"has no Chart.yaml", "nope.yaml not found", "not a key=value entry",
		"cluster.yaml:27:", "an add-on's sources name yaml or chart",
		"cluster.yaml:28:", `add-on "both" is also spec.addons[2]`,
		"cluster.yaml:29:", `"Bad_NS" is not a namespace name`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
}
