package eval

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/expr-lang/expr"
	"github.com/expr-lang/expr/ast"
	"github.com/expr-lang/expr/builtin"
	"github.com/expr-lang/expr/checker"
	"github.com/expr-lang/expr/compiler"
	"github.com/expr-lang/expr/conf"
	"github.com/expr-lang/expr/file"
	"github.com/expr-lang/expr/optimizer"
	"github.com/expr-lang/expr/parser"
	"github.com/expr-lang/expr/vm"

	"github.com/mensylisir/kubexm/engine/eval/funcs"
)

// Functions the rewritten expressions call. Their names start with "$" and
// are not user functions (isUserExprFunc), so a user cannot call them directly.
const (
	exGet     = "$get"
	exGetOr   = "$getOr"
	exDefined = "$defined"
	exEnv     = "$env" // expr-lang's name for the whole environment
)

// userExprFuncNames lists the kubexm functions an expression may call,
// besides expr-lang's builtins: the library's (engine/eval/funcs) and
// defined, which reads the variables.
func userExprFuncNames() []string {
	return append([]string{"defined"}, slices.Sorted(maps.Keys(funcs.Expr()))...)
}

func isUserExprFunc(name string) bool {
	return slices.Contains(userExprFuncNames(), name)
}

type compiledExpr struct {
	prog *vm.Program
	err  error
}

func exprFunctions() []expr.Option {
	get := func(lenient bool) func(...any) (any, error) {
		return func(params ...any) (any, error) {
			label, _ := params[0].(string)
			return lookup(label, params[1], params[2:], lenient)
		}
	}
	opts := []expr.Option{
		expr.Function(exGet, get(false)),
		expr.Function(exGetOr, get(true)),
		expr.Function(exDefined, definedFunc),
	}
	for name, f := range funcs.Expr() {
		opts = append(opts, expr.Function(name, f))
	}
	return opts
}

// definedFunc implements defined("a.b.c") and defined("hostvars", host,
// "address"); the rewrite passes the environment first.
func definedFunc(params ...any) (any, error) {
	if len(params) < 2 {
		return nil, errors.New("defined: want a path such as defined(\"spec.etcd.dataDir\")")
	}
	env, args := params[0], params[1:]
	if len(args) == 1 {
		s, ok := args[0].(string)
		if !ok {
			return nil, fmt.Errorf("defined: the path must be a string, got %s", funcs.TypeName(args[0]))
		}
		if s == "" {
			return nil, errors.New("defined: empty path")
		}
		parts := strings.Split(s, ".")
		segs := make([]any, len(parts))
		for i, p := range parts {
			segs[i] = p
		}
		return pathDefined(env, segs), nil
	}
	return pathDefined(env, args), nil
}

// Eval evaluates an expr-lang expression against vars.
func (e *Evaluator) Eval(expression string, vars map[string]any) (any, error) {
	ce := e.expr(expression)
	if ce.err != nil {
		return nil, ce.err
	}
	m, _ := e.vms.Get().(*vm.VM)
	if m == nil {
		m = new(vm.VM)
	}
	out, err := m.Run(ce.prog, vars)
	e.vms.Put(m)
	if err != nil {
		return nil, exprError(expression, err)
	}
	return out, nil
}

// EvalBool requires a bool result (error otherwise, naming the type).
func (e *Evaluator) EvalBool(expression string, vars map[string]any) (bool, error) {
	v, err := e.Eval(expression, vars)
	if err != nil {
		return false, err
	}
	b, ok := v.(bool)
	if !ok {
		return false, &Error{
			Kind: "expression", Source: expression,
			Err: fmt.Errorf("result is %s %s, not bool", funcs.TypeName(v), shorten(valueText(v))),
		}
	}
	return b, nil
}

func valueText(v any) string {
	if s, ok := v.(string); ok {
		return strconv.Quote(s)
	}
	return fmt.Sprint(v)
}

// CheckExpr compiles without evaluating (for load-time errors and
// --syntax-check).
func (e *Evaluator) CheckExpr(expression string) error {
	return e.expr(expression).err
}

func (e *Evaluator) expr(src string) *compiledExpr {
	if ce, ok := e.exprs.get(src); ok {
		return ce
	}
	ce := e.compileExpr(src)
	e.exprs.put(src, ce)
	return ce
}

// compileExpr is expr.Compile with our rewrite between parsing and type
// checking. Programs are compiled without an environment type, so one
// program runs against every host's variables.
func (e *Evaluator) compileExpr(src string) (ce *compiledExpr) {
	defer func() {
		// expr-lang is a third-party parser fed with user text; a bug in it
		// must fail this expression, not the whole run.
		if r := recover(); r != nil {
			ce = &compiledExpr{err: exprError(src, fmt.Errorf("cannot compile: %v", r))}
		}
	}()
	config := conf.CreateNew()
	for _, op := range e.exprFuncs {
		op(config)
	}
	tree, err := parser.ParseWithConfig(src, config)
	if err != nil {
		return &compiledExpr{err: exprError(src, err)}
	}
	rw := &exprRewriter{}
	rw.walk(&tree.Node, false)
	if rw.err != nil {
		return &compiledExpr{err: exprError(src, rw.err.Bind(tree.Source))}
	}
	if _, err := checker.Check(tree, config); err != nil {
		return &compiledExpr{err: exprError(src, err)}
	}
	if err := optimizer.Optimize(&tree.Node, config); err != nil {
		var fe *file.Error
		if errors.As(err, &fe) {
			err = fe.Bind(tree.Source)
		}
		return &compiledExpr{err: exprError(src, err)}
	}
	prog, err := compiler.Compile(tree, config)
	if err != nil {
		return &compiledExpr{err: exprError(src, err)}
	}
	return &compiledExpr{prog: prog}
}

func exprError(src string, err error) error {
	var m *missingError
	if errors.As(err, &m) {
		return &Error{Kind: "expression", Source: src, Missing: m.path, Err: err, hint: m.hint()}
	}
	detail := err.Error()
	var fe *file.Error
	if errors.As(err, &fe) {
		// The default message adds a multi-line source snippet; the source
		// is already in our message.
		detail = fe.Message
		if fe.Line > 0 {
			detail = fmt.Sprintf("%s (%d:%d)", fe.Message, fe.Line, fe.Column+1)
		}
	}
	return &Error{Kind: "expression", Source: src, Err: err, detail: detail, hint: exprHint(src)}
}

// exprHint recognises Ansible and Jinja habits in a failed expression.
func exprHint(src string) string {
	squeezed := strings.Join(strings.Fields(src), " ")
	switch {
	case strings.Contains(src, "{{"):
		return " (hint: when, changed_when, failed_when and until are expressions: write them without {{ }})"
	case strings.Contains(squeezed, " is defined"), strings.Contains(squeezed, " is not defined"),
		strings.Contains(squeezed, " is undefined"):
		return ` (hint: write defined("x") or not defined("x") instead of "x is defined")`
	case strings.Contains(squeezed, "| default(") || strings.Contains(squeezed, "|default("):
		return ` (hint: write x ?? value instead of x | default(value))`
	case strings.Contains(squeezed, "| bool") || strings.Contains(squeezed, "|bool"):
		return " (hint: there is no bool filter; compare the value: x == true, x == \"yes\")"
	case strings.Contains(squeezed, "| length") || strings.Contains(squeezed, "|length"):
		return " (hint: write len(x) instead of x | length)"
	case strings.Contains(squeezed, "query(") || strings.Contains(squeezed, "lookup("):
		return lookupHint
	}
	return ""
}

// exprRewriter turns every variable reference into a lookup call, so that
// an undefined name or key is an error naming its path instead of expr's
// silent nil. References on the left of ?? and in ?. chains use the lenient
// lookup (nil when missing).
type exprRewriter struct {
	bound []string // names declared with let, innermost last
	err   *file.Error
}

func (r *exprRewriter) fail(n ast.Node, format string, args ...any) {
	if r.err == nil {
		r.err = &file.Error{Location: n.Location(), Message: fmt.Sprintf(format, args...)}
	}
}

func (r *exprRewriter) isBound(name string) bool {
	for i := len(r.bound) - 1; i >= 0; i-- {
		if r.bound[i] == name {
			return true
		}
	}
	return false
}

func (r *exprRewriter) walk(n *ast.Node, lenient bool) {
	switch x := (*n).(type) {
	case *ast.IdentifierNode:
		if x.Value == exEnv || r.isBound(x.Value) {
			return
		}
		r.replace(n, lenient, "", envNode(), []ast.Node{&ast.StringNode{Value: x.Value}})
	case *ast.MemberNode:
		r.member(n, lenient)
	case *ast.ChainNode:
		r.walk(&x.Node, true)
		if call, ok := x.Node.(*ast.CallNode); ok {
			if id, ok := call.Callee.(*ast.IdentifierNode); ok && id.Value == exGetOr {
				// The lookup absorbed every ?. of the chain.
				*n = x.Node
			}
		}
	case *ast.BinaryNode:
		if x.Operator == "??" {
			r.walk(&x.Left, true)
			r.walk(&x.Right, lenient)
			return
		}
		r.walk(&x.Left, false)
		r.walk(&x.Right, false)
	case *ast.UnaryNode:
		r.walk(&x.Node, false)
	case *ast.CallNode:
		r.call(x)
	case *ast.BuiltinNode:
		for i := range x.Arguments {
			r.walk(&x.Arguments[i], false)
		}
	case *ast.PredicateNode:
		r.walk(&x.Node, false)
	case *ast.SliceNode:
		r.walk(&x.Node, false)
		if x.From != nil {
			r.walk(&x.From, false)
		}
		if x.To != nil {
			r.walk(&x.To, false)
		}
	case *ast.ConditionalNode:
		r.walk(&x.Cond, false)
		r.walk(&x.Exp1, false)
		r.walk(&x.Exp2, false)
	case *ast.VariableDeclaratorNode:
		r.walk(&x.Value, false)
		r.bound = append(r.bound, x.Name)
		r.walk(&x.Expr, false)
		r.bound = r.bound[:len(r.bound)-1]
	case *ast.SequenceNode:
		for i := range x.Nodes {
			r.walk(&x.Nodes[i], false)
		}
	case *ast.ArrayNode:
		for i := range x.Nodes {
			r.walk(&x.Nodes[i], false)
		}
	case *ast.MapNode:
		for i := range x.Pairs {
			r.walk(&x.Pairs[i], false)
		}
	case *ast.PairNode:
		r.walk(&x.Key, false)
		r.walk(&x.Value, false)
	}
}

func (r *exprRewriter) call(x *ast.CallNode) {
	switch callee := x.Callee.(type) {
	case *ast.IdentifierNode:
		switch {
		case callee.Value == "defined":
			x.Callee = &ast.IdentifierNode{Value: exDefined}
			x.Callee.SetLocation(callee.Location())
			x.Arguments = append([]ast.Node{envNode()}, x.Arguments...)
		case !isUserExprFunc(callee.Value):
			r.fail(callee, "unknown function %s%s", callee.Value, didYouMean(closestFunc(callee.Value)))
			return
		}
	case *ast.MemberNode:
		// A method of a Go value; the receiver is an ordinary reference.
		r.walk(&callee.Node, false)
	default:
		r.walk(&x.Callee, false)
	}
	for i := range x.Arguments {
		r.walk(&x.Arguments[i], false)
	}
}

// member rewrites a whole chain a.b[c].d into one lookup call.
func (r *exprRewriter) member(n *ast.Node, lenient bool) {
	var props []ast.Node
	cur := *n
	for {
		m, ok := cur.(*ast.MemberNode)
		if !ok || m.Method {
			break
		}
		lenient = lenient || m.Optional
		props = append(props, m.Property)
		cur = m.Node
	}
	for i, j := 0, len(props)-1; i < j; i, j = i+1, j-1 {
		props[i], props[j] = props[j], props[i]
	}
	for i := range props {
		r.walk(&props[i], false)
	}
	var (
		label string
		base  ast.Node
	)
	switch root := cur.(type) {
	case *ast.IdentifierNode:
		switch {
		case root.Value == exEnv:
			base = root
		case r.isBound(root.Value):
			label, base = root.Value, root
		default:
			base = envNode()
			props = append([]ast.Node{&ast.StringNode{Value: root.Value}}, props...)
		}
	case *ast.PointerNode:
		label, base = "#"+root.Name, root
	default:
		label = root.String()
		r.walk(&cur, false)
		base = cur
	}
	r.replace(n, lenient, label, base, props)
}

func (r *exprRewriter) replace(n *ast.Node, lenient bool, label string, base ast.Node, keys []ast.Node) {
	fn := exGet
	if lenient {
		fn = exGetOr
	}
	loc := (*n).Location()
	args := append([]ast.Node{&ast.StringNode{Value: label}, base}, keys...)
	for _, a := range args {
		if a.Location() == (file.Location{}) {
			a.SetLocation(loc)
		}
	}
	callee := &ast.IdentifierNode{Value: fn}
	callee.SetLocation(loc)
	call := &ast.CallNode{Callee: callee, Arguments: args}
	call.SetLocation(loc)
	*n = call
}

// closestFunc suggests a function for a mistyped name.
func closestFunc(name string) string {
	names := map[string]any{}
	for _, f := range builtin.Builtins {
		names[f.Name] = nil
	}
	for _, f := range userExprFuncNames() {
		names[f] = nil
	}
	return closestKey(names, name)
}

func envNode() ast.Node {
	return &ast.IdentifierNode{Value: exEnv}
}
