// Package explain describes one field of cluster.yaml, as kubectl explain
// does for Kubernetes objects: its type, description, default, allowed
// values and whether kubexm installs each of them, and the fields under
// it. Everything comes from the schema package (the JSON Schema derived
// from its types, its defaults) and the support matrix, so it cannot
// drift from what config validate checks.
package explain

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/mensylisir/kubexm/schema/schemas"

	"github.com/mensylisir/kubexm/schema/matrix"

	"github.com/mensylisir/kubexm/schema/validate"

	"github.com/goccy/go-yaml"

	"github.com/mensylisir/kubexm/internal/suggest"
	"github.com/mensylisir/kubexm/schema"
)

// Field is one field of cluster.yaml.
type Field struct {
	// Path is the field as the support matrix writes it:
	// spec.hosts[*].address.
	Path        string   `json:"path"`
	Type        string   `json:"type"`
	Description string   `json:"description,omitempty"`
	Default     string   `json:"default,omitempty"`
	Allowed     []string `json:"allowed,omitempty"`
	// Support is each value's status in the matrix, when the field is one
	// of its choices.
	Support []Value `json:"support,omitempty"`
	Fields  []Child `json:"fields,omitempty"`
}

// Value is one value of a choice and whether it is installed.
type Value struct {
	Value  string `json:"value"`
	Status string `json:"status"`
	Reason string `json:"reason,omitempty"`
}

// Child is a field under the explained one.
type Child struct {
	Name        string `json:"name"`
	Type        string `json:"type"`
	Description string `json:"description,omitempty"`
}

// Explain describes the field at path: dots between fields, and
// optionally [*] or [N] after a list or map (spec.hosts.address and
// spec.hosts[0].address are the same field).
func Explain(path string, s *matrix.Support) (*Field, error) {
	root, err := jsonSchema()
	if err != nil {
		return nil, err
	}
	defaults, err := defaultsTree(s)
	if err != nil {
		return nil, err
	}
	node, canonical, err := walk(root, path)
	if err != nil {
		return nil, err
	}
	f := &Field{Path: canonical, Type: typeName(node)}
	f.Description, _ = node["description"].(string)
	for _, v := range asList(node["enum"]) {
		f.Allowed = append(f.Allowed, fmt.Sprint(v))
	}
	if v, ok := defaults.at(canonical); ok {
		f.Default = v
	}
	if ch := s.Choice(canonical); ch != nil {
		for _, v := range ch.Values {
			f.Support = append(f.Support, Value{Value: v.Value, Status: v.Status, Reason: v.Reason})
		}
	}
	props, _ := fieldsOf(node).(map[string]any)
	for _, name := range sortedKeys(props) {
		p, _ := props[name].(map[string]any)
		d, _ := p["description"].(string)
		f.Fields = append(f.Fields, Child{Name: name, Type: typeName(p), Description: d})
	}
	return f, nil
}

func jsonSchema() (map[string]any, error) {
	data, err := schemas.JSONSchema()
	if err != nil {
		return nil, fmt.Errorf("cluster.yaml's schema: %w", err)
	}
	var root map[string]any
	if err := json.Unmarshal(data, &root); err != nil {
		return nil, fmt.Errorf("cluster.yaml's schema: %w", err)
	}
	return root, nil
}

// walk follows path from the schema's root; canonical is the path with
// [*] after every list and map it goes into, as the support matrix writes
// fields.
func walk(root map[string]any, path string) (node map[string]any, canonical string, err error) {
	node = root
	var done []string
	segs := strings.Split(strings.Trim(path, "."), ".")
	for i := 0; i < len(segs); i++ {
		name, index, _ := strings.Cut(segs[i], "[")
		if name == "" {
			return nil, "", fmt.Errorf("%q is not a field path: write it as spec.etcd.type", path)
		}
		props, _ := node["properties"].(map[string]any)
		next, ok := props[name].(map[string]any)
		if !ok {
			return nil, "", noField(done, name, sortedKeys(props))
		}
		node, done = next, append(done, name)
		last := i == len(segs)-1
		if items, ok := next["items"].(map[string]any); ok && (index != "" || !last) {
			node, done[len(done)-1] = items, name+"[*]"
			continue
		}
		if values, ok := mapValues(next); ok && (index != "" || !last) {
			node, done[len(done)-1] = values, name+"[*]"
			if index == "" {
				i++ // the next segment is a key of the map: any key
			}
		}
	}
	return node, strings.Join(done, "."), nil
}

// noField says that the field at done has no field name, and which it has.
func noField(done []string, name string, names []string) error {
	where := "cluster.yaml"
	if len(done) > 0 {
		where = strings.Join(done, ".")
	}
	msg := fmt.Sprintf("%s has no field %q", where, name)
	if s := suggest.Closest(name, names); s != "" {
		msg += fmt.Sprintf("; did you mean %q?", s)
	}
	if len(names) > 0 {
		msg += "; its fields: " + strings.Join(names, ", ")
	}
	return errors.New(msg)
}

// mapValues is the schema of a map's values, when node is a map (an
// object without properties of its own).
func mapValues(node map[string]any) (map[string]any, bool) {
	if _, ok := node["properties"]; ok {
		return nil, false
	}
	v, ok := node["additionalProperties"].(map[string]any)
	return v, ok
}

// fieldsOf is the object whose properties are listed under a field: the
// field's own, or its elements' for a list.
func fieldsOf(node map[string]any) any {
	if items, ok := node["items"].(map[string]any); ok {
		return items["properties"]
	}
	return node["properties"]
}

// typeName is kubectl explain's type: string, integer, boolean, object,
// []object, map[string]string.
func typeName(node map[string]any) string {
	types := asList(node["type"])
	if len(types) == 0 {
		if t, ok := node["type"].(string); ok {
			types = []any{t}
		}
	}
	if len(types) == 0 {
		return "any"
	}
	t := fmt.Sprint(types[0])
	switch t {
	case "array":
		items, _ := node["items"].(map[string]any)
		t = "[]" + typeName(items)
		if slices.Contains(types, any("string")) {
			t += " (or one string)"
		}
	case "object":
		if v, ok := mapValues(node); ok {
			t = "map[string]" + typeName(v)
		} else if _, ok := node["properties"]; !ok {
			t = "map[string]any"
		}
		if slices.Contains(types, any("string")) {
			t += " (or a string)"
		}
	}
	return t
}

func asList(v any) []any {
	l, _ := v.([]any)
	return l
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// tree is a cluster file as nested maps and lists, to look a field up in.
type tree struct{ defaulted, written any }

// defaultsTree is schema.MinimalCluster as written and with every default
// filled in: a field's default is what the loader sets where the file
// says nothing.
func defaultsTree(s *matrix.Support) (tree, error) {
	c, _, err := validate.ParseWith("defaults.yaml", []byte(schema.MinimalCluster), s)
	if err != nil {
		return tree{}, fmt.Errorf("the defaults: %w", err)
	}
	data, err := schema.Marshal(c)
	if err != nil {
		return tree{}, err
	}
	var t tree
	if err := yaml.Unmarshal(data, &t.defaulted); err != nil {
		return tree{}, fmt.Errorf("the defaults: %w", err)
	}
	if err := yaml.Unmarshal([]byte(schema.MinimalCluster), &t.written); err != nil {
		return tree{}, fmt.Errorf("the defaults: %w", err)
	}
	return t, nil
}

// at is the default of the field at the canonical path, when the loader
// sets one: a value the minimal file does not write. A list's elements
// are looked up in its first one.
func (t tree) at(path string) (string, bool) {
	d, dok := lookup(t.defaulted, path)
	if !dok {
		return "", false
	}
	if _, written := lookup(t.written, path); written {
		return "", false
	}
	switch d.(type) {
	case map[string]any:
		return "", false // an object's defaults are its fields'
	case []any:
		data, err := json.Marshal(d)
		if err != nil {
			return "", false
		}
		return string(data), true
	}
	return fmt.Sprint(d), true
}

func lookup(v any, path string) (any, bool) {
	for _, seg := range strings.Split(path, ".") {
		name, list := strings.CutSuffix(seg, "[*]")
		m, ok := v.(map[string]any)
		if !ok {
			return nil, false
		}
		if v, ok = m[name]; !ok {
			return nil, false
		}
		if list {
			switch x := v.(type) {
			case []any:
				if len(x) == 0 {
					return nil, false
				}
				v = x[0]
			case map[string]any:
				keys := sortedKeys(x)
				if len(keys) == 0 {
					return nil, false
				}
				v = x[keys[0]]
			default:
				return nil, false
			}
		}
	}
	return v, true
}
