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

func TestClosed(t *testing.T) {
	e := New()
	for src, want := range map[string]bool{
		"plain":                                            true,
		"{{ .a }}-{{ .b.c | default \"x\" }}":              true,
		"{{ range .items }}{{ . }}{{ end }}":               true,
		"{{ with .m }}{{ .k }}{{ else }}{{ .d }}{{ end }}": true,
		"{{ $x := .a }}{{ $x }}{{ $.b }}":                  true,
		"{{ toYaml . }}":                                   false,
		"{{ index . \"a\" }}":                              false,
		"{{ range .items }}{{ toYaml $ }}{{ end }}":        false,
		"{{ with .m }}{{ . }}{{ else }}{{ . }}{{ end }}":   false,
		"{{ now }}":            false,
		"{{ randAlphaNum 8 }}": false,
		"{{ uuidv4 }}":         false,
		"{{ .a | bcrypt }}":    false,
		"{{ if .a }}{{ genPrivateKey \"rsa\" }}{{ end }}":            false,
		"{{ define \"t\" }}{{ .y }}{{ end }}{{ template \"t\" .z }}": true,
		"{{ define \"t\" }}{{ .y }}{{ end }}{{ template \"t\" . }}":  false,
		"{{ bad": false,
	} {
		if got := e.Closed(src); got != want {
			t.Errorf("Closed(%q) = %v, want %v", src, got, want)
		}
	}
}
