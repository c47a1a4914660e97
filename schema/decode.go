package schema

import (
	"errors"
	"fmt"
	"reflect"
	"strings"

	"github.com/mensylisir/kubexm/internal/suggest"
	"github.com/mensylisir/kubexm/internal/ytree"
	"github.com/mensylisir/kubexm/schema/internal/fieldpath"
)

// The YAML text is first turned into a positioned tree by internal/ytree
// (anchors, aliases and merge keys resolved), then decoded field by field
// into the Go types. Decoding ourselves instead of yaml.Unmarshal lets us
// report every unknown field and type mismatch at once, each with its
// position and path, and lets the KubeKey conversion rename keys without
// losing positions.

// maxNodes bounds how many values one file may expand to, so a small file of
// nested aliases ("billion laughs") is an error rather than an OOM.
const maxNodes = 200_000

// maxFileBytes bounds a cluster file before it is parsed: the parser takes
// about 150 bytes of memory per byte of text, so the bound is on the text
// rather than on what it turns out to hold. 4 MiB is room for MaxHosts
// hosts at 400 bytes each, variables and labels included.
const maxFileBytes = 4 << 20

// limitsHint names the limits a cluster file meets, so a refusal points
// at what the user actually has too much of.
func limitsHint() string {
	return fmt.Sprintf("a cluster file holds at most %d hosts (spec.hosts) in at most %d MiB and %d values; put large variables in group_vars/ and host_vars/ files", MaxHosts, maxFileBytes>>20, maxNodes)
}

// parseTree parses the cluster document of a file; the warnings name the
// documents of a multi-document KubeKey file that are not converted. A
// syntax error is returned as *Error.
func parseTree(file string, data []byte) (*ytree.Node, []Warning, error) {
	if len(data) > maxFileBytes {
		return nil, nil, &Error{Problems: []Problem{{Pos: Pos{File: file},
			Message: fmt.Sprintf("cluster file of %.1f MiB, more than the limit of %d MiB", float64(len(data))/(1<<20), maxFileBytes>>20),
			Hint:    limitsHint()}}}
	}
	docs, err := ytree.Parse(file, data, maxNodes)
	if err != nil {
		return nil, nil, treeError(err)
	}
	if len(docs) == 0 {
		return nil, nil, &Error{Problems: []Problem{{Pos: Pos{File: file}, Message: "empty file", Hint: "run `kubexm create config` for a sample"}}}
	}
	return pickDocument(file, docs)
}

// treeError turns a *ytree.Error into a cluster file problem.
func treeError(err error) error {
	var te *ytree.Error
	if !errors.As(err, &te) {
		return err
	}
	p := Problem{Pos: te.Pos, Message: te.Msg, Hint: te.Hint}
	switch te.Kind {
	case ytree.Limit:
		p.Hint = "a cluster file is a few levels deep and a few hundred lines long; this one was refused before parsing"
	case ytree.Syntax:
		p.Message = "YAML syntax: " + te.Msg
	case ytree.Size:
		p.Hint = limitsHint()
	}
	return &Error{Problems: []Problem{p}}
}

// isScalar says whether n is a scalar other than null.
func isScalar(n *ytree.Node) bool { return n != nil && n.Kind == ytree.Scalar && n.Scalar != nil }

// strNode is a string scalar the KubeKey conversion writes at pos.
func strNode(s string, pos Pos) *ytree.Node {
	return &ytree.Node{Pos: pos, TokPos: pos, Scalar: s, Text: s}
}

// decoder fills Go values from a tree, collecting problems instead of
// stopping at the first.
type decoder struct {
	ps *Problems
}

func (d *decoder) describe(n *ytree.Node) string {
	if s, ok := n.Str(); ok {
		return fmt.Sprintf("%q", s)
	}
	if n.Kind == ytree.Scalar && n.Scalar != nil {
		return n.Text
	}
	return n.KindName()
}

func (d *decoder) mismatch(path string, want string, n *ytree.Node) {
	hint := ""
	if want == "a string" && n.Kind == ytree.Map && len(n.Keys) == 1 {
		// `[https://host:2379]` reads as a one-key mapping in flow style.
		hint = `quote the value; a ":" makes it a mapping`
	}
	d.ps.Add(path, hint, "expected %s, got %s", want, d.describe(n))
}

func (d *decoder) decode(n *ytree.Node, v reflect.Value, path string) {
	if path != "" {
		d.ps.src.pos[path] = n.TokPos
	}
	switch v.Kind() {
	case reflect.Pointer:
		if n.IsNull() {
			return
		}
		if v.IsNil() {
			v.Set(reflect.New(v.Type().Elem()))
		}
		d.decode(n, v.Elem(), path)
	case reflect.Struct:
		if i := scalarField(v.Type()); i >= 0 && n.Kind == ytree.Scalar && !n.IsNull() {
			v.Field(i).SetString(n.Text)
			return
		}
		d.decodeStruct(n, v, path)
	case reflect.Slice:
		switch {
		case n.IsNull():
			return
		case n.Kind == ytree.Scalar:
			// A lone string where a list of strings is expected is the
			// common one-element shorthand (registryMirrors: "a.com").
			if v.Type().Elem().Kind() == reflect.String {
				v.Set(reflect.ValueOf([]string{n.Text}).Convert(v.Type()))
				return
			}
			d.mismatch(path, "a list", n)
		case n.Kind == ytree.List:
			s := reflect.MakeSlice(v.Type(), len(n.List), len(n.List))
			for i, it := range n.List {
				d.decode(it, s.Index(i), fieldpath.Index(path, i))
			}
			v.Set(s)
		default:
			d.mismatch(path, "a list", n)
		}
	case reflect.Map:
		if n.IsNull() {
			return
		}
		if n.Kind != ytree.Map {
			d.mismatch(path, "a mapping", n)
			return
		}
		m := reflect.MakeMapWithSize(v.Type(), len(n.Keys))
		for i, k := range n.Keys {
			p := fieldpath.Key(path, k.Text)
			d.ps.src.pos[p] = n.Vals[i].TokPos
			ev := reflect.New(v.Type().Elem()).Elem()
			d.decode(n.Vals[i], ev, p)
			m.SetMapIndex(reflect.ValueOf(k.Text).Convert(v.Type().Key()), ev)
		}
		v.Set(m)
	case reflect.String:
		switch {
		case n.IsNull():
		case n.Kind == ytree.Scalar:
			v.SetString(n.Text)
		default:
			d.mismatch(path, "a string", n)
		}
	case reflect.Int, reflect.Int64:
		if n.IsNull() {
			return
		}
		i, ok := n.Scalar.(int)
		if n.Kind != ytree.Scalar || !ok {
			d.mismatch(path, "an integer", n)
			return
		}
		if v.OverflowInt(int64(i)) {
			d.ps.Add(path, "", "integer %d out of range", i)
			return
		}
		v.SetInt(int64(i))
	case reflect.Bool:
		if n.IsNull() {
			return
		}
		b, ok := n.Scalar.(bool)
		if n.Kind != ytree.Scalar || !ok {
			d.mismatch(path, "true or false", n)
			return
		}
		v.SetBool(b)
	case reflect.Interface:
		if g := generic(n); g != nil {
			v.Set(reflect.ValueOf(g))
		}
		d.itemPositions(n, path)
	default:
		d.ps.Add(path, "", "internal: cannot decode into %s", v.Type())
	}
}

// scalarField is the index of the string field tagged scalar:"true", which
// a plain string in place of the struct sets (`addons: [metrics-server]`),
// or -1.
func scalarField(t reflect.Type) int {
	for i := range t.NumField() {
		if t.Field(i).Tag.Get("scalar") == "true" && t.Field(i).Type.Kind() == reflect.String {
			return i
		}
	}
	return -1
}

func (d *decoder) decodeStruct(n *ytree.Node, v reflect.Value, path string) {
	if n.IsNull() {
		return
	}
	if n.Kind != ytree.Map {
		d.mismatch(path, "a mapping", n)
		return
	}
	fields := YAMLFields(v.Type())
	for i, k := range n.Keys {
		idx, ok := fields[k.Text]
		if !ok {
			names := make([]string, 0, len(fields))
			for name := range fields {
				names = append(names, name)
			}
			p := fieldpath.Child(path, k.Text)
			d.ps.List = append(d.ps.List, Problem{Pos: k.Pos, Path: p, Message: "unknown field", Hint: suggest.DidYouMean(k.Text, names)})
			continue
		}
		d.decode(n.Vals[i], v.Field(idx), fieldpath.Child(path, k.Text))
	}
}

// generic converts a tree to plain values. Unlike ytree's Value, keys are
// the text as written (a key 1.0 stays "1.0"), as the typed decoder names
// fields.
// itemPositions records where the items of a free-form value are, so that
// a problem of one (a role variable's list item) is reported at its line.
func (d *decoder) itemPositions(n *ytree.Node, path string) {
	switch n.Kind {
	case ytree.List:
		for i, it := range n.List {
			p := fieldpath.Index(path, i)
			d.ps.src.pos[p] = it.TokPos
			d.itemPositions(it, p)
		}
	case ytree.Map:
		for i, k := range n.Keys {
			p := fieldpath.Key(path, k.Text)
			d.ps.src.pos[p] = n.Vals[i].TokPos
			d.itemPositions(n.Vals[i], p)
		}
	}
}

func generic(n *ytree.Node) any {
	switch n.Kind {
	case ytree.Map:
		m := make(map[string]any, len(n.Keys))
		for i, k := range n.Keys {
			m[k.Text] = generic(n.Vals[i])
		}
		return m
	case ytree.List:
		s := make([]any, len(n.List))
		for i, it := range n.List {
			s[i] = generic(it)
		}
		return s
	}
	return n.Scalar
}

// yamlFields maps a struct's yaml key names to field indexes.
func YAMLFields(t reflect.Type) map[string]int {
	out := make(map[string]int, t.NumField())
	for i := range t.NumField() {
		if name := YAMLName(t.Field(i)); name != "" {
			out[name] = i
		}
	}
	return out
}

func YAMLName(f reflect.StructField) string {
	if !f.IsExported() {
		return ""
	}
	tag := f.Tag.Get("yaml")
	name, _, _ := strings.Cut(tag, ",")
	if name == "-" {
		return ""
	}
	if name == "" {
		return strings.ToLower(f.Name[:1]) + f.Name[1:]
	}
	return name
}
