package schema

import (
	"reflect"
	"strings"
)

// LeafFields returns the path of every leaf field of cluster.yaml, in the
// support matrix's form (spec.hosts[*].arch: [*] for every element of a
// list or map of blocks), in declaration order. A leaf is a field that is
// not a block of fields: a scalar, a list of scalars or a free mapping
// (featureGates, vars, kubeProxyConfiguration).
func LeafFields() []string {
	var out []string
	var walk func(t reflect.Type, path string)
	walk = func(t reflect.Type, path string) {
		for t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		switch {
		case t.Kind() == reflect.Struct:
			for i := range t.NumField() {
				f := t.Field(i)
				name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
				if !f.IsExported() || name == "" || name == "-" {
					continue
				}
				p := name
				if path != "" {
					p = path + "." + name
				}
				walk(f.Type, p)
			}
			return
		case (t.Kind() == reflect.Slice || t.Kind() == reflect.Map) && blockOf(t.Elem()):
			walk(t.Elem(), path+"[*]")
			return
		}
		out = append(out, path)
	}
	walk(reflect.TypeFor[Cluster](), "")
	return out
}

func blockOf(t reflect.Type) bool {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t.Kind() == reflect.Struct
}
