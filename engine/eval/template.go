package eval

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"text/template"
	"text/template/parse"

	"github.com/mensylisir/kubexm/engine/eval/funcs"
)

// Names of the functions the rewritten parse trees call. They are added to a
// template only after it is parsed, so a user template cannot call them.
const (
	fnField     = "kxmField"
	fnFieldOr   = "kxmFieldOr"
	fnFieldText = "kxmFieldText"
	fnIndex     = "kxmIndex"
	fnIndexOr   = "kxmIndexOr"
	fnOut       = "kxmOut"
	fnCapture   = "kxmCapture"

	templateName = "tmpl"
	captureMark  = "\x00kxm-capture:"
)

// isLenientFunc names the functions whose arguments may be undefined: a
// missing variable passed to them is nil instead of an error, so that
// `{{ .x | default "y" }}` works.
func isLenientFunc(name string) bool {
	switch name {
	case "default", "coalesce", "empty", "required":
		return true
	}
	return false
}

type compiledTemplate struct {
	tmpl *template.Template
	// single: the source is exactly one output action, so Render returns the
	// action's value with its type.
	single bool
	err    error
}

// templateFuncs is the function library (engine/eval/funcs) and include.
func templateFuncs() template.FuncMap {
	fm := funcs.Template()
	// include is bound to each parsed template (includeFunc); this one only
	// lets the parser know the name.
	fm["include"] = func(string, any) (string, error) { return "", errors.New("include: no template to include from") }
	return fm
}

// Render expands a string. A string that is exactly one {{ }} action
// (surrounding spaces allowed) keeps the type of its value (list, map,
// number, bool, nil); any other string renders to a string. Strings without
// "{{" are returned unchanged quickly (no template parse). A typed value may
// share lists and maps with vars: callers must not modify it.
func (e *Evaluator) Render(s string, vars map[string]any) (any, error) {
	if !strings.Contains(s, "{{") {
		return s, nil
	}
	ct := e.template(s)
	if ct.err != nil {
		return nil, ct.err
	}
	var b funcs.Writer
	b.Grow(len(s))
	if err := ct.tmpl.Execute(&b, vars); err != nil {
		return nil, e.templateError(s, err)
	}
	out := b.String()
	if ct.single {
		v := e.takeCapture(out)
		if str, ok := v.(string); ok && len(str) > MaxOutput {
			return nil, e.templateError(s, funcs.OutputTooLong())
		}
		return v, nil
	}
	return out, nil
}

// RenderString is Render for callers that need text: a typed value is
// printed the way text/template prints it.
func (e *Evaluator) RenderString(s string, vars map[string]any) (string, error) {
	v, err := e.Render(s, vars)
	if err != nil {
		return "", err
	}
	switch v := v.(type) {
	case string:
		return v, nil
	case nil:
		return "", nil
	default:
		return fmt.Sprint(v), nil
	}
}

// RenderValue walks maps ([string]any) and lists ([]any) recursively
// rendering every string (returns new values; never mutates input). Map keys
// are names, not values, and are not rendered.
func (e *Evaluator) RenderValue(v any, vars map[string]any) (any, error) {
	switch v := v.(type) {
	case string:
		return e.Render(v, vars)
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, item := range v {
			r, err := e.RenderValue(item, vars)
			if err != nil {
				return nil, err
			}
			out[k] = r
		}
		return out, nil
	case []any:
		out := make([]any, len(v))
		for i, item := range v {
			r, err := e.RenderValue(item, vars)
			if err != nil {
				return nil, err
			}
			out[i] = r
		}
		return out, nil
	}
	return v, nil
}

// CheckTemplate parses without rendering (for load-time errors and
// --syntax-check).
func (e *Evaluator) CheckTemplate(s string) error {
	if !strings.Contains(s, "{{") {
		if stmt := jinjaStatement(s); stmt != "" {
			return jinjaError(s, stmt)
		}
		return nil
	}
	return e.template(s).err
}

func (e *Evaluator) template(s string) *compiledTemplate {
	if ct, ok := e.templates.get(s); ok {
		return ct
	}
	ct := e.parseTemplate(s)
	e.templates.put(s, ct)
	return ct
}

func (e *Evaluator) parseTemplate(s string) *compiledTemplate {
	if stmt := jinjaStatement(s); stmt != "" {
		return &compiledTemplate{err: jinjaError(s, stmt)}
	}
	t, err := template.New(templateName).Option("missingkey=error").Funcs(e.userFuncs).Parse(s)
	if err != nil {
		return &compiledTemplate{err: e.templateError(s, err)}
	}
	if err := checkRecursion(t); err != nil {
		return &compiledTemplate{err: &Error{Kind: "template", Source: s, Err: err}}
	}
	t.Funcs(e.internalFuncs)
	t.Funcs(template.FuncMap{"include": includeFunc(t)})
	single := isSingleAction(t.Tree)
	for _, sub := range t.Templates() {
		if sub.Tree == nil || sub.Tree.Root == nil {
			continue
		}
		rw := &tmplRewriter{tree: sub.Tree, text: s}
		rw.list(sub.Tree.Root, single && sub == t)
	}
	return &compiledTemplate{tmpl: t, single: single}
}

// checkRecursion refuses templates that call themselves through {{ template }}
// or include: text/template would recurse 100000 levels deep before failing,
// which takes seconds and a large stack. Template names are constants (an
// include of a computed name is refused), so the call graph is known after
// parsing.
func checkRecursion(t *template.Template) error {
	calls := make(map[string][]string)
	for _, sub := range t.Templates() {
		if sub.Tree != nil {
			var err error
			calls[sub.Name()] = templateCalls(sub.Tree.Root, nil)
			if calls[sub.Name()], err = includeCalls(sub.Tree.Root, calls[sub.Name()]); err != nil {
				return err
			}
		}
	}
	const (
		visiting = 1
		done     = 2
	)
	state := make(map[string]int)
	var visit func(name string) error
	visit = func(name string) error {
		switch state[name] {
		case visiting:
			return fmt.Errorf("template %q calls itself", name)
		case done:
			return nil
		}
		state[name] = visiting
		for _, callee := range calls[name] {
			if err := visit(callee); err != nil {
				return err
			}
		}
		state[name] = done
		return nil
	}
	for name := range calls {
		if err := visit(name); err != nil {
			return err
		}
	}
	return nil
}

func templateCalls(n parse.Node, acc []string) []string {
	switch n := n.(type) {
	case *parse.ListNode:
		if n == nil {
			return acc
		}
		for _, c := range n.Nodes {
			acc = templateCalls(c, acc)
		}
	case *parse.TemplateNode:
		acc = append(acc, n.Name)
	case *parse.IfNode:
		acc = templateCalls(n.List, templateCalls(n.ElseList, acc))
	case *parse.RangeNode:
		acc = templateCalls(n.List, templateCalls(n.ElseList, acc))
	case *parse.WithNode:
		acc = templateCalls(n.List, templateCalls(n.ElseList, acc))
	}
	return acc
}

// includeCalls adds the names the include calls under n name; an include of
// a name that is not a constant string is an error.
func includeCalls(n parse.Node, acc []string) ([]string, error) {
	var err error
	var walk func(n parse.Node)
	walk = func(n parse.Node) {
		switch n := n.(type) {
		case *parse.ListNode:
			if n == nil {
				return
			}
			for _, c := range n.Nodes {
				walk(c)
			}
		case *parse.ActionNode:
			walk(n.Pipe)
		case *parse.PipeNode:
			if n == nil {
				return
			}
			for _, c := range n.Cmds {
				walk(c)
			}
		case *parse.CommandNode:
			if id, ok := n.Args[0].(*parse.IdentifierNode); ok && id.Ident == "include" {
				if len(n.Args) < 2 {
					err = fmt.Errorf("include needs the name of a template")
				} else if s, ok := n.Args[1].(*parse.StringNode); ok {
					acc = append(acc, s.Text)
				} else if err == nil {
					err = fmt.Errorf("include %s: the template's name must be a string in quotes", n.Args[1])
				}
			}
			for _, a := range n.Args {
				walk(a)
			}
		case *parse.BranchNode:
			walk(n.Pipe)
			walk(n.List)
			walk(n.ElseList)
		case *parse.IfNode:
			walk(&n.BranchNode)
		case *parse.RangeNode:
			walk(&n.BranchNode)
		case *parse.WithNode:
			walk(&n.BranchNode)
		case *parse.TemplateNode:
			walk(n.Pipe)
		}
	}
	walk(n)
	return acc, err
}

// isSingleAction reports whether the template is one action that outputs a
// value, with nothing else around it but whitespace.
func isSingleAction(tree *parse.Tree) bool {
	if tree == nil || tree.Root == nil {
		return false
	}
	actions := 0
	for _, n := range tree.Root.Nodes {
		switch n := n.(type) {
		case *parse.TextNode:
			if strings.TrimSpace(string(n.Text)) != "" {
				return false
			}
		case *parse.ActionNode:
			if len(n.Pipe.Decl) > 0 {
				return false
			}
			actions++
		default:
			return false
		}
	}
	return actions == 1
}

// capture stores the value of a single-action template and prints a token
// naming it; Render swaps the token for the value. Template functions cannot
// see the Execute call they run in, so the value travels through the output.
func (e *Evaluator) capture(v any) string {
	id := e.captureSeq.Add(1)
	e.captures.Store(id, v)
	return captureMark + strconv.FormatUint(id, 10) + "\x00"
}

func (e *Evaluator) takeCapture(out string) any {
	start := strings.Index(out, captureMark)
	if start < 0 {
		return out
	}
	rest := out[start+len(captureMark):]
	end := strings.IndexByte(rest, 0)
	if end < 0 {
		return out
	}
	id, err := strconv.ParseUint(rest[:end], 10, 64)
	if err != nil {
		return out
	}
	v, ok := e.captures.LoadAndDelete(id)
	if !ok {
		return out
	}
	if s, isString := v.(string); isString {
		// A string keeps the surrounding text, exactly as a plain render.
		return out[:start] + s + rest[end+1:]
	}
	return v
}

// outValue prints nil as nothing instead of text/template's "<no value>".
// A list or map is measured first: fmt builds its whole text before the
// output can refuse it.
func outValue(v any) (any, error) {
	switch v.(type) {
	case nil:
		return "", nil
	case string, bool, int, int64, uint64, float64:
		return v, nil
	}
	if err := funcs.CheckPrintable("output", v); err != nil {
		return nil, err
	}
	return v, nil
}

// fieldSep separates the field names of a chain inside the "where" string
// of a lookup call; field names are identifiers and never contain it.
const fieldSep = "\x1f"

// A lookup call's first argument is "line|label|fields": the line for
// messages, the name of base ("" for the variables, "$x", ...) and the
// chain's field names. Passing them as one constant string keeps the call
// free of variadic arguments, which text/template allocates for.
func splitWhere(where string) (line int, label, fields string) {
	lineText, rest, _ := strings.Cut(where, "|")
	line, _ = strconv.Atoi(lineText)
	if i := strings.LastIndex(rest, "|"); i >= 0 {
		return line, rest[:i], rest[i+1:]
	}
	return line, rest, ""
}

func fieldKeys(fields string) []any {
	if fields == "" {
		return nil
	}
	parts := strings.Split(fields, fieldSep)
	keys := make([]any, len(parts))
	for i, p := range parts {
		keys[i] = p
	}
	return keys
}

// templateField resolves a field chain (.a.b, $x.a.b, (pipe).a). text: the
// value is printed, so nil becomes "".
func templateField(lenient, text bool) func(where string, base any) (any, error) {
	return func(where string, base any) (any, error) {
		line, label, fields := splitWhere(where)
		v, err := lookupFields(label, base, fields, lenient)
		if err != nil {
			return nil, withLine(err, line)
		}
		if text {
			return outValue(v)
		}
		return v, nil
	}
}

// templateIndex resolves `index X k...` where X may itself be a chain.
func templateIndex(lenient bool) func(where string, base any, keys ...any) (any, error) {
	return func(where string, base any, keys ...any) (any, error) {
		line, label, fields := splitWhere(where)
		v, err := lookup(label, base, append(fieldKeys(fields), keys...), lenient)
		if err != nil {
			return nil, withLine(err, line)
		}
		return v, nil
	}
}

// lookupFields is lookup for string keys, without building a key list
// unless there is an error to report.
func lookupFields(label string, base any, fields string, lenient bool) (any, error) {
	cur := base
	rest := fields
	for n := 1; rest != ""; n++ {
		var key string
		key, rest, _ = strings.Cut(rest, fieldSep)
		var (
			next  any
			found bool
			err   error
		)
		if m, ok := cur.(map[string]any); ok {
			next, found = m[key]
		} else {
			next, found, err = step(cur, key)
		}
		if err != nil || !found {
			if err == nil && lenient {
				return nil, nil
			}
			keys := fieldKeys(fields)[:n]
			if err != nil {
				return nil, fmt.Errorf("%s: %w", formatPath(label, keys), err)
			}
			return nil, newMissing(label, cur, keys)
		}
		cur = next
	}
	return cur, nil
}

func withLine(err error, line int) error {
	var m *missingError
	if errors.As(err, &m) {
		return &templateMissing{missingError: m, line: line}
	}
	return err
}

type templateMissing struct {
	*missingError
	line int
}

func (e *Evaluator) templateError(src string, err error) error {
	var m *templateMissing
	if errors.As(err, &m) {
		return &Error{Kind: "template", Source: src, Missing: m.path, Err: err, line: m.line,
			hint: m.hint()}
	}
	return &Error{Kind: "template", Source: src, Err: err, detail: cleanTemplateError(err), hint: e.templateHint(src, err)}
}

// cleanTemplateError turns `template: tmpl:1:3: executing "tmpl" at <f>:
// error calling f: f: boom` into `line 1:3: f: boom`.
func cleanTemplateError(err error) string {
	msg := err.Error()
	msg = strings.TrimPrefix(msg, "template: "+templateName+":")
	if i := strings.Index(msg, `executing "`); i >= 0 {
		if j := strings.Index(msg[i:], ">: "); j >= 0 {
			msg = msg[:i] + msg[i+j+3:]
		}
	}
	// Our lookups and kubexm functions already name themselves.
	const calling = "error calling "
	if i := strings.Index(msg, calling); i >= 0 {
		name, rest, ok := strings.Cut(msg[i+len(calling):], ": ")
		if ok && (strings.HasPrefix(name, "kxm") || strings.HasPrefix(rest, name+": ")) {
			msg = msg[:i] + rest
		}
	}
	if msg != "" && msg[0] >= '0' && msg[0] <= '9' {
		msg = "line " + msg
	}
	return msg
}

// tmplRewriter replaces field chains in a parse tree with calls to the
// lookup functions, so that a missing key is an error naming its path (or
// nil where the user tolerates it), and wraps output actions.
type tmplRewriter struct {
	tree *parse.Tree
	text string // the whole source, for line numbers
}

func (r *tmplRewriter) list(l *parse.ListNode, single bool) {
	if l == nil {
		return
	}
	for _, n := range l.Nodes {
		r.node(n, single)
	}
}

func (r *tmplRewriter) node(n parse.Node, single bool) {
	switch n := n.(type) {
	case *parse.ActionNode:
		r.pipe(n.Pipe)
		if len(n.Pipe.Decl) > 0 {
			return
		}
		fn := fnOut
		if single {
			fn = fnCapture
		} else if last := n.Pipe.Cmds[len(n.Pipe.Cmds)-1]; isCall(last, fnField) {
			// The common `{{ .a.b }}` in text: one call instead of two.
			last.Args[0] = r.ident(fnFieldText, last.Position())
			return
		}
		n.Pipe.Cmds = append(n.Pipe.Cmds, &parse.CommandNode{
			NodeType: parse.NodeCommand, Pos: n.Pos,
			Args: []parse.Node{r.ident(fn, n.Pos)},
		})
	case *parse.IfNode:
		r.branch(&n.BranchNode)
	case *parse.RangeNode:
		r.branch(&n.BranchNode)
	case *parse.WithNode:
		r.branch(&n.BranchNode)
	case *parse.TemplateNode:
		r.pipe(n.Pipe)
	case *parse.ListNode:
		r.list(n, false)
	}
}

func (r *tmplRewriter) branch(b *parse.BranchNode) {
	r.pipe(b.Pipe)
	r.list(b.List, false)
	r.list(b.ElseList, false)
}

func (r *tmplRewriter) pipe(p *parse.PipeNode) {
	if p == nil {
		return
	}
	for i, c := range p.Cmds {
		// `.x | default "y"`: the value piped into a lenient function may be
		// missing too.
		pipedLenient := i+1 < len(p.Cmds) && isLenientCommand(p.Cmds[i+1])
		r.command(c, pipedLenient)
	}
}

func isCall(c *parse.CommandNode, fn string) bool {
	if len(c.Args) == 0 {
		return false
	}
	id, ok := c.Args[0].(*parse.IdentifierNode)
	return ok && id.Ident == fn
}

func isLenientCommand(c *parse.CommandNode) bool {
	if len(c.Args) == 0 {
		return false
	}
	id, ok := c.Args[0].(*parse.IdentifierNode)
	return ok && isLenientFunc(id.Ident)
}

func (r *tmplRewriter) command(c *parse.CommandNode, lenient bool) {
	if len(c.Args) == 0 {
		return
	}
	argsLenient := isLenientCommand(c)
	if id, ok := c.Args[0].(*parse.IdentifierNode); ok && id.Ident == "index" && len(c.Args) >= 2 {
		keys := make([]parse.Node, 0, len(c.Args)-2)
		for _, k := range c.Args[2:] {
			keys = append(keys, r.arg(k, false))
		}
		c.Args = r.lookupCall(c.Args[1], keys, lenient)
		return
	}
	if len(c.Args) == 1 {
		if isChain(c.Args[0]) {
			c.Args = r.lookupCall(c.Args[0], nil, lenient)
			return
		}
	}
	// A field chain followed by arguments is a method call on a Go value;
	// text/template handles it.
	if p, ok := c.Args[0].(*parse.PipeNode); ok {
		r.pipe(p)
	}
	for i := 1; i < len(c.Args); i++ {
		c.Args[i] = r.arg(c.Args[i], argsLenient)
	}
}

func isChain(n parse.Node) bool {
	switch n := n.(type) {
	case *parse.FieldNode, *parse.ChainNode:
		return true
	case *parse.VariableNode:
		return len(n.Ident) > 1
	}
	return false
}

// arg rewrites one argument; a chain becomes a parenthesised lookup call.
func (r *tmplRewriter) arg(n parse.Node, lenient bool) parse.Node {
	switch a := n.(type) {
	case *parse.PipeNode:
		r.pipe(a)
		return a
	}
	if !isChain(n) {
		return n
	}
	pos := n.Position()
	return &parse.PipeNode{
		NodeType: parse.NodePipe, Pos: pos, Line: r.line(pos),
		Cmds: []*parse.CommandNode{{
			NodeType: parse.NodeCommand, Pos: pos, Args: r.lookupCall(n, nil, lenient),
		}},
	}
}

// lookupCall returns the arguments of a command calling the lookup function
// on chain (a field chain or any value), followed by extra keys.
func (r *tmplRewriter) lookupCall(chain parse.Node, extra []parse.Node, lenient bool) []parse.Node {
	pos := chain.Position()
	var (
		label string
		base  parse.Node
		keys  []string
	)
	switch n := chain.(type) {
	case *parse.FieldNode:
		base = &parse.DotNode{NodeType: parse.NodeDot, Pos: pos}
		keys = n.Ident
	case *parse.VariableNode:
		name := n.Ident[0]
		if name != "$" {
			label = name
		}
		base = &parse.VariableNode{NodeType: parse.NodeVariable, Pos: pos, Ident: []string{name}}
		keys = n.Ident[1:]
	case *parse.ChainNode:
		label = n.Node.String()
		base = r.arg(n.Node, false)
		keys = n.Field
	default:
		label = n.String()
		base = r.arg(n, false)
	}
	where := strconv.Itoa(r.line(pos)) + "|" + label + "|" + strings.Join(keys, fieldSep)
	fn := fnField
	switch {
	case len(extra) > 0 && lenient:
		fn = fnIndexOr
	case len(extra) > 0:
		fn = fnIndex
	case lenient:
		fn = fnFieldOr
	}
	args := []parse.Node{r.ident(fn, pos), r.str(where, pos), base}
	return append(args, extra...)
}

func (r *tmplRewriter) ident(name string, pos parse.Pos) *parse.IdentifierNode {
	return parse.NewIdentifier(name).SetTree(r.tree).SetPos(pos)
}

func (r *tmplRewriter) str(s string, pos parse.Pos) *parse.StringNode {
	return &parse.StringNode{NodeType: parse.NodeString, Pos: pos, Quoted: strconv.Quote(s), Text: s}
}

func (r *tmplRewriter) line(pos parse.Pos) int {
	p := int(pos)
	if p > len(r.text) {
		p = len(r.text)
	}
	return 1 + strings.Count(r.text[:p], "\n")
}
