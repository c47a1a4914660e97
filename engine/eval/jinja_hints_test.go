package eval

import (
	"strings"
	"testing"
)

// TestJinjaHints: each Jinja or Ansible habit gets a hint in kubexm's syntax,
// and none is the misleading "variables start with a dot".
func TestJinjaHints(t *testing.T) {
	e := New()
	for src, want := range map[string]string{
		`{% if x %}a{% endif %}`:                    `{{ if .x }}`,
		`a {{ .x }} {%- for h in y -%}`:             `{{ range .list }}`,
		`{{ .x | default('a') }}`:                   `{{ .x | default "a" }}`,
		`{{ .x | join(",") }}`:                      `space-separated`,
		`{{ .x | length }}`:                         `{{ len .x }}`,
		`{{ .x | to_nice_yaml }}`:                   `toYaml`,
		`{{ query('inventory_hostnames', 'all') }}`: `{{ .groups.g }}`,
		`{{ lookup('file', '/etc/hosts') }}`:        `delegate_to: localhost`,
		`{{ .x | nosuchfilter }}`:                   `there is no function nosuchfilter`,
		`{{ inventory_hostname }}`:                  `{{ .inventory_hostname }}`,
	} {
		err := e.CheckTemplate(src)
		if err == nil || !strings.Contains(err.Error(), want) || (want != `{{ .inventory_hostname }}` && strings.Contains(err.Error(), "start with a dot")) {
			t.Errorf("%s: %v, want a hint with %q", src, err, want)
		}
	}
	if _, err := e.Render(`{% if x %}a{% endif %}`+"{{ .x }}", map[string]any{"x": 1}); err == nil {
		t.Error("a Jinja statement rendered as text")
	}
	for _, ok := range []string{`printf '{%s}'`, `100{%}`, `{{ printf "%d%%" 3 }}`} {
		if err := e.CheckTemplate(ok); err != nil {
			t.Errorf("%s: %v", ok, err)
		}
	}
	for src, want := range map[string]string{
		`query('inventory_hostnames', 'all')`: `{{ .groups.g }}`,
		`x | length > 0`:                      `len(x)`,
	} {
		if err := e.CheckExpr(src); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want a hint with %q", src, err, want)
		}
	}
}
