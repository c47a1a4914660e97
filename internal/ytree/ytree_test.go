package ytree

import (
	"errors"
	"fmt"
	"math"
	"reflect"
	"strings"
	"testing"
)

func parseOne(t *testing.T, src string) *Node {
	t.Helper()
	docs, err := Parse("f.yaml", []byte(src), 1000)
	if err != nil {
		t.Fatalf("%q: %v", src, err)
	}
	if len(docs) != 1 {
		t.Fatalf("%q: %d documents", src, len(docs))
	}
	return docs[0]
}

func wantErr(t *testing.T, src string, limit int, kind ErrorKind, want ...string) *Error {
	t.Helper()
	_, err := Parse("f.yaml", []byte(src), limit)
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("%q: err = %v, want an *Error", src, err)
	}
	if e.Kind != kind {
		t.Errorf("%q: kind = %d, want %d (%v)", src, e.Kind, kind, e)
	}
	for _, w := range want {
		if !strings.Contains(e.Error(), w) {
			t.Errorf("%q: err = %q, want %q", src, e.Error(), w)
		}
	}
	return e
}

func TestPositions(t *testing.T) {
	root := parseOne(t, "# c\nname: x\nplays:\n  - hosts: all\n    port: 22\nflow: {a: 1}\n")
	cases := []struct {
		what string
		got  Pos
		want string
	}{
		{"root", root.Pos, "f.yaml:2:1"},
		{"root token", root.TokPos, "f.yaml:2:5"},
		{"key name", root.Keys[0].Pos, "f.yaml:2:1"},
		{"value of name", root.Get("name").Pos, "f.yaml:2:7"},
		{"list", root.Get("plays").Pos, "f.yaml:4:3"},
		{"play", root.Get("plays").List[0].Pos, "f.yaml:4:5"},
		{"port", root.Get("plays").List[0].Get("port").Pos, "f.yaml:5:11"},
		{"flow map", root.Get("flow").Pos, "f.yaml:6:8"},
		{"flow map token", root.Get("flow").TokPos, "f.yaml:6:7"},
	}
	for _, c := range cases {
		if c.got.String() != c.want {
			t.Errorf("%s at %s, want %s", c.what, c.got, c.want)
		}
	}
	if got := (Pos{File: "f", Line: 3}).String(); got != "f:3" {
		t.Errorf("line without column: %q", got)
	}
}

func TestScalars(t *testing.T) {
	root := parseOne(t, "s: 'a b'\ni: 0x10\nf: 1.50\nb: true\nn: ~\ninf: .inf\nnan: .nan\nbig: 18446744073709551615\ntagged: !!str 1.50\nlit: |\n  x\n")
	cases := map[string]struct {
		scalar any
		text   string
	}{
		"s":      {"a b", "a b"},
		"i":      {16, "0x10"},
		"f":      {1.5, "1.50"},
		"b":      {true, "true"},
		"n":      {nil, ""},
		"inf":    {math.Inf(1), ".inf"},
		"big":    {float64(18446744073709551615), "18446744073709551615"},
		"tagged": {"1.50", "1.50"},
		"lit":    {"x\n", "x\n"},
	}
	for k, c := range cases {
		n := root.Get(k)
		if n.Kind != Scalar || !reflect.DeepEqual(n.Scalar, c.scalar) || n.Text != c.text {
			t.Errorf("%s = %#v (%q), want %#v (%q)", k, n.Scalar, n.Text, c.scalar, c.text)
		}
	}
	if v, ok := root.Get("nan").Scalar.(float64); !ok || !math.IsNaN(v) {
		t.Errorf("nan = %#v", root.Get("nan").Scalar)
	}
	if !root.Get("n").IsNull() || root.Get("s").IsNull() || !root.Get("missing").IsNull() {
		t.Error("IsNull")
	}
	if got := root.Get("i").KindName() + ", " + root.Get("n").KindName() + ", " + root.KindName(); got != "a number, null, a mapping" {
		t.Errorf("kind names: %s", got)
	}
}

func TestAliasesAndMergeKeys(t *testing.T) {
	root := parseOne(t, `base: &base {a: 1, b: 2}
more: &more {c: 3}
list: &l [x, y]
copy: *l
one:
  <<: *base
  b: 20
many:
  b: 200
  <<: [*base, *more]
`)
	if got := root.Get("copy"); got != root.Get("list") {
		t.Error("an alias is not the anchored node")
	}
	one := root.Get("one")
	if got := one.Value(); !reflect.DeepEqual(got, map[string]any{"a": 1, "b": 20}) {
		t.Errorf("one = %v", got)
	}
	// Keys keep file order; a merged key is marked and placed at the <<.
	var order []string
	for _, k := range one.Keys {
		order = append(order, fmt.Sprintf("%s/%v", k.KeyString(), k.Merged))
	}
	if strings.Join(order, " ") != "a/true b/false" {
		t.Errorf("one's keys: %v", order)
	}
	if got := root.Get("many").Value(); !reflect.DeepEqual(got, map[string]any{"a": 1, "b": 200, "c": 3}) {
		t.Errorf("many = %v", got)
	}
	// An anchor belongs to its document.
	if _, err := Parse("f.yaml", []byte("a: &x 1\n---\nb: *x\n"), 100); err == nil || !strings.Contains(err.Error(), "f.yaml:3:4: unknown YAML alias *x") {
		t.Errorf("alias across documents: %v", err)
	}
	wantErr(t, "a: *nope\n", 100, Structure, "unknown YAML alias *nope")
	wantErr(t, "a:\n  <<: 1\n", 100, Structure, "f.yaml:2:7", "merge key << needs a mapping")
	wantErr(t, "a:\n  <<: [{b: 1}, 2]\n", 100, Structure, "merge key << needs a mapping")
}

func TestDocuments(t *testing.T) {
	docs, err := Parse("f.yaml", []byte("a: 1\n---\n- b\n"), 100)
	if err != nil || len(docs) != 2 || docs[1].Kind != List {
		t.Fatalf("docs = %v, %v", docs, err)
	}
	docs, err = Parse("f.yaml", []byte("# only a comment\n"), 100)
	if err != nil || len(docs) != 0 {
		t.Errorf("empty: %v, %v", docs, err)
	}
}

func TestDuplicateKeys(t *testing.T) {
	// The parser refuses a repeated key; the tree refuses keys that differ
	// only in how they are written, as they name the same variable.
	wantErr(t, "a: 1\nb: 2\na: 3\n", 100, Syntax, "f.yaml:3:1: YAML syntax error:", `"a" already defined`)
	wantErr(t, "1.0: a\n1.00: b\n", 100, Structure, `f.yaml:2:1: duplicate key "1" (first at line 1)`)
	wantErr(t, "0x10: a\n16: b\n", 100, Structure, `f.yaml:2:1: duplicate key "16" (first at line 1)`)
	root := parseOne(t, "? a\n: b\n")
	if v, _ := root.Get("a").Str(); v != "b" {
		t.Errorf("explicit key: %v", root.Value())
	}
}

func TestLimits(t *testing.T) {
	var b strings.Builder
	b.WriteString("l0: &l0 [x, x, x, x, x, x, x, x, x, x]\n")
	for i := 1; i <= 6; i++ {
		fmt.Fprintf(&b, "l%d: &l%d [%s]\n", i, i, strings.TrimSuffix(strings.Repeat(fmt.Sprintf("*l%d, ", i-1), 10), ", "))
	}
	e := wantErr(t, b.String(), 10_000, Size, "too large after expanding aliases (over 10000 values; nested aliases?)")
	if e.Pos.Line < 2 {
		t.Errorf("limit error at %s", e.Pos)
	}
	// A file that is merely long is not blamed on aliases it does not have.
	e = wantErr(t, strings.Repeat("- {a: 1, b: 2}\n", 3000), 10_000, Size, "YAML document of more than 10000 values")
	if strings.Contains(e.Msg, "alias") {
		t.Errorf("a long file without aliases: %s", e.Msg)
	}
	// The same file within a higher bound parses, aliases counted in full.
	if _, err := Parse("f.yaml", []byte(b.String()), 100_000_000); err != nil {
		t.Errorf("within the bound: %v", err)
	}
	// yamlguard refuses deep nesting before the parser runs.
	wantErr(t, "a: "+strings.Repeat("[", 5000)+strings.Repeat("]", 5000), 100, Limit, "f.yaml:1:", "nested deeper than")
}

func TestSyntaxErrorHints(t *testing.T) {
	e := wantErr(t, "a:\n  b: 1\n  version： 1.7\n  c: 2\n", 100, Syntax, "f.yaml:3:", "YAML syntax error")
	if !strings.Contains(e.Hint, "full-width colon") {
		t.Errorf("hint = %q", e.Hint)
	}
	e = wantErr(t, "a: [\n", 100, Syntax, "f.yaml:1:", "YAML syntax error")
	if e.Hint != "" {
		t.Errorf("hint for a plain syntax error = %q", e.Hint)
	}
	if got := syntaxHint([]byte("a:\n\t b: 1\n"), 2); got != "YAML indents with spaces, not tabs" {
		t.Errorf("tab hint = %q", got)
	}
	if got := syntaxHint([]byte("a： 1\n"), 1); !strings.Contains(got, "full-width colon") {
		t.Errorf("colon hint = %q", got)
	}
	if got := syntaxHint([]byte("a: 1\n"), 7); got != "" {
		t.Errorf("hint past the end = %q", got)
	}
}
