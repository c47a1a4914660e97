package validate

import (
	"strings"
	"testing"
)

// registry_proxy_remote_url (roles/registry's proxy-cache mode) is refused
// at its line with the field and a hint when the rest of cluster.yaml
// contradicts it.
func TestRegistryProxyRemoteURL(t *testing.T) {
	cluster := func(url, auths string) string {
		return edit(t, "worker: [w1]", "worker: [w1]\n    registry: [lb1]",
			"plugin: calico", "plugin: calico\n  registry:\n    type: registry\n    privateRegistry: reg.local:5000\n    auths:\n      reg.local:5000: {username: u, password: p}\n"+auths+
				"  roleGroupVars:\n    registry:\n      registry_proxy_remote_url: "+url)
	}
	for _, ok := range []string{
		cluster("https://mirror.example.org", ""),
		cluster("https://mirror.example.org:8443", "      mirror.example.org:8443: {username: m, password: q}\n"),
		cluster("http://10.0.0.9:5000", "      10.0.0.9:5000: {plainHTTP: true}\n"),
	} {
		if ps := problemsOf(t, ok); ps != nil {
			t.Errorf("refused: %v\n%s", ps, ok)
		}
	}
	const field = "spec.roleGroupVars.registry.registry_proxy_remote_url"
	for _, tc := range []struct{ name, yaml, msg, hint string }{
		{"plain HTTP unannounced", cluster("http://10.0.0.9:5000", ""), `upstream "http://10.0.0.9:5000" is plain HTTP`, `plainHTTP: true`},
		{"https to a plain HTTP registry", cluster("https://10.0.0.9:5000", "      10.0.0.9:5000: {plainHTTP: true}\n"), "says plainHTTP", "use http://10.0.0.9:5000"},
		{"a path", cluster("https://mirror.example.org/v2/library", ""), "has a path", "base URL, e.g. https://mirror.example.org"},
		{"itself", cluster("https://reg.local:5000", ""), "is privateRegistry itself", "another registry"},
	} {
		ps := problemsOf(t, tc.yaml)
		if len(ps) != 1 {
			t.Errorf("%s: %d problems, want 1: %v", tc.name, len(ps), ps)
			continue
		}
		p := ps[0]
		if p.Path != field || !strings.Contains(p.Message, tc.msg) || !strings.Contains(p.Hint, tc.hint) {
			t.Errorf("%s: %s: %s (hint %s)", tc.name, p.Path, p.Message, p.Hint)
		}
		// At the variable's own line: the roleGroupVars entry is the file's last.
		if p.Pos.File != "c.yaml" || p.Pos.Line != strings.Count(strings.TrimRight(tc.yaml, "\n"), "\n")+1 {
			t.Errorf("%s: at %s:%d, want the variable's line", tc.name, p.Pos.File, p.Pos.Line)
		}
	}
	// Without the registry kubexm deploys it means nothing: a warning.
	y := strings.Replace(cluster("https://mirror.example.org", ""), "type: registry", "type: external", 1)
	y = strings.Replace(y, "    registry: [lb1]\n", "", 1)
	if ps := problemsOf(t, y); ps != nil {
		t.Errorf("external: %v", ps)
	}
}
