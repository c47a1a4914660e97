//go:build e2e

package e2e

// The fast part of the nodes suite, without machines: the
// per-node haproxy's backends that add-nodes and delete-nodes change.

import (
	"strings"
	"testing"
)

// TestHaproxyBackends: every master of cluster.yaml is a backend by default
// (create-cluster, add-nodes), and lb_backends, which delete-nodes sets to
// the masters that stay, is exactly the backend list.
func TestHaproxyBackends(t *testing.T) {
	servers := func(cfg string) []string {
		var out []string
		for _, line := range strings.Split(cfg, "\n") {
			if f := strings.Fields(line); len(f) > 0 && f[0] == "server" {
				out = append(out, strings.Join(f, " "))
			}
		}
		return out
	}
	vars := func(backends []any) map[string]any {
		v := kubeVars("n2", nil)
		v["groups"].(map[string]any)["master"] = []any{"n1", "n3"}
		v["lb_bind"] = "127.0.0.1:6443"
		if backends != nil {
			v["lb_backends"] = backends
		}
		return withDefaults(t, "loadbalancer", v)
	}
	for _, c := range []struct {
		name     string
		backends []any
		want     []string
	}{
		{"every master", nil, []string{"server n1 10.0.0.1:6443", "server n3 10.0.0.3:6443"}},
		{"the masters that stay", []any{"n1"}, []string{"server n1 10.0.0.1:6443"}},
	} {
		got := servers(renderRoleTemplate(t, "loadbalancer", "haproxy.cfg.tmpl", vars(c.backends)))
		if strings.Join(got, "\n") != strings.Join(c.want, "\n") {
			t.Errorf("%s: backends %q, want %q", c.name, got, c.want)
		}
	}
}
