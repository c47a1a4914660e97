package schema

import (
	"errors"
	"fmt"
	"math"
	"reflect"
	"strings"

	"github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/parser"

	"github.com/mensylisir/kubexm/internal/yamlguard"
)

// The YAML text is first turned into a small positioned tree (anchors,
// aliases and merge keys resolved), then decoded field by field into the Go
// types. Decoding ourselves instead of yaml.Unmarshal lets us report every
// unknown field and type mismatch at once, each with its position and path,
// and lets the KubeKey conversion rename keys without losing positions.

type nodeKind int

const (
	kindNull nodeKind = iota
	kindScalar
	kindMap
	kindSeq
)

type ynode struct {
	kind nodeKind
	pos  Pos
	// Scalars: tag is "str", "int", "float" or "bool"; text is the value as
	// written (for strings, the unquoted value).
	tag   string
	text  string
	ival  int64
	fval  float64
	bval  bool
	keys  []yentry
	items []*ynode
}

type yentry struct {
	key    string
	keyPos Pos
	val    *ynode
}

func (n *ynode) get(k string) (*yentry, int) {
	if n == nil || n.kind != kindMap {
		return nil, -1
	}
	for i := range n.keys {
		if n.keys[i].key == k {
			return &n.keys[i], i
		}
	}
	return nil, -1
}

// maxNodes bounds how many values one file may decode to, so a small file of
// nested aliases ("billion laughs") is an error rather than an OOM.
const maxNodes = 200_000

type treeBuilder struct {
	file    string
	anchors map[string]*ynode
	depth   int
}

// parseTree parses data into a tree. A syntax error is returned as *Error.
// parseTree parses the cluster document of a file; the warnings name the
// documents of a multi-document KubeKey file that are not converted.
func parseTree(file string, data []byte) (*ynode, []Warning, error) {
	if err := yamlguard.Check(data, yamlguard.Default()); err != nil {
		var ge *yamlguard.Error
		errors.As(err, &ge)
		return nil, nil, &Error{Problems: []Problem{{Pos: Pos{File: file, Line: ge.Line, Col: ge.Col}, Message: ge.Msg,
			Hint: "a cluster file is a few levels deep and a few hundred lines long; this one was refused before parsing"}}}
	}
	f, err := parser.ParseBytes(data, 0)
	if err != nil {
		return nil, nil, syntaxProblem(file, data, err)
	}
	var docs []*ynode
	for _, d := range f.Docs {
		if d.Body == nil {
			continue
		}
		b := &treeBuilder{file: file, anchors: map[string]*ynode{}}
		n, err := b.build(d.Body)
		if err != nil {
			return nil, nil, err
		}
		docs = append(docs, n)
	}
	if len(docs) == 0 {
		return nil, nil, &Error{Problems: []Problem{{Pos: Pos{File: file}, Message: "empty file", Hint: "run `kubexm create config` for a sample"}}}
	}
	return pickDocument(file, docs)
}

func syntaxProblem(file string, data []byte, err error) error {
	var se *yaml.SyntaxError
	if errors.As(err, &se) {
		p := Problem{Pos: Pos{File: file}, Message: "YAML syntax: " + se.GetMessage()}
		if tk := se.GetToken(); tk != nil && tk.Position != nil {
			p.Pos.Line, p.Pos.Col = tk.Position.Line, tk.Position.Column
			p.Hint = syntaxHint(data, p.Pos.Line)
		}
		return &Error{Problems: []Problem{p}}
	}
	return &Error{Problems: []Problem{{Pos: Pos{File: file}, Message: "YAML syntax: " + err.Error()}}}
}

// syntaxHint recognises typos the parser's message does not explain.
func syntaxHint(data []byte, line int) string {
	lines := strings.Split(string(data), "\n")
	if line < 1 || line > len(lines) {
		return ""
	}
	l := lines[line-1]
	switch {
	case strings.ContainsRune(l, '：'):
		return "the full-width colon '：' is not a YAML separator; type ':'"
	case strings.HasPrefix(strings.TrimLeft(l, " "), "\t"):
		return "YAML indents with spaces, not tabs"
	}
	return ""
}

func (b *treeBuilder) posOf(n ast.Node) Pos {
	p := Pos{File: b.file}
	if tk := n.GetToken(); tk != nil && tk.Position != nil {
		p.Line, p.Col = tk.Position.Line, tk.Position.Column
	}
	return p
}

func (b *treeBuilder) fail(n ast.Node, format string, args ...any) error {
	return &Error{Problems: []Problem{{Pos: b.posOf(n), Message: fmt.Sprintf(format, args...)}}}
}

func (b *treeBuilder) build(n ast.Node) (*ynode, error) {
	if n == nil {
		return &ynode{kind: kindNull, pos: Pos{File: b.file}}, nil
	}
	b.depth++
	defer func() { b.depth-- }()
	if b.depth > 200 {
		return nil, b.fail(n, "YAML nested too deeply")
	}
	pos := b.posOf(n)
	switch n := n.(type) {
	case *ast.NullNode:
		return &ynode{kind: kindNull, pos: pos}, nil
	case *ast.StringNode:
		return &ynode{kind: kindScalar, pos: pos, tag: "str", text: n.Value}, nil
	case *ast.LiteralNode:
		return &ynode{kind: kindScalar, pos: pos, tag: "str", text: n.Value.Value}, nil
	case *ast.IntegerNode:
		y := &ynode{kind: kindScalar, pos: pos, tag: "int", text: n.Token.Value}
		switch v := n.Value.(type) {
		case int64:
			y.ival = v
		case uint64:
			if v > math.MaxInt64 {
				y.tag = "float"
				y.fval = float64(v)
			} else {
				y.ival = int64(v)
			}
		}
		return y, nil
	case *ast.FloatNode:
		return &ynode{kind: kindScalar, pos: pos, tag: "float", text: n.Token.Value, fval: n.Value}, nil
	case *ast.InfinityNode:
		return &ynode{kind: kindScalar, pos: pos, tag: "float", text: n.Token.Value, fval: n.Value}, nil
	case *ast.NanNode:
		return &ynode{kind: kindScalar, pos: pos, tag: "float", text: n.GetToken().Value, fval: math.NaN()}, nil
	case *ast.BoolNode:
		return &ynode{kind: kindScalar, pos: pos, tag: "bool", text: n.GetToken().Value, bval: n.Value}, nil
	case *ast.TagNode:
		v, err := b.build(n.Value)
		if err != nil {
			return nil, err
		}
		if n.Start != nil && n.Start.Value == "!!str" && v.kind == kindScalar {
			c := *v
			c.tag = "str"
			return &c, nil
		}
		return v, nil
	case *ast.AnchorNode:
		v, err := b.build(n.Value)
		if err != nil {
			return nil, err
		}
		if n.Name != nil {
			b.anchors[n.Name.GetToken().Value] = v
		}
		return v, nil
	case *ast.AliasNode:
		name := ""
		if n.Value != nil {
			name = n.Value.GetToken().Value
		}
		v, ok := b.anchors[name]
		if !ok {
			return nil, b.fail(n, "unknown alias *%s", name)
		}
		return v, nil
	case *ast.MappingNode:
		return b.buildMap(pos, n.Values)
	case *ast.MappingValueNode:
		return b.buildMap(pos, []*ast.MappingValueNode{n})
	case *ast.SequenceNode:
		y := &ynode{kind: kindSeq, pos: pos}
		for _, it := range n.Values {
			v, err := b.build(it)
			if err != nil {
				return nil, err
			}
			y.items = append(y.items, v)
		}
		return y, nil
	case *ast.DocumentNode:
		return b.build(n.Body)
	}
	return nil, b.fail(n, "unsupported YAML construct %s", n.Type())
}

func (b *treeBuilder) buildMap(pos Pos, values []*ast.MappingValueNode) (*ynode, error) {
	y := &ynode{kind: kindMap, pos: pos}
	var merges []*ynode
	for _, mv := range values {
		if mv.Key == nil {
			return nil, b.fail(mv, "mapping entry without a key")
		}
		if mv.Key.IsMergeKey() {
			v, err := b.build(mv.Value)
			if err != nil {
				return nil, err
			}
			merges = append(merges, v)
			continue
		}
		var keyNode ast.Node = mv.Key
		if mk, ok := keyNode.(*ast.MappingKeyNode); ok {
			keyNode = mk.Value
		}
		kv, err := b.build(keyNode)
		if err != nil {
			return nil, err
		}
		if kv.kind != kindScalar && kv.kind != kindNull {
			return nil, b.fail(keyNode, "mapping keys must be plain values")
		}
		v, err := b.build(mv.Value)
		if err != nil {
			return nil, err
		}
		y.keys = append(y.keys, yentry{key: kv.text, keyPos: kv.pos, val: v})
	}
	// Merged keys never override explicit ones, as YAML 1.1 specifies.
	for _, m := range merges {
		srcs := []*ynode{m}
		if m.kind == kindSeq {
			srcs = m.items
		}
		for _, s := range srcs {
			if s.kind != kindMap {
				return nil, &Error{Problems: []Problem{{Pos: s.pos, Message: "<< merges a mapping or a list of mappings"}}}
			}
			for _, e := range s.keys {
				if old, _ := y.get(e.key); old == nil {
					y.keys = append(y.keys, e)
				}
			}
		}
	}
	return y, nil
}

// decoder fills Go values from a tree, collecting problems instead of
// stopping at the first.
type decoder struct {
	ps    *problems
	nodes int
}

func (d *decoder) describe(n *ynode) string {
	switch n.kind {
	case kindMap:
		return "a mapping"
	case kindSeq:
		return "a list"
	case kindNull:
		return "null"
	}
	if n.tag == "str" {
		return fmt.Sprintf("%q", n.text)
	}
	return n.text
}

func (d *decoder) mismatch(path string, want string, n *ynode) {
	hint := ""
	if want == "a string" && n.kind == kindMap && len(n.keys) == 1 {
		// `[https://host:2379]` reads as a one-key mapping in flow style.
		hint = `quote the value; a ":" makes it a mapping`
	}
	d.ps.add(path, hint, "expected %s, got %s", want, d.describe(n))
}

func (d *decoder) decode(n *ynode, v reflect.Value, path string) {
	if !d.spend(path) {
		return
	}
	if path != "" {
		d.ps.src.pos[path] = n.pos
	}
	switch v.Kind() {
	case reflect.Pointer:
		if n.kind == kindNull {
			return
		}
		if v.IsNil() {
			v.Set(reflect.New(v.Type().Elem()))
		}
		d.decode(n, v.Elem(), path)
	case reflect.Struct:
		d.decodeStruct(n, v, path)
	case reflect.Slice:
		switch n.kind {
		case kindNull:
			return
		case kindScalar:
			// A lone string where a list of strings is expected is the
			// common one-element shorthand (registryMirrors: "a.com").
			if v.Type().Elem().Kind() == reflect.String {
				v.Set(reflect.ValueOf([]string{n.text}).Convert(v.Type()))
				return
			}
			d.mismatch(path, "a list", n)
		case kindSeq:
			s := reflect.MakeSlice(v.Type(), len(n.items), len(n.items))
			for i, it := range n.items {
				d.decode(it, s.Index(i), index(path, i))
			}
			v.Set(s)
		default:
			d.mismatch(path, "a list", n)
		}
	case reflect.Map:
		if n.kind == kindNull {
			return
		}
		if n.kind != kindMap {
			d.mismatch(path, "a mapping", n)
			return
		}
		m := reflect.MakeMapWithSize(v.Type(), len(n.keys))
		for _, e := range n.keys {
			p := key(path, e.key)
			d.ps.src.pos[p] = e.val.pos
			ev := reflect.New(v.Type().Elem()).Elem()
			d.decode(e.val, ev, p)
			m.SetMapIndex(reflect.ValueOf(e.key).Convert(v.Type().Key()), ev)
		}
		v.Set(m)
	case reflect.String:
		switch n.kind {
		case kindScalar:
			v.SetString(n.text)
		case kindNull:
		default:
			d.mismatch(path, "a string", n)
		}
	case reflect.Int, reflect.Int64:
		if n.kind == kindNull {
			return
		}
		if n.kind != kindScalar || n.tag != "int" {
			d.mismatch(path, "an integer", n)
			return
		}
		if v.OverflowInt(n.ival) {
			d.ps.add(path, "", "integer %d out of range", n.ival)
			return
		}
		v.SetInt(n.ival)
	case reflect.Bool:
		if n.kind == kindNull {
			return
		}
		if n.kind != kindScalar || n.tag != "bool" {
			d.mismatch(path, "true or false", n)
			return
		}
		v.SetBool(n.bval)
	case reflect.Interface:
		if g := d.generic(n, path); g != nil {
			v.Set(reflect.ValueOf(g))
		}
	default:
		d.ps.add(path, "", "internal: cannot decode into %s", v.Type())
	}
}

func (d *decoder) decodeStruct(n *ynode, v reflect.Value, path string) {
	if n.kind == kindNull {
		return
	}
	if n.kind != kindMap {
		d.mismatch(path, "a mapping", n)
		return
	}
	fields := yamlFields(v.Type())
	for _, e := range n.keys {
		idx, ok := fields[e.key]
		if !ok {
			names := make([]string, 0, len(fields))
			for name := range fields {
				names = append(names, name)
			}
			p := child(path, e.key)
			d.ps.list = append(d.ps.list, Problem{Pos: e.keyPos, Path: p, Message: "unknown field", Hint: didYouMean(e.key, names)})
			continue
		}
		d.decode(e.val, v.Field(idx), child(path, e.key))
	}
}

// spend counts one decoded value against maxNodes, reporting the first
// value over the limit.
func (d *decoder) spend(path string) bool {
	d.nodes++
	if d.nodes == maxNodes+1 {
		d.ps.add(path, "", "document expands to more than %d values (nested aliases?)", maxNodes)
	}
	return d.nodes <= maxNodes
}

func (d *decoder) generic(n *ynode, path string) any {
	if !d.spend(path) {
		return nil
	}
	switch n.kind {
	case kindMap:
		m := make(map[string]any, len(n.keys))
		for _, e := range n.keys {
			m[e.key] = d.generic(e.val, path)
		}
		return m
	case kindSeq:
		s := make([]any, len(n.items))
		for i, it := range n.items {
			s[i] = d.generic(it, path)
		}
		return s
	case kindScalar:
		switch n.tag {
		case "int":
			return int(n.ival)
		case "float":
			return n.fval
		case "bool":
			return n.bval
		}
		return n.text
	}
	return nil
}

// yamlFields maps a struct's yaml key names to field indexes.
func yamlFields(t reflect.Type) map[string]int {
	out := make(map[string]int, t.NumField())
	for i := range t.NumField() {
		if name := yamlName(t.Field(i)); name != "" {
			out[name] = i
		}
	}
	return out
}

func yamlName(f reflect.StructField) string {
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
