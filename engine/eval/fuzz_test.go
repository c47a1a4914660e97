package eval

import (
	"errors"
	"testing"
)

// The fuzz targets check that any input gives a value or an *Error, never a
// panic; the seeds cover every construct the rewrites touch.

func FuzzRender(f *testing.F) {
	for _, s := range []string{
		"plain", "{{ .spec.etcd.dataDir }}", "{{ .groups.etcd }}", `{{ .x | default "y" }}`,
		`{{ index .hostvars "node1" "address" }}`, `{{ range $i, $h := .groups.etcd }}{{ $i }}{{ $h }}{{ end }}`,
		`{{ with .spec.etcd }}{{ .dataDir }}{{ end }}`, `{{ $e := .spec }}{{ $e.etcd.dataDir }}`,
		`{{ (index .list 1).extra }}`, `{{ define "h" }}{{ . }}{{ end }}{{ template "h" .item }}`,
		`{{ cidrHost .spec.network.serviceCIDR 10 }}`, `{{ .spec | toYaml | nindent 2 }}`,
		`{{ if and .spec.etcd.enabled (eq .inventory_hostname "node1") }}y{{ else }}n{{ end }}`,
		"{{- .spec.replicas -}}", "{{ 3 }}", "{{ nil }}", "{{ .nope }}", "{{", "}}{{", "{{ .x.y.z | empty }}",
	} {
		f.Add(s)
	}
	e := New()
	f.Fuzz(func(t *testing.T, s string) {
		_, err := e.Render(s, testVars())
		if err != nil {
			var ee *Error
			if !errors.As(err, &ee) {
				t.Fatalf("Render(%q) error %T is not *Error: %v", s, err, err)
			}
			_ = err.Error()
		}
		_ = e.CheckTemplate(s)
	})
}

func FuzzEval(f *testing.F) {
	for _, s := range []string{
		`inventory_hostname == "node1" and inventory_hostname in groups.etcd`, `spec.etcd.nope ?? "d"`,
		`spec?.a?.b`, `defined("a.b.c")`, `defined("hostvars", inventory_hostname, "address")`,
		`hostvars[inventory_hostname].address`, `filter(list, .name == "a")`, `map(list, #.name)`,
		`let x = spec; x.etcd`, `cidrHost(spec.network.serviceCIDR, -1)`, `groups.etcd[1:2]`,
		`{"a": spec.replicas, b: [1, 2]}.b[0]`, `reduce(groups.etcd, #acc + #, "")`, `nope`, `1 +`, `$env.item.name`,
		`spec.etcd.enabled ? groups.etcd : []`, `item.name | upper()`, `a.b()`, `x?.y()`,
	} {
		f.Add(s)
	}
	e := New()
	f.Fuzz(func(t *testing.T, s string) {
		_, err := e.Eval(s, testVars())
		if err != nil {
			var ee *Error
			if !errors.As(err, &ee) {
				t.Fatalf("Eval(%q) error %T is not *Error: %v", s, err, err)
			}
			_ = err.Error()
		}
		_ = e.CheckExpr(s)
	})
}
