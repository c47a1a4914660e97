// Package ytree parses YAML into a tree that remembers where each value was
// written. Both the cluster.yaml decoder (schema) and the playbook loader
// (engine) work on this tree rather than on decoded values, so every error
// they report can name file:line:col. Anchors, aliases and merge keys are
// resolved here; the text is bounded by yamlguard before the parser sees it
// and the tree by a node count after alias expansion.
package ytree

import (
	"errors"
	"fmt"
	"math"
	"strings"

	"github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/parser"

	"github.com/mensylisir/kubexm/internal/yamlguard"
)

// Pos is a place in a file. Line and Col are 1-based; zero means unknown.
type Pos struct {
	File string
	Line int
	Col  int
}

func (p Pos) String() string {
	switch {
	case p.Line == 0:
		return p.File
	case p.Col == 0:
		return fmt.Sprintf("%s:%d", p.File, p.Line)
	default:
		return fmt.Sprintf("%s:%d:%d", p.File, p.Line, p.Col)
	}
}

// Kind is the shape of a node. A null is a Scalar whose Scalar is nil.
type Kind int

const (
	Scalar Kind = iota
	Map
	List
)

// Node is a YAML value and where it was written.
type Node struct {
	// Pos is where the value starts: for a mapping, its first key.
	Pos Pos
	// TokPos is where the parser's token for the value is: for a block
	// mapping the ':' of its first entry, for a flow mapping its '{', for
	// anything else Pos. The cluster decoder reports mappings there.
	TokPos Pos
	Kind   Kind
	// Keys and Vals hold a mapping in file order; List holds a sequence.
	Keys []*Node
	Vals []*Node
	List []*Node
	// Scalar is the decoded scalar: string, int, float64, bool or nil.
	// Text is the scalar as written (for strings, the unquoted value; for
	// null, ""), which is what a key or a !!str value means.
	Scalar any
	Text   string
	Merged bool // a key copied in by a YAML merge (<<)
}

// IsNull says whether n is absent or a null.
func (n *Node) IsNull() bool { return n == nil || (n.Kind == Scalar && n.Scalar == nil) }

// KindName describes n for an error message.
func (n *Node) KindName() string {
	switch n.Kind {
	case Map:
		return "a mapping"
	case List:
		return "a list"
	}
	switch n.Scalar.(type) {
	case nil:
		return "null"
	case string:
		return "a string"
	case bool:
		return "a boolean"
	case int, float64:
		return "a number"
	}
	return "a scalar"
}

// Str returns the scalar as a string and whether it was one.
func (n *Node) Str() (string, bool) {
	if n == nil || n.Kind != Scalar {
		return "", false
	}
	s, ok := n.Scalar.(string)
	return s, ok
}

// KeyString is a mapping key as the loader names it: a string as is, any
// other scalar printed.
func (n *Node) KeyString() string {
	if s, ok := n.Str(); ok {
		return s
	}
	return fmt.Sprint(n.Scalar)
}

// Index returns the position of key in a mapping, or -1.
func (n *Node) Index(key string) int {
	if n == nil || n.Kind != Map {
		return -1
	}
	for i, k := range n.Keys {
		if k.KeyString() == key {
			return i
		}
	}
	return -1
}

// Get returns the value of key in a mapping, or nil.
func (n *Node) Get(key string) *Node {
	if i := n.Index(key); i >= 0 {
		return n.Vals[i]
	}
	return nil
}

// Value converts n to plain Go values: map[string]any, []any and scalars.
func (n *Node) Value() any {
	if n == nil {
		return nil
	}
	switch n.Kind {
	case Map:
		m := make(map[string]any, len(n.Keys))
		for i, k := range n.Keys {
			m[k.KeyString()] = n.Vals[i].Value()
		}
		return m
	case List:
		l := make([]any, len(n.List))
		for i, e := range n.List {
			l[i] = e.Value()
		}
		return l
	}
	return n.Scalar
}

// ErrorKind says which stage refused a text.
type ErrorKind int

const (
	// Limit: yamlguard refused the text before parsing.
	Limit ErrorKind = iota
	// Syntax: the YAML parser refused it.
	Syntax
	// Structure: it parsed, but the tree is unusable (unknown alias, bad
	// merge, ...).
	Structure
	// Size: it parsed, but expands to more values than the caller allows,
	// through aliases or by being written out that long.
	Size
)

// Error is a text that could not be made into a tree.
type Error struct {
	Kind ErrorKind
	Pos  Pos
	Msg  string
	Hint string // set for syntax errors whose cause the parser does not explain
}

func (e *Error) Error() string {
	if e.Kind == Syntax {
		return e.Pos.String() + ": YAML syntax error: " + e.Msg
	}
	return e.Pos.String() + ": " + e.Msg
}

// MaxDepth bounds nesting so hostile input cannot exhaust the stack; the
// yamlguard scan refuses far less before the parser runs.
const MaxDepth = 200

// Parse parses every non-empty document of a file. maxNodes bounds the
// values all documents expand to, aliases counted in full, so a "billion
// laughs" file fails instead of eating the memory. Errors are *Error.
func Parse(file string, data []byte, maxNodes int) ([]*Node, error) {
	if err := yamlguard.Check(data, yamlguard.Default()); err != nil {
		e := &Error{Kind: Limit, Pos: Pos{File: file}, Msg: err.Error()}
		var ge *yamlguard.Error
		if errors.As(err, &ge) {
			e.Pos.Line, e.Pos.Col, e.Msg = ge.Line, ge.Col, ge.Msg
		}
		return nil, e
	}
	f, err := parser.ParseBytes(data, 0)
	if err != nil {
		return nil, syntaxError(file, data, err)
	}
	b := builder{file: file, sizes: map[*Node]int{}, limit: maxNodes}
	var docs []*Node
	for _, d := range f.Docs {
		if d == nil || d.Body == nil {
			continue
		}
		// Anchors are local to their document.
		b.anchors = map[string]*Node{}
		n, err := b.build(d.Body, 0)
		if err != nil {
			return nil, err
		}
		docs = append(docs, n)
	}
	return docs, nil
}

func syntaxError(file string, data []byte, err error) error {
	e := &Error{Kind: Syntax, Pos: Pos{File: file}}
	var se *yaml.SyntaxError
	if errors.As(err, &se) {
		e.Msg = se.GetMessage()
		if tk := se.GetToken(); tk != nil && tk.Position != nil {
			e.Pos.Line, e.Pos.Col = tk.Position.Line, tk.Position.Column
			e.Hint = syntaxHint(data, e.Pos.Line)
		}
		return e
	}
	e.Msg = strings.TrimSpace(err.Error())
	return e
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

type builder struct {
	file    string
	anchors map[string]*Node
	sizes   map[*Node]int // node counts of anchored values
	total   int           // nodes produced, aliases counted in full
	limit   int           // bound on total
	aliased int           // nodes of total that aliases contributed
}

func (b *builder) fail(at Pos, format string, args ...any) error {
	return &Error{Kind: Structure, Pos: at, Msg: fmt.Sprintf(format, args...)}
}

func (b *builder) grow(n int, at Pos) error {
	b.total += n
	if b.total <= b.limit {
		return nil
	}
	// Blaming aliases in a file that is merely long sends the user hunting
	// for anchors that are not there.
	if b.aliased > b.total-b.aliased {
		return &Error{Kind: Size, Pos: at, Msg: fmt.Sprintf("YAML document too large after expanding aliases (over %d values; nested aliases?)", b.limit)}
	}
	return &Error{Kind: Size, Pos: at, Msg: fmt.Sprintf("YAML document of more than %d values", b.limit)}
}

func (b *builder) pos(n ast.Node) Pos {
	p := Pos{File: b.file}
	if tk := n.GetToken(); tk != nil && tk.Position != nil {
		p.Line, p.Col = tk.Position.Line, tk.Position.Column
	}
	return p
}

func (b *builder) scalar(n ast.Node, v any, text string) *Node {
	p := b.pos(n)
	return &Node{Pos: p, TokPos: p, Scalar: v, Text: text}
}

func (b *builder) build(n ast.Node, depth int) (*Node, error) {
	if n == nil {
		return &Node{Pos: Pos{File: b.file}, TokPos: Pos{File: b.file}}, nil
	}
	if depth > MaxDepth {
		return nil, b.fail(b.pos(n), "YAML nested deeper than %d levels", MaxDepth)
	}
	if err := b.grow(1, b.pos(n)); err != nil {
		return nil, err
	}
	switch v := n.(type) {
	case *ast.DocumentNode:
		return b.build(v.Body, depth)
	case *ast.MappingNode:
		out := &Node{Pos: b.pos(v), TokPos: b.pos(v), Kind: Map}
		if len(v.Values) > 0 {
			out.Pos = b.pos(v.Values[0].Key)
		}
		for _, mv := range v.Values {
			if err := b.addPair(out, mv, depth); err != nil {
				return nil, err
			}
		}
		return out, nil
	case *ast.MappingValueNode:
		out := &Node{Pos: b.pos(v.Key), TokPos: b.pos(v), Kind: Map}
		if err := b.addPair(out, v, depth); err != nil {
			return nil, err
		}
		return out, nil
	case *ast.SequenceNode:
		out := &Node{Pos: b.pos(v), TokPos: b.pos(v), Kind: List}
		for _, e := range v.Values {
			cn, err := b.build(e, depth+1)
			if err != nil {
				return nil, err
			}
			out.List = append(out.List, cn)
		}
		return out, nil
	case *ast.AnchorNode:
		before := b.total
		cn, err := b.build(v.Value, depth+1)
		if err != nil {
			return nil, err
		}
		b.anchors[v.Name.String()] = cn
		b.sizes[cn] = b.total - before
		return cn, nil
	case *ast.AliasNode:
		name := v.Value.String()
		a, ok := b.anchors[name]
		if !ok {
			return nil, b.fail(b.pos(v), "unknown YAML alias *%s", name)
		}
		b.aliased += b.sizes[a]
		if err := b.grow(b.sizes[a], b.pos(v)); err != nil {
			return nil, err
		}
		return a, nil
	case *ast.TagNode:
		cn, err := b.build(v.Value, depth+1)
		if err != nil {
			return nil, err
		}
		if v.Start != nil && v.Start.Value == "!!str" && cn.Kind == Scalar && cn.Scalar != nil {
			c := *cn
			c.Scalar = c.Text
			return &c, nil
		}
		return cn, nil
	case *ast.StringNode:
		return b.scalar(v, v.Value, v.Value), nil
	case *ast.LiteralNode:
		s := ""
		if v.Value != nil {
			s = v.Value.Value
		}
		return b.scalar(v, s, s), nil
	case *ast.IntegerNode:
		text := v.GetToken().Value
		switch x := v.Value.(type) {
		case int64:
			return b.scalar(v, int(x), text), nil
		case uint64:
			if x > math.MaxInt64 {
				return b.scalar(v, float64(x), text), nil
			}
			return b.scalar(v, int(x), text), nil
		default:
			return b.scalar(v, fmt.Sprint(x), text), nil
		}
	case *ast.FloatNode:
		return b.scalar(v, v.Value, v.GetToken().Value), nil
	case *ast.InfinityNode:
		return b.scalar(v, v.Value, v.GetToken().Value), nil
	case *ast.NanNode:
		return b.scalar(v, math.NaN(), v.GetToken().Value), nil
	case *ast.BoolNode:
		return b.scalar(v, v.Value, v.GetToken().Value), nil
	case *ast.NullNode:
		return b.scalar(v, nil, ""), nil
	case *ast.MergeKeyNode:
		return b.scalar(v, "<<", "<<"), nil
	case *ast.CommentGroupNode, *ast.CommentNode:
		return b.scalar(v, nil, ""), nil
	}
	return nil, b.fail(b.pos(n), "unsupported YAML construct %s", n.Type())
}

func (b *builder) addPair(out *Node, mv *ast.MappingValueNode, depth int) error {
	if mv.Key == nil {
		return b.fail(b.pos(mv), "mapping entry without a key")
	}
	val, err := b.build(mv.Value, depth+1)
	if err != nil {
		return err
	}
	if mv.Key.IsMergeKey() {
		return b.merge(out, val)
	}
	var keyNode ast.Node = mv.Key
	if mk, ok := keyNode.(*ast.MappingKeyNode); ok {
		keyNode = mk.Value // "? key"
	}
	key, err := b.build(keyNode, depth+1)
	if err != nil {
		return err
	}
	if key.Kind != Scalar {
		return b.fail(key.Pos, "a mapping key must be a plain value, not %s", key.KindName())
	}
	ks := key.KeyString()
	for i, k := range out.Keys {
		if k.KeyString() == ks {
			// An explicit key overrides one merged in with <<; a repeated
			// explicit key is a mistake (the parser reports most).
			if k.Pos.File == key.Pos.File && k.Pos.Line != 0 && !k.Merged {
				return b.fail(key.Pos, "duplicate key %q (first at line %d)", ks, k.Pos.Line)
			}
			out.Keys[i], out.Vals[i] = key, val
			return nil
		}
	}
	out.Keys = append(out.Keys, key)
	out.Vals = append(out.Vals, val)
	return nil
}

// merge copies the keys of a mapping, or of a list of mappings, into out;
// they never override explicit keys, as YAML 1.1 specifies.
func (b *builder) merge(out *Node, val *Node) error {
	srcs := []*Node{val}
	if val.Kind == List {
		srcs = val.List
	}
	for _, s := range srcs {
		if s.Kind != Map {
			return b.fail(s.Pos, "a YAML merge key << needs a mapping or a list of mappings, not %s", s.KindName())
		}
		for i, k := range s.Keys {
			if out.Index(k.KeyString()) < 0 {
				mk := *k
				mk.Merged = true
				out.Keys = append(out.Keys, &mk)
				out.Vals = append(out.Vals, s.Vals[i])
			}
		}
	}
	return nil
}
