//go:build e2e

package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/goccy/go-yaml"
)

// TestUpgradeSkewRules renders the upgrade role's upgrade_skew_problems
// (what the pre-checks refuse) for the steps the issue names, with the skew
// rules of roles/support.yaml, without machines.
func TestUpgradeSkewRules(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(moduleRoot(t), "roles", "support.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var support map[string]any
	if err := yaml.Unmarshal(data, &support); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, current, target string
		nodes                 map[string]any
		want                  []string // substrings, one per problem; none: allowed
	}{
		{name: "one minor up", current: "v1.36.3", target: "v1.37.2", nodes: map[string]any{"n1": "v1.36.3", "n2": "v1.36.3"}},
		{name: "a patch", current: "v1.37.1", target: "v1.37.2", nodes: map[string]any{"n1": "v1.37.1"}},
		{name: "the same version (a re-run)", current: "v1.37.2", target: "v1.37.2", nodes: map[string]any{"n1": "v1.37.2"}},
		{name: "resumed: kubelets behind", current: "v1.37.2", target: "v1.37.2", nodes: map[string]any{"n1": "v1.37.2", "n2": "v1.36.3"}},
		{name: "two minors", current: "v1.35.4", target: "v1.37.2", nodes: map[string]any{"n1": "v1.35.4"},
			want: []string{"v1.35.4 to v1.37.2 skips a minor: upgrade one minor at a time (to v1.36 first)"}},
		{name: "downgrade", current: "v1.37.2", target: "v1.36.3", nodes: map[string]any{"n1": "v1.37.2"},
			want: []string{"downgrade refused: the API server runs v1.37.2, cluster.yaml asks for v1.36.3", "node n1 runs kubelet v1.37.2, newer than the target v1.36.3"}},
		{name: "a patch down", current: "v1.37.2", target: "v1.37.1", nodes: map[string]any{},
			want: []string{"downgrade refused"}},
		{name: "kubelet too old", current: "v1.36.3", target: "v1.37.2", nodes: map[string]any{"n1": "v1.36.3", "n3": "v1.33.13"},
			want: []string{"node n3 runs kubelet v1.33.13, more than 3 minors older than v1.37.2"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			vars := kubeVars("n1", func(s map[string]any) {
				s["kubernetes"].(map[string]any)["version"] = c.target
				s["network"].(map[string]any)["plugin"] = "flannel"
			})
			v := withRoleDefaults(t, "upgrade", vars, map[string]any{
				"kubernetes":              support["kubernetes"],
				"upgrade_current_version": c.current,
				"upgrade_node_versions":   c.nodes,
			})
			got := strings.TrimSpace(v["upgrade_skew_problems"].(string))
			var lines []string
			if got != "" {
				lines = strings.Split(got, "\n")
			}
			if len(lines) != len(c.want) {
				t.Fatalf("problems:\n%s\nwant %d: %q", got, len(c.want), c.want)
			}
			for i, w := range c.want {
				if !strings.Contains(lines[i], w) {
					t.Errorf("problem %d = %q, want %q", i, lines[i], w)
				}
			}
		})
	}
}
