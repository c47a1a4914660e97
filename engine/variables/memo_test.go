package variables

import (
	"strings"
	"testing"

	"github.com/mensylisir/kubexm/engine/playbook"
)

func TestMemoReusesOnlyWhileInputsAreTheSame(t *testing.T) {
	closed := func(s string) bool { return !strings.Contains(s, "now") }
	m := NewMemo(closed)
	d := &playbook.VarDef{Name: "x", Val: "{{ .a }}", Template: true, Refs: []string{"a", "b"}}
	renders := 0
	render := func(v map[string]any) func() (any, error) {
		return func() (any, error) { renders++; return v["a"], nil }
	}
	list := []any{"p"}
	mp := map[string]any{"k": "v"}
	steps := []struct {
		name   string
		host   string
		v      map[string]any
		render bool
	}{
		{"first", "h1", map[string]any{"a": "1", "b": list}, true},
		{"same scalars, same list", "h1", map[string]any{"a": "1", "b": list}, false},
		{"another host", "h2", map[string]any{"a": "1", "b": list}, true},
		{"a changed", "h1", map[string]any{"a": "2", "b": list}, true},
		{"an equal but new list", "h1", map[string]any{"a": "2", "b": []any{"p"}}, true},
		{"b missing", "h1", map[string]any{"a": "2"}, true},
		{"b still missing", "h1", map[string]any{"a": "2"}, false},
		{"b a map", "h1", map[string]any{"a": "2", "b": mp}, true},
		{"the same map", "h1", map[string]any{"a": "2", "b": mp}, false},
		{"a nil", "h1", map[string]any{"a": nil, "b": mp}, true},
		{"a an int", "h1", map[string]any{"a": 2, "b": mp}, true},
		{"a the same int", "h1", map[string]any{"a": 2, "b": mp}, false},
	}
	for _, s := range steps {
		before := renders
		got, err := m.Render(s.host, d, s.v, render(s.v))
		if err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		if rendered := renders > before; rendered != s.render {
			t.Errorf("%s: rendered=%v, want %v", s.name, rendered, s.render)
		}
		if !sameValue(got, s.v["a"]) {
			t.Errorf("%s: got %v, want %v", s.name, got, s.v["a"])
		}
	}

	volatile := &playbook.VarDef{Name: "t", Val: map[string]any{"k": []any{"{{ now }}"}}, Template: true}
	for range 2 {
		before := renders
		if _, err := m.Render("h1", volatile, map[string]any{}, render(map[string]any{})); err != nil {
			t.Fatal(err)
		}
		if renders == before {
			t.Error("a template calling a volatile function was reused")
		}
	}
}
