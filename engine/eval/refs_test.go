package eval

import (
	"slices"
	"testing"
)

func TestRefs(t *testing.T) {
	e := New()
	for src, want := range map[string][]string{
		"plain":               nil,
		"{{ .a }}-{{ .b.c }}": {"a", "b"},
		"{{ .spec.network }}": {"spec"},
		"{{ range .items }}{{ .name }}{{ $.x }}{{ end }}":  {"items", "x"},
		"{{ with .m }}{{ .k }}{{ else }}{{ .d }}{{ end }}": {"m", "d"},
		"{{ if .a }}{{ .b | default .c }}{{ end }}":        {"a", "b", "c"},
		"{{ (index .hosts 0).name }}":                      {"hosts"},
		"{{ bad":                                           nil,
	} {
		if got := e.Refs(src); !slices.Equal(got, want) {
			t.Errorf("Refs(%q) = %v, want %v", src, got, want)
		}
	}
}
