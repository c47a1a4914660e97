package eval

import (
	"regexp"
	"slices"
	"strings"
	"text/template"
	"text/template/parse"
)

// Refs returns the names of the variables a template reads: the first name
// of each field chain on the variables (`.spec.network` reads spec), and of
// `$.name` anywhere. Inside range and with the dot is something else, so
// `.name` there reads no variable. The result orders the rendering of
// variables that read each other; a template that does not parse reads
// nothing (its error is reported where it is checked).
func (e *Evaluator) Refs(s string) []string {
	w, ok := e.deps(s)
	if !ok {
		return nil
	}
	return w.refs
}

// volatileFunc matches the functions whose result is not a function of their
// arguments: the clock (now, ago, the date and duration helpers), randomness
// (rand*, uuid, shuffle, the gen* key and certificate makers, salted hashes
// and encryption). A family name errs on the side of volatile.
var volatileFunc = regexp.MustCompile(`(?i)rand|uuid|shuffle|^gen|now|date|ago|duration|crypt|htpasswd`)

// Closed reports whether a template's value depends on nothing but the
// variables Refs names: it does not pass the whole variable map on (a bare
// `.` or `$` where the dot is the variables) and calls no volatile function.
// Rendering a closed template twice against equal values of those names
// gives equal results, so a rendering may be reused; a template that does
// not parse is not closed.
func (e *Evaluator) Closed(s string) bool {
	w, ok := e.deps(s)
	return ok && !w.open
}

// depWalk is what a walk of a template's parse trees found.
type depWalk struct {
	refs []string // as Refs
	open bool     // not Closed
}

// deps walks s's templates; ok is false when s does not parse.
func (e *Evaluator) deps(s string) (w depWalk, ok bool) {
	if !strings.Contains(s, "{{") {
		return w, true
	}
	t, err := template.New(templateName).Funcs(e.userFuncs).Parse(s)
	if err != nil {
		return w, false
	}
	for _, sub := range t.Templates() {
		if sub.Tree != nil {
			// A {{ define }}d template gets whatever dot it is called with;
			// taking it as the variables errs on the side of more order.
			w.walk(sub.Tree.Root, true)
		}
	}
	return w, true
}

func (w *depWalk) walk(n parse.Node, rootDot bool) {
	switch n := n.(type) {
	case *parse.ListNode:
		if n == nil {
			return
		}
		for _, c := range n.Nodes {
			w.walk(c, rootDot)
		}
	case *parse.ActionNode:
		w.walk(n.Pipe, rootDot)
	case *parse.PipeNode:
		if n == nil {
			return
		}
		for _, c := range n.Cmds {
			w.walk(c, rootDot)
		}
	case *parse.CommandNode:
		for _, a := range n.Args {
			w.walk(a, rootDot)
		}
	case *parse.FieldNode:
		if rootDot && len(n.Ident) > 0 {
			w.addRef(n.Ident[0])
		}
	case *parse.VariableNode:
		switch {
		case len(n.Ident) > 1 && n.Ident[0] == "$":
			w.addRef(n.Ident[1])
		case len(n.Ident) == 1 && n.Ident[0] == "$":
			w.open = true
		}
	case *parse.DotNode:
		w.open = w.open || rootDot
	case *parse.IdentifierNode:
		w.open = w.open || volatileFunc.MatchString(n.Ident)
	case *parse.ChainNode:
		w.walk(n.Node, rootDot)
	case *parse.IfNode:
		w.walk(n.Pipe, rootDot)
		w.walk(n.List, rootDot)
		w.walk(n.ElseList, rootDot)
	case *parse.RangeNode:
		w.walk(n.Pipe, rootDot)
		w.walk(n.List, false)
		w.walk(n.ElseList, rootDot)
	case *parse.WithNode:
		w.walk(n.Pipe, rootDot)
		w.walk(n.List, false)
		w.walk(n.ElseList, rootDot)
	case *parse.TemplateNode:
		w.walk(n.Pipe, rootDot)
	}
}

func (w *depWalk) addRef(name string) {
	if !slices.Contains(w.refs, name) {
		w.refs = append(w.refs, name)
	}
}
