package eval

import (
	"strings"
	"testing"
	"text/template"
)

// The engine calls the evaluator for every task x host x item, always with
// source text it has seen before: these measure the cached paths.

func BenchmarkRenderCached(b *testing.B) {
	e := New()
	vars := testVars()
	const src = "{{ .spec.etcd.dataDir }}/member-{{ .inventory_hostname }}"
	if _, err := e.Render(src, vars); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := e.Render(src, vars); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkRenderTypedCached(b *testing.B) {
	e := New()
	vars := testVars()
	const src = "{{ .groups.etcd }}"
	b.ReportAllocs()
	for b.Loop() {
		if _, err := e.Render(src, vars); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkRenderPlain(b *testing.B) {
	e := New()
	vars := testVars()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := e.Render("/etc/kubernetes/manifests", vars); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkEvalCached(b *testing.B) {
	e := New()
	vars := testVars()
	const src = `inventory_hostname == "node1" and inventory_hostname in groups.etcd`
	b.ReportAllocs()
	for b.Loop() {
		if _, err := e.EvalBool(src, vars); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkEvalCachedParallel(b *testing.B) {
	e := New()
	const src = `inventory_hostname == "node1" and inventory_hostname in groups.etcd`
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		vars := testVars()
		for pb.Next() {
			if _, err := e.EvalBool(src, vars); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

func BenchmarkRenderUncached(b *testing.B) {
	e := New()
	vars := testVars()
	const src = "{{ .spec.etcd.dataDir }}/member-{{ .inventory_hostname }}"
	b.ReportAllocs()
	for b.Loop() {
		ct := e.parseTemplate(src)
		if ct.err != nil {
			b.Fatal(ct.err)
		}
		_ = vars
	}
}

func BenchmarkEvalUncached(b *testing.B) {
	e := New()
	const src = `inventory_hostname == "node1" and inventory_hostname in groups.etcd`
	b.ReportAllocs()
	for b.Loop() {
		if ce := e.compileExpr(src); ce.err != nil {
			b.Fatal(ce.err)
		}
	}
}

// BenchmarkRenderBaseline is plain text/template on the same template as
// BenchmarkRenderCached, without the strict lookups: the difference is what
// undefined-variable checking costs.
func BenchmarkRenderBaseline(b *testing.B) {
	t := template.Must(template.New("x").Parse("{{ .spec.etcd.dataDir }}/member-{{ .inventory_hostname }}"))
	vars := testVars()
	b.ReportAllocs()
	for b.Loop() {
		var sb strings.Builder
		if err := t.Execute(&sb, vars); err != nil {
			b.Fatal(err)
		}
	}
}
