package kubexm_test

// No value is spliced into shell text: every {{ }} that writes into the text
// of a shell:, command: (cmd, the free form) or wait_for command: in the
// built-in roles and playbooks must go through shquote, and stand where the
// shell reads it as a word of its own (not inside '...', "..." or a here
// document, where shquote's quotes would be literal characters). argv: lists
// need no quoting: each item is one argument whatever it holds.

import (
	"fmt"
	"io/fs"
	"strings"
	"testing"
	"text/template/parse"

	"github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/parser"

	"github.com/mensylisir/kubexm"
)

// shellSafeFuncs are the template functions whose output is safe as a shell
// word: shquote quotes; the others can only produce digits (or a leading
// minus), so no value reaching them can break out.
var shellSafeFuncs = map[string]bool{
	"shquote":   true,
	"int":       true,
	"int64":     true,
	"atoi":      true,
	"len":       true,
	"unixEpoch": true,
}

func TestNoUnquotedValuesInShellText(t *testing.T) {
	var checked int
	err := fs.WalkDir(kubexm.Content(), ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".yaml") {
			return err
		}
		data, err := fs.ReadFile(kubexm.Content(), path)
		if err != nil {
			return err
		}
		f, err := parser.ParseBytes(data, 0)
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		for _, doc := range f.Docs {
			for _, st := range shellTexts(doc.Body) {
				checked++
				for _, p := range shellTextProblems(st.text) {
					t.Errorf("%s:%d: %s: %s", path, st.line+strings.Count(st.text[:p.offset], "\n"), st.what, p.msg)
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked < 30 {
		t.Fatalf("only %d shell texts found in roles and playbooks; the walk is broken", checked)
	}
}

type shellText struct {
	line int // of the text's first line
	what string
	text string
}

// shellTexts finds, anywhere in a YAML tree, the values that a shell (or
// the command builtin's word splitting) reads.
func shellTexts(n ast.Node) []shellText {
	var out []shellText
	var walk func(n ast.Node)
	walk = func(n ast.Node) {
		switch v := n.(type) {
		case *ast.DocumentNode:
			walk(v.Body)
		case *ast.SequenceNode:
			for _, e := range v.Values {
				walk(e)
			}
		case *ast.MappingNode:
			for _, mv := range v.Values {
				key := mv.Key.String()
				switch key {
				case "shell", "command":
					out = append(out, shellArg(key, mv.Value, "cmd")...)
				case "wait_for":
					out = append(out, shellArg(key, mv.Value, "command")...)
				}
				walk(mv.Value)
			}
		case *ast.MappingValueNode:
			walk(&ast.MappingNode{Values: []*ast.MappingValueNode{v}})
		case *ast.TagNode:
			walk(v.Value)
		}
	}
	walk(n)
	return out
}

// shellArg returns the shell text of a builtin call: the free form, or the
// named argument of the map form.
func shellArg(builtin string, v ast.Node, arg string) []shellText {
	line := textLine(v)
	var val any
	if err := yaml.NodeToValue(v, &val); err != nil {
		return []shellText{{line, builtin, "{{ unparsable }}"}}
	}
	switch x := val.(type) {
	case string:
		if builtin == "wait_for" {
			return nil
		}
		return []shellText{{line, builtin, x}}
	case map[string]any:
		if s, ok := x[arg].(string); ok {
			if m, ok := v.(*ast.MappingNode); ok {
				for _, mv := range m.Values {
					if mv.Key.String() == arg {
						line = textLine(mv.Value)
					}
				}
			}
			return []shellText{{line, builtin + " " + arg, s}}
		}
	}
	return nil
}

// marker stands for one template output in the flattened text; it holds no
// character the shell scanner below treats specially.
const marker = "\x01"

// shellTextProblems parses text as a template and reports every output that
// is not quoted for the shell, or that stands inside quotes.
// textLine is the line a scalar's text starts on: a block scalar (| or >)
// starts on the line after its indicator.
func textLine(n ast.Node) int {
	line := n.GetToken().Position.Line
	if _, ok := n.(*ast.LiteralNode); ok {
		line++
	}
	return line
}

type textProblem struct {
	offset int // byte offset in the text
	msg    string
}

func shellTextProblems(text string) []textProblem {
	if !strings.Contains(text, "{{") {
		return nil
	}
	// Without function checks: the function names are the engine's.
	tr := &parse.Tree{Name: "t", Mode: parse.SkipFuncCheck}
	trees := map[string]*parse.Tree{}
	if _, err := tr.Parse(text, "{{", "}}", trees); err != nil {
		return []textProblem{{0, "template does not parse: " + err.Error()}}
	}
	var problems []textProblem
	var flat strings.Builder
	var actions []*parse.ActionNode
	var flatten func(n parse.Node)
	flatten = func(n parse.Node) {
		switch v := n.(type) {
		case *parse.ListNode:
			if v == nil {
				return
			}
			for _, c := range v.Nodes {
				flatten(c)
			}
		case *parse.TextNode:
			flat.Write(v.Text)
		case *parse.ActionNode:
			if len(v.Pipe.Decl) > 0 {
				return // an assignment writes nothing
			}
			if !pipeIsShellSafe(v.Pipe) {
				problems = append(problems, textProblem{int(v.Position()), fmt.Sprintf("%s is not passed through shquote", v)})
			}
			actions = append(actions, v)
			flat.WriteString(marker)
		case *parse.IfNode:
			flatten(v.List)
			flatten(v.ElseList)
		case *parse.RangeNode:
			flatten(v.List)
			flatten(v.ElseList)
		case *parse.WithNode:
			flatten(v.List)
			flatten(v.ElseList)
		case *parse.TemplateNode:
			problems = append(problems, textProblem{int(v.Position()), fmt.Sprintf("%s: a template call in shell text cannot be checked", v)})
		}
	}
	for _, tr := range trees {
		flatten(tr.Root)
	}
	for i, ctx := range markerContexts(flat.String()) {
		if ctx != "" {
			problems = append(problems, textProblem{int(actions[i].Position()), fmt.Sprintf("%s stands %s, where shquote's quotes are literal; put it outside the quotes", actions[i], ctx)})
		}
	}
	return problems
}

func pipeIsShellSafe(p *parse.PipeNode) bool {
	if p == nil || len(p.Cmds) == 0 {
		return false
	}
	last := p.Cmds[len(p.Cmds)-1]
	id, ok := last.Args[0].(*parse.IdentifierNode)
	return ok && shellSafeFuncs[id.Ident]
}

// markerContexts scans shell text the way sh tokenises quotes and returns,
// for each marker in order, "" when it stands unquoted, else where it stands.
// Command substitutions inside double quotes start a fresh unquoted context.
func markerContexts(s string) []string {
	type frame struct {
		kind  byte // 'u' unquoted, 'd' double quotes, 'b' backquotes
		paren int  // open ( in this frame
		subst bool // pushed by $(
	}
	stack := []frame{{kind: 'u'}}
	var out []string
	top := func() *frame { return &stack[len(stack)-1] }
	for i := 0; i < len(s); i++ {
		c := s[i]
		f := top()
		if strings.HasPrefix(s[i:], marker) {
			switch f.kind {
			case 'd':
				out = append(out, `inside "..."`)
			default:
				out = append(out, "")
			}
			continue
		}
		// Quoting that works alike unquoted and inside "...".
		switch {
		case c == '\\':
			i++
			continue
		case c == '`' && f.kind == 'b':
			stack = stack[:len(stack)-1]
			continue
		case c == '`':
			stack = append(stack, frame{kind: 'b'})
			continue
		case c == '$' && i+1 < len(s) && s[i+1] == '(':
			stack = append(stack, frame{kind: 'u', subst: true})
			i++
			continue
		case c == '"' && f.kind == 'd':
			stack = stack[:len(stack)-1]
			continue
		case c == '"':
			stack = append(stack, frame{kind: 'd'})
			continue
		case f.kind == 'd':
			continue
		}
		switch {
		case c == '\'':
			end := strings.IndexByte(s[i+1:], '\'')
			if end < 0 {
				end = len(s) - i - 1
			}
			for range strings.Count(s[i+1:i+1+end], marker) {
				out = append(out, "inside '...'")
			}
			i += end + 1
		case c == '(':
			f.paren++
		case c == ')' && f.paren > 0:
			f.paren--
		case c == ')' && f.subst:
			stack = stack[:len(stack)-1]
		case c == '#' && (i == 0 || strings.IndexByte(" \t\n;", s[i-1]) >= 0):
			end := strings.IndexByte(s[i:], '\n')
			if end < 0 {
				end = len(s) - i
			}
			// A comment is not run; an output there is harmless.
			for range strings.Count(s[i:i+end], marker) {
				out = append(out, "")
			}
			i += end - 1
		case c == '<' && strings.HasPrefix(s[i:], "<<") && !strings.HasPrefix(s[i:], "<<<"):
			word, body, rest := hereDoc(s[i+2:])
			if word == "" {
				i++
				continue
			}
			for range strings.Count(body, marker) {
				out = append(out, "inside a here document (<<"+word+"); pass the value as stdin: or env: instead")
			}
			i = len(s) - len(rest) - 1
		}
	}
	return out
}

// hereDoc splits what follows "<<": the delimiter word, the document body
// (from the next line to the delimiter line) and the text after it. It
// returns an empty word when s does not start a here document.
func hereDoc(s string) (word, body, rest string) {
	s = strings.TrimPrefix(s, "-")
	s = strings.TrimLeft(s, " \t")
	end := strings.IndexAny(s, " \t\n;|&<>)")
	if end < 0 {
		end = len(s)
	}
	word = strings.Trim(s[:end], `'"`)
	if word == "" {
		return "", "", s
	}
	nl := strings.IndexByte(s, '\n')
	if nl < 0 {
		return word, "", ""
	}
	lines := strings.SplitAfter(s[nl+1:], "\n")
	n := nl + 1
	for _, l := range lines {
		if strings.TrimSpace(l) == word {
			return word, s[nl+1 : n], s[n+len(l):]
		}
		n += len(l)
	}
	return word, s[nl+1:], ""
}

// TestShellTextChecker proves the checker itself: it must accept the safe
// forms and catch each unsafe one.
func TestShellTextChecker(t *testing.T) {
	good := []string{
		"rm -rf -- {{ .d | shquote }}",
		"for p in {{ .pkgs | shquote }}; do echo \"$p\"; done",
		"x=\"$(dirname {{ .d | shquote }})\"",
		"control={{ now | unixEpoch }}",
		"{{ if .x }}echo {{ shquote .y }}{{ end }}",
		"cat <<'EOF'\nfixed\nEOF\necho {{ .a | shquote }}",
	}
	for _, s := range good {
		if p := shellTextProblems(s); len(p) > 0 {
			t.Errorf("%q: unexpected problems %v", s, p)
		}
	}
	bad := []string{
		"rm -rf '{{ .d }}'",
		"rm -rf {{ .d }}",
		"rm -rf '{{ .d | shquote }}'",
		"rm -rf \"{{ .d | shquote }}\"",
		"for p in {{ join \" \" .pkgs }}; do :; done",
		"echo {{ .d | quote }}",
		"cat <<EOF\n{{ .d | shquote }}\nEOF",
		"x=\"$(dirname \"{{ .d | shquote }}\")\"",
	}
	for _, s := range bad {
		if p := shellTextProblems(s); len(p) == 0 {
			t.Errorf("%q: the checker found nothing", s)
		}
	}
}
