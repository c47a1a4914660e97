// Package jsonschema derives a JSON Schema (draft 2020-12) from Go types
// with yaml, doc and enum struct tags, so the schema editors use can never
// drift from the types the loader decodes into.
package jsonschema

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
)

// Describe gives a field's description from its path (spec.hosts[*].arch:
// [*] for the elements of a list or map) and its doc tag.
type Describe func(path, doc string) string

// Generate returns the indented JSON Schema of t, which must be a struct.
// consts pins top-level string fields to one value (apiVersion, kind);
// describe (nil: the doc tag) gives each field's description.
func Generate(t reflect.Type, id, title string, consts map[string]string, describe Describe) ([]byte, error) {
	if t.Kind() != reflect.Struct {
		return nil, fmt.Errorf("jsonschema: %s is not a struct", t)
	}
	if describe == nil {
		describe = func(_, doc string) string { return doc }
	}
	root, err := schemaOf(t, "", describe)
	if err != nil {
		return nil, err
	}
	root["$schema"] = "https://json-schema.org/draft/2020-12/schema"
	root["$id"] = id
	root["title"] = title
	props := root["properties"].(map[string]any)
	for name, v := range consts {
		p, ok := props[name].(map[string]any)
		if !ok {
			return nil, fmt.Errorf("jsonschema: no top-level field %q", name)
		}
		p["const"] = v
	}
	out, err := json.MarshalIndent(root, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("jsonschema: %w", err)
	}
	return append(out, '\n'), nil
}

// Structural returns the OpenAPI v3 schema of t as a CustomResourceDefinition
// needs it (Kubernetes' "structural schema"): one type per node, no
// additionalProperties: false (the API server prunes unknown fields), values
// of any type kept with x-kubernetes-preserve-unknown-fields. Lists and
// objects the loader also takes as a lone string are lists and objects here:
// a resource holds the decoded, normalised form.
func Structural(t reflect.Type, describe Describe) (map[string]any, error) {
	if t.Kind() != reflect.Struct {
		return nil, fmt.Errorf("jsonschema: %s is not a struct", t)
	}
	if describe == nil {
		describe = func(_, doc string) string { return doc }
	}
	g := generator{describe: describe, structural: true}
	return g.schemaOf(t, "")
}

// generator holds what every node of one schema is generated with.
type generator struct {
	describe   Describe
	structural bool
}

func schemaOf(t reflect.Type, path string, describe Describe) (map[string]any, error) {
	g := generator{describe: describe}
	return g.schemaOf(t, path)
}

func (g generator) schemaOf(t reflect.Type, path string) (map[string]any, error) {
	describe := g.describe
	switch t.Kind() {
	case reflect.Pointer:
		return g.schemaOf(t.Elem(), path)
	case reflect.String:
		return map[string]any{"type": "string"}, nil
	case reflect.Bool:
		return map[string]any{"type": "boolean"}, nil
	case reflect.Int, reflect.Int64:
		return map[string]any{"type": "integer"}, nil
	case reflect.Interface:
		if g.structural {
			return map[string]any{"x-kubernetes-preserve-unknown-fields": true}, nil
		}
		return map[string]any{}, nil
	case reflect.Slice:
		items, err := g.schemaOf(t.Elem(), path+"[*]")
		if err != nil {
			return nil, err
		}
		s := map[string]any{"type": "array", "items": items}
		if t.Elem().Kind() == reflect.String && !g.structural {
			// The loader accepts a lone string as a one-element list.
			s["type"] = []string{"array", "string"}
		}
		return s, nil
	case reflect.Map:
		if t.Key().Kind() != reflect.String {
			return nil, fmt.Errorf("jsonschema: map key %s is not a string", t.Key())
		}
		s := map[string]any{"type": "object"}
		if t.Elem().Kind() == reflect.Interface && g.structural {
			s["x-kubernetes-preserve-unknown-fields"] = true
		}
		if t.Elem().Kind() != reflect.Interface {
			v, err := g.schemaOf(t.Elem(), path+"[*]")
			if err != nil {
				return nil, err
			}
			s["additionalProperties"] = v
		}
		return s, nil
	case reflect.Struct:
		props := map[string]any{}
		for i := range t.NumField() {
			f := t.Field(i)
			if !f.IsExported() {
				continue
			}
			name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
			if name == "" || name == "-" {
				continue
			}
			fp := name
			if path != "" {
				fp = path + "." + name
			}
			p, err := g.schemaOf(f.Type, fp)
			if err != nil {
				return nil, fmt.Errorf("%s.%s: %w", t.Name(), f.Name, err)
			}
			if doc := describe(fp, f.Tag.Get("doc")); doc != "" {
				p["description"] = doc
			}
			if enum, ok := f.Tag.Lookup("enum"); ok {
				p["enum"] = strings.Split(enum, ",")
			}
			props[name] = p
		}
		s := map[string]any{"type": "object", "properties": props}
		if !g.structural {
			s["additionalProperties"] = false
		}
		for i := range t.NumField() {
			if t.Field(i).Tag.Get("scalar") == "true" && !g.structural {
				// The loader takes a plain string for that field alone.
				s["type"] = []string{"object", "string"}
			}
		}
		return s, nil
	}
	return nil, fmt.Errorf("jsonschema: unsupported kind %s", t.Kind())
}
