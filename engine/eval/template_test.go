package eval

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

func testVars() map[string]any {
	return map[string]any{
		"inventory_hostname": "node1",
		"groups": map[string]any{
			"etcd": []any{"node1", "node2", "node3"},
			"all":  []any{"node1", "node2", "node3", "node4"},
		},
		"hostvars": map[string]any{
			"node1":             map[string]any{"address": "10.0.0.1"},
			"node2.example.com": map[string]any{"address": "10.0.0.2"},
		},
		"spec": map[string]any{
			"kubernetes": map[string]any{"version": "v1.30.2"},
			"etcd":       map[string]any{"dataDir": "/var/lib/etcd", "enabled": true},
			"network":    map[string]any{"serviceCIDR": "10.96.0.0/12"},
			"replicas":   uint64(3), // what the YAML decoder gives
			"empty":      nil,
			"labels":     map[string]string{"zone": "a"},
		},
		"item": map[string]any{"name": "kubelet", "port": 10250},
		"list": []any{map[string]any{"name": "a"}, map[string]any{"name": "b", "extra": 1}},
	}
}

func TestRender(t *testing.T) {
	tests := []struct {
		name string
		src  string
		want any
	}{
		{"no template is returned as is", "plain text {not a template}", "plain text {not a template}"},
		{"field chain", "{{ .spec.etcd.dataDir }}", "/var/lib/etcd"},
		{"text around", "dir={{ .spec.etcd.dataDir }}/member", "dir=/var/lib/etcd/member"},
		{"single action keeps list", "{{ .groups.etcd }}", []any{"node1", "node2", "node3"}},
		{"single action keeps map", "{{ .spec.etcd }}", map[string]any{"dataDir": "/var/lib/etcd", "enabled": true}},
		{"single action keeps int", "{{ 3 }}", 3},
		{"single action keeps bool", "{{ .spec.etcd.enabled }}", true},
		{"single action keeps uint64", "{{ .spec.replicas }}", uint64(3)},
		{"single action keeps nil", "{{ .spec.empty }}", nil},
		{"surrounding spaces allowed", "  {{ .groups.etcd }}\n", []any{"node1", "node2", "node3"}},
		{"trim markers", "{{- .spec.replicas -}}", uint64(3)},
		{"single string keeps surrounding spaces", " {{ .inventory_hostname }} ", " node1 "},
		{"two actions give a string", "{{ 1 }}{{ 2 }}", "12"},
		{"pipeline to string", "{{ .spec.etcd | toYaml }}", "dataDir: /var/lib/etcd\nenabled: true"},
		{"nil prints as nothing", "a{{ .spec.empty }}b", "ab"},
		{"nil from a function prints as nothing", "a{{ coalesce .nope .spec.empty }}b", "ab"},
		{"nil from index prints as nothing", `a{{ index .spec "empty" }}b`, "ab"},
		{"default on missing key", `{{ .spec.etcd.nope | default "x" }}`, "x"},
		{"default on missing parent", `{{ .nope.deeper.still | default "x" }}`, "x"},
		{"default call form", `{{ default "x" .nope }}`, "x"},
		{"default keeps present value", `{{ .inventory_hostname | default "x" }}`, "node1"},
		{"default then more pipeline", `{{ .nope | default "x" | upper }}`, "X"},
		{"coalesce tolerates missing", `{{ coalesce .nope .spec.empty "z" }}`, "z"},
		{"empty tolerates missing", `{{ empty .nope }}`, true},
		{"index", `{{ index .hostvars "node1" "address" }}`, "10.0.0.1"},
		{"index with odd key", `{{ index .hostvars "node2.example.com" "address" }}`, "10.0.0.2"},
		{"index with variable key", `{{ index .hostvars .inventory_hostname "address" }}`, "10.0.0.1"},
		{"index list", `{{ index .groups.etcd 1 }}`, "node2"},
		{"index missing under default", `{{ index .hostvars "nodeX" "address" | default "none" }}`, "none"},
		{"typed map values", `{{ .spec.labels.zone }}`, "a"},
		{"range with dot", `{{ range .groups.etcd }}{{ . }},{{ end }}`, "node1,node2,node3,"},
		{"range over maps", `{{ range .list }}{{ .name }}{{ end }}`, "ab"},
		{"range variables", `{{ range $i, $h := .groups.etcd }}{{ $i }}={{ $h }} {{ end }}`, "0=node1 1=node2 2=node3 "},
		{"root variable inside range", `{{ range .groups.etcd }}{{ $.inventory_hostname }}{{ end }}`, "node1node1node1"},
		{"declared variable chain", `{{ $e := .spec.etcd }}{{ $e.dataDir }}`, "/var/lib/etcd"},
		{"with", `{{ with .spec.etcd }}{{ .dataDir }}{{ end }}`, "/var/lib/etcd"},
		{"if else", `{{ if eq .inventory_hostname "node1" }}first{{ else }}other{{ end }}`, "first"},
		{"and short-circuits before a missing key", `{{ if and false .nope }}x{{ else }}y{{ end }}`, "y"},
		{"parenthesised chain", `{{ (index .list 1).extra }}`, 1},
		{"cidrHost service ip", `{{ cidrHost .spec.network.serviceCIDR 1 }}`, "10.96.0.1"},
		{"cidrHost dns ip", `{{ cidrHost .spec.network.serviceCIDR 10 }}`, "10.96.0.10"},
		{"joinHostPort", `{{ joinHostPort "fd00::1" 6443 }}`, "[fd00::1]:6443"},
		{"versionAtLeast", `{{ versionAtLeast .spec.kubernetes.version "1.29" }}`, true},
		{"semverCompare from sprig", `{{ semverCompare ">=1.30.0" .spec.kubernetes.version }}`, true},
		{"nindent", "x:{{ .spec.etcd | toYaml | nindent 2 }}", "x:\n  dataDir: /var/lib/etcd\n  enabled: true"},
		{"define and template", `{{ define "h" }}[{{ . }}]{{ end }}{{ template "h" .inventory_hostname }}`, "[node1]"},
		{"item", `{{ .item.name }}:{{ .item.port }}`, "kubelet:10250"},
	}
	e := New()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := e.Render(tt.src, testVars())
			if err != nil {
				t.Fatalf("Render(%q): %v", tt.src, err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("Render(%q) = %#v, want %#v", tt.src, got, tt.want)
			}
		})
	}
	if n := countCaptures(e); n != 0 {
		t.Fatalf("%d captured values left behind", n)
	}
}

func TestRenderErrors(t *testing.T) {
	tests := []struct {
		name    string
		src     string
		missing string
		msg     string // substring of Error()
	}{
		{"missing key names full path", "{{ .spec.etcd.dataDirr }}", "spec.etcd.dataDirr",
			`undefined variable "spec.etcd.dataDirr" in template "{{ .spec.etcd.dataDirr }}"`},
		{"missing top-level", "x{{ .nope }}", "nope", `undefined variable "nope"`},
		{"missing under nil", "{{ .spec.empty.x }}", "spec.empty.x", `undefined variable "spec.empty.x"`},
		{"missing in if", "{{ if .spec.nope }}x{{ end }}", "spec.nope", ""},
		{"missing in range body is relative", "{{ range .list }}{{ .extra }}{{ end }}", "extra", ""},
		{"missing variable chain", "{{ $e := .spec }}{{ $e.nope }}", "$e.nope", ""},
		{"index missing key", `{{ index .hostvars "node9" "address" }}`, "hostvars.node9", ""},
		{"index out of range", `{{ index .groups.etcd 7 }}`, "groups.etcd[7]", ""},
		{"odd key quoted", `{{ index .hostvars "node2.example.com" "port" }}`, `hostvars["node2.example.com"].port`, ""},
		{"line of a multi-line template", "a\nb\n{{ .nope }}", "nope", "at line 3"},
		{"unknown function", "{{ .x | frobnicate }}", "", `function "frobnicate" not defined`},
		{"syntax error", "{{ .x ", "", "line 1"},
		{"env is not available", `{{ env "HOME" }}`, "", `function "env" not defined`},
		{"expandenv is not available", `{{ expandenv "$HOME" }}`, "", `function "expandenv" not defined`},
		{"internal functions are not callable", `{{ kxmField "" . }}`, "", `function "kxmField" not defined`},
		{"function error names the function once", `{{ cidrHost "nonsense" 1 }}`, "", `": line 1:3: cidrHost: netip.ParsePrefix`},
		{"sprig function error", `{{ fail "boom" }}`, "", "error calling fail: boom"},
		{"indexing a string", `{{ .inventory_hostname.x }}`, "", "cannot read x"},
		{"recursion refused", `{{ define "a" }}{{ template "a" }}{{ end }}{{ template "a" }}`, "", "calls itself"},
		{"required", `{{ required "set spec.foo" .spec.foo }}`, "", "set spec.foo"},
	}
	e := New()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := e.Render(tt.src, testVars())
			if err == nil {
				t.Fatalf("Render(%q): no error", tt.src)
			}
			var ee *Error
			if !errors.As(err, &ee) {
				t.Fatalf("error %T is not *Error: %v", err, err)
			}
			if errors.Unwrap(err) == nil {
				t.Errorf("Unwrap(%v) = nil", err)
			}
			if ee.Kind != "template" || ee.Source != tt.src {
				t.Errorf("Kind=%q Source=%q", ee.Kind, ee.Source)
			}
			if ee.Missing != tt.missing {
				t.Errorf("Missing = %q, want %q (%v)", ee.Missing, tt.missing, err)
			}
			if !strings.Contains(err.Error(), tt.msg) {
				t.Errorf("error %q does not contain %q", err, tt.msg)
			}
			leak := strings.Contains(err.Error(), "kxm") && !strings.Contains(tt.src, "kxm")
			if strings.Contains(err.Error(), "<no value>") || leak {
				t.Errorf("error leaks internals: %q", err)
			}
		})
	}
}

func TestRenderNeverPrintsNoValue(t *testing.T) {
	e := New()
	out, err := e.RenderString("[{{ .spec.empty }}]", testVars())
	if err != nil || out != "[]" {
		t.Fatalf("got %q, %v", out, err)
	}
}

func TestRenderString(t *testing.T) {
	e := New()
	tests := map[string]string{
		"{{ .groups.etcd }}":             "[node1 node2 node3]",
		"{{ 3 }}":                        "3",
		"{{ .spec.empty }}":              "",
		"host {{ .inventory_hostname }}": "host node1",
		"plain":                          "plain",
	}
	for src, want := range tests {
		got, err := e.RenderString(src, testVars())
		if err != nil || got != want {
			t.Errorf("RenderString(%q) = %q, %v; want %q", src, got, err, want)
		}
	}
}

func TestRenderValue(t *testing.T) {
	e := New()
	in := map[string]any{
		"name":  "{{ .inventory_hostname }}",
		"hosts": "{{ .groups.etcd }}",
		"count": 3,
		"nested": []any{
			"{{ cidrHost .spec.network.serviceCIDR 10 }}",
			map[string]any{"{{ .not_a_key_template }}": "v-{{ .spec.replicas }}"},
			true,
		},
	}
	orig := map[string]any{
		"name":  "{{ .inventory_hostname }}",
		"hosts": "{{ .groups.etcd }}",
		"count": 3,
		"nested": []any{
			"{{ cidrHost .spec.network.serviceCIDR 10 }}",
			map[string]any{"{{ .not_a_key_template }}": "v-{{ .spec.replicas }}"},
			true,
		},
	}
	got, err := e.RenderValue(in, testVars())
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"name":   "node1",
		"hosts":  []any{"node1", "node2", "node3"},
		"count":  3,
		"nested": []any{"10.96.0.10", map[string]any{"{{ .not_a_key_template }}": "v-3"}, true},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("RenderValue = %#v\nwant %#v", got, want)
	}
	if !reflect.DeepEqual(in, orig) {
		t.Fatalf("RenderValue mutated its input: %#v", in)
	}
	if _, err := e.RenderValue([]any{"ok", map[string]any{"k": "{{ .nope }}"}}, testVars()); err == nil {
		t.Fatal("RenderValue: missing variable in a nested value gave no error")
	}
}

func TestCheckTemplate(t *testing.T) {
	e := New()
	for src, ok := range map[string]bool{
		"plain":                         true,
		"{{ .anything.at.all }}":        true, // variables are only known at run time
		"{{ .x | default 1 | toYaml }}": true,
		"{{ .x ":                        false,
		"{{ nosuchfunc 1 }}":            false,
		"{{ if }}":                      false,
		"{{ end }}":                     false,
	} {
		err := e.CheckTemplate(src)
		if (err == nil) != ok {
			t.Errorf("CheckTemplate(%q) = %v, want ok=%v", src, err, ok)
		}
	}
}

func TestTemplateCache(t *testing.T) {
	e := New()
	for range 3 {
		if _, err := e.Render("{{ .inventory_hostname }}", testVars()); err != nil {
			t.Fatal(err)
		}
		_ = e.CheckTemplate("{{ .x ")
	}
	if n := cacheLen(e.templates); n != 2 {
		t.Fatalf("cache holds %d templates, want 2", n)
	}
}

func countCaptures(e *Evaluator) int {
	n := 0
	e.captures.Range(func(any, any) bool { n++; return true })
	return n
}

// The idioms docs/expressions.md recommends must keep working.
func TestDocumentedIdioms(t *testing.T) {
	e := New()
	for src, want := range map[string]any{
		`{{ if .nope | default false }}y{{ else }}n{{ end }}`: "n",
		`{{ if hasKey .spec "etcd" }}y{{ else }}n{{ end }}`:   "y",
		`{{ if not (empty .nope) }}y{{ else }}n{{ end }}`:     "n",
		`{{ .groups.etcd | join "," }}`:                       "node1,node2,node3",
		`{{ .groups.etcd | toJson }}`:                         `["node1","node2","node3"]`,
		`{{ .nope | default .spec.kubernetes.version }}`:      "v1.30.2",
		`{{ range $h := .groups.etcd }}{{ $h }}{{ end }}`:     "node1node2node3",
	} {
		got, err := e.Render(src, testVars())
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("Render(%q) = %#v, %v; want %#v", src, got, err, want)
		}
	}
}
