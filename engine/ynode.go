package engine

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

// Pos is a place in a playbook file, for error messages.
type Pos struct {
	File string
	Line int
	Col  int
}

func (p Pos) String() string {
	if p.Line == 0 {
		return p.File
	}
	return fmt.Sprintf("%s:%d:%d", p.File, p.Line, p.Col)
}

// node is a YAML value that remembers where it was written. The loader works
// on nodes rather than decoded values so every error can point at a line.
type node struct {
	pos  Pos
	kind nodeKind
	// keys and vals hold a mapping in file order; list holds a sequence;
	// scalar holds a decoded scalar (string, int, float64, bool or nil).
	keys   []*node
	vals   []*node
	list   []*node
	scalar any
	merged bool // a key copied in by a YAML merge (<<)
}

type nodeKind int

const (
	scalarNode nodeKind = iota
	mapNode
	listNode
)

func (n *node) kindName() string {
	switch n.kind {
	case mapNode:
		return "a mapping"
	case listNode:
		return "a list"
	}
	switch n.scalar.(type) {
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

// str returns the scalar as a string and whether it was one.
func (n *node) str() (string, bool) {
	if n == nil || n.kind != scalarNode {
		return "", false
	}
	s, ok := n.scalar.(string)
	return s, ok
}

// get returns the value of key in a mapping.
func (n *node) get(key string) *node {
	if n == nil || n.kind != mapNode {
		return nil
	}
	for i, k := range n.keys {
		if s, _ := k.str(); s == key {
			return n.vals[i]
		}
	}
	return nil
}

// value converts the node to plain Go values: map[string]any, []any and
// scalars, the shapes builtins and the evaluator expect.
func (n *node) value() any {
	if n == nil {
		return nil
	}
	switch n.kind {
	case mapNode:
		m := make(map[string]any, len(n.keys))
		for i, k := range n.keys {
			m[k.keyString()] = n.vals[i].value()
		}
		return m
	case listNode:
		l := make([]any, len(n.list))
		for i, e := range n.list {
			l[i] = e.value()
		}
		return l
	}
	return n.scalar
}

func (n *node) keyString() string {
	if s, ok := n.str(); ok {
		return s
	}
	return fmt.Sprint(n.scalar)
}

// maxYAMLDepth bounds nesting so hostile input cannot exhaust the stack.
const maxYAMLDepth = 200

// parseYAML parses one YAML document of a file into a node tree.
func parseYAML(file string, data []byte) (*node, error) {
	return parseYAMLLimited(file, data, maxYAMLNodes)
}

// parseYAMLLimited is parseYAML with a bound on the values the document
// expands to (aliases counted in full).
func parseYAMLLimited(file string, data []byte, maxNodes int) (*node, error) {
	if err := yamlguard.Check(data, yamlguard.Default()); err != nil {
		var ge *yamlguard.Error
		if errors.As(err, &ge) && ge.Line > 0 {
			return nil, fmt.Errorf("%s:%w", file, err)
		}
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	f, err := parser.ParseBytes(data, 0)
	if err != nil {
		return nil, yamlError(file, err)
	}
	var body ast.Node
	for _, d := range f.Docs {
		if d == nil || d.Body == nil {
			continue
		}
		if body != nil {
			return nil, fmt.Errorf("%s: several YAML documents in one file; kubexm reads exactly one", file)
		}
		body = d.Body
	}
	c := converter{file: file, anchors: map[string]*node{}, sizes: map[*node]int{}, limit: maxNodes}
	if body == nil {
		return &node{pos: Pos{File: file}, kind: scalarNode}, nil
	}
	return c.convert(body, 0)
}

func yamlError(file string, err error) error {
	var se *yaml.SyntaxError
	if errors.As(err, &se) && se.Token != nil {
		return fmt.Errorf("%s:%d:%d: YAML syntax error: %s", file, se.Token.Position.Line, se.Token.Position.Column, se.Message)
	}
	msg := strings.TrimSpace(err.Error())
	return fmt.Errorf("%s: YAML syntax error: %s", file, msg)
}

type converter struct {
	file    string
	anchors map[string]*node
	sizes   map[*node]int // node counts of anchored values
	total   int           // nodes produced, aliases counted in full
	limit   int           // bound on total
}

// maxYAMLNodes bounds the size of a document after alias expansion, so a
// "billion laughs" file fails instead of eating the memory.
const maxYAMLNodes = 1_000_000

func (c *converter) grow(n int, at Pos) error {
	c.total += n
	if c.total > c.limit {
		return fmt.Errorf("%s: YAML document too large after expanding aliases (over %d values)", at, c.limit)
	}
	return nil
}

func (c *converter) pos(n ast.Node) Pos {
	p := Pos{File: c.file}
	if tk := n.GetToken(); tk != nil && tk.Position != nil {
		p.Line, p.Col = tk.Position.Line, tk.Position.Column
	}
	return p
}

func (c *converter) convert(n ast.Node, depth int) (*node, error) {
	if n == nil {
		return &node{pos: Pos{File: c.file}}, nil
	}
	if depth > maxYAMLDepth {
		return nil, fmt.Errorf("%s: YAML nested deeper than %d levels", c.pos(n), maxYAMLDepth)
	}
	if err := c.grow(1, c.pos(n)); err != nil {
		return nil, err
	}
	switch v := n.(type) {
	case *ast.MappingNode:
		out := &node{pos: c.pos(v), kind: mapNode}
		if len(v.Values) > 0 {
			out.pos = c.pos(v.Values[0].Key)
		}
		for _, mv := range v.Values {
			if err := c.addPair(out, mv, depth); err != nil {
				return nil, err
			}
		}
		return out, nil
	case *ast.MappingValueNode:
		out := &node{pos: c.pos(v.Key), kind: mapNode}
		if err := c.addPair(out, v, depth); err != nil {
			return nil, err
		}
		return out, nil
	case *ast.SequenceNode:
		out := &node{pos: c.pos(v), kind: listNode}
		for _, e := range v.Values {
			cn, err := c.convert(e, depth+1)
			if err != nil {
				return nil, err
			}
			out.list = append(out.list, cn)
		}
		return out, nil
	case *ast.AnchorNode:
		before := c.total
		cn, err := c.convert(v.Value, depth+1)
		if err != nil {
			return nil, err
		}
		c.anchors[v.Name.String()] = cn
		c.sizes[cn] = c.total - before
		return cn, nil
	case *ast.AliasNode:
		name := v.Value.String()
		a, ok := c.anchors[name]
		if !ok {
			return nil, fmt.Errorf("%s: unknown YAML alias *%s", c.pos(v), name)
		}
		if err := c.grow(c.sizes[a], c.pos(v)); err != nil {
			return nil, err
		}
		return a, nil
	case *ast.TagNode:
		cn, err := c.convert(v.Value, depth+1)
		if err != nil {
			return nil, err
		}
		if v.Start != nil && (v.Start.Value == "!!str") && cn.kind == scalarNode && cn.scalar != nil {
			cn = &node{pos: cn.pos, kind: scalarNode, scalar: fmt.Sprint(cn.scalar)}
		}
		return cn, nil
	case *ast.StringNode:
		return &node{pos: c.pos(v), scalar: v.Value}, nil
	case *ast.LiteralNode:
		s := ""
		if v.Value != nil {
			s = v.Value.Value
		}
		return &node{pos: c.pos(v), scalar: s}, nil
	case *ast.IntegerNode:
		switch x := v.Value.(type) {
		case int64:
			return &node{pos: c.pos(v), scalar: int(x)}, nil
		case uint64:
			if x > math.MaxInt64 {
				return &node{pos: c.pos(v), scalar: float64(x)}, nil
			}
			return &node{pos: c.pos(v), scalar: int(x)}, nil
		default:
			return &node{pos: c.pos(v), scalar: fmt.Sprint(x)}, nil
		}
	case *ast.FloatNode:
		return &node{pos: c.pos(v), scalar: v.Value}, nil
	case *ast.InfinityNode:
		return &node{pos: c.pos(v), scalar: v.Value}, nil
	case *ast.NanNode:
		return &node{pos: c.pos(v), scalar: math.NaN()}, nil
	case *ast.BoolNode:
		return &node{pos: c.pos(v), scalar: v.Value}, nil
	case *ast.NullNode:
		return &node{pos: c.pos(v)}, nil
	case *ast.MergeKeyNode:
		return &node{pos: c.pos(v), scalar: "<<"}, nil
	case *ast.CommentGroupNode, *ast.CommentNode:
		return &node{pos: c.pos(v)}, nil
	}
	return nil, fmt.Errorf("%s: unsupported YAML construct %s", c.pos(n), n.Type())
}

func (c *converter) addPair(out *node, mv *ast.MappingValueNode, depth int) error {
	val, err := c.convert(mv.Value, depth+1)
	if err != nil {
		return err
	}
	if _, isMerge := mv.Key.(*ast.MergeKeyNode); isMerge {
		var srcs []*node
		switch val.kind {
		case mapNode:
			srcs = []*node{val}
		case listNode:
			srcs = val.list
		}
		for _, s := range srcs {
			if s.kind != mapNode {
				return fmt.Errorf("%s: a YAML merge key << needs a mapping", val.pos)
			}
			for i, k := range s.keys {
				if out.get(k.keyString()) == nil {
					mk := *k
					mk.merged = true
					out.keys = append(out.keys, &mk)
					out.vals = append(out.vals, s.vals[i])
				}
			}
		}
		return nil
	}
	key, err := c.convert(mv.Key, depth+1)
	if err != nil {
		return err
	}
	if key.kind != scalarNode {
		return fmt.Errorf("%s: a mapping key must be a plain value, not %s", key.pos, key.kindName())
	}
	ks := key.keyString()
	for i, k := range out.keys {
		if k.keyString() == ks {
			// An explicit key overrides one merged in with <<; a repeated
			// explicit key is a mistake.
			if k.pos.File == key.pos.File && k.pos.Line != 0 && !k.merged {
				return fmt.Errorf("%s: duplicate key %q (first at line %d)", key.pos, ks, k.pos.Line)
			}
			out.keys[i], out.vals[i] = key, val
			return nil
		}
	}
	out.keys = append(out.keys, key)
	out.vals = append(out.vals, val)
	return nil
}
