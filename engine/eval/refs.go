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
	if !strings.Contains(s, "{{") {
		return nil
	}
	t, err := template.New(templateName).Funcs(e.userFuncs).Parse(s)
	if err != nil {
		return nil
	}
	var refs []string
	for _, sub := range t.Templates() {
		if sub.Tree != nil {
			// A {{ define }}d template gets whatever dot it is called with;
			// taking it as the variables errs on the side of more order.
			refs = refsIn(sub.Tree.Root, true, refs)
		}
	}
	return refs
}

func addRef(refs []string, name string) []string {
	if !slices.Contains(refs, name) {
		refs = append(refs, name)
	}
	return refs
}

func refsIn(n parse.Node, rootDot bool, refs []string) []string {
	switch n := n.(type) {
	case *parse.ListNode:
		if n == nil {
			return refs
		}
		for _, c := range n.Nodes {
			refs = refsIn(c, rootDot, refs)
		}
	case *parse.ActionNode:
		refs = refsIn(n.Pipe, rootDot, refs)
	case *parse.PipeNode:
		if n == nil {
			return refs
		}
		for _, c := range n.Cmds {
			refs = refsIn(c, rootDot, refs)
		}
	case *parse.CommandNode:
		for _, a := range n.Args {
			refs = refsIn(a, rootDot, refs)
		}
	case *parse.FieldNode:
		if rootDot && len(n.Ident) > 0 {
			refs = addRef(refs, n.Ident[0])
		}
	case *parse.VariableNode:
		if len(n.Ident) > 1 && n.Ident[0] == "$" {
			refs = addRef(refs, n.Ident[1])
		}
	case *parse.ChainNode:
		refs = refsIn(n.Node, rootDot, refs)
	case *parse.IfNode:
		refs = refsIn(n.Pipe, rootDot, refs)
		refs = refsIn(n.List, rootDot, refs)
		refs = refsIn(n.ElseList, rootDot, refs)
	case *parse.RangeNode:
		refs = refsIn(n.Pipe, rootDot, refs)
		refs = refsIn(n.List, false, refs)
		refs = refsIn(n.ElseList, rootDot, refs)
	case *parse.WithNode:
		refs = refsIn(n.Pipe, rootDot, refs)
		refs = refsIn(n.List, false, refs)
		refs = refsIn(n.ElseList, rootDot, refs)
	case *parse.TemplateNode:
		refs = refsIn(n.Pipe, rootDot, refs)
	}
	return refs
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
	if !strings.Contains(s, "{{") {
		return true
	}
	t, err := template.New(templateName).Funcs(e.userFuncs).Parse(s)
	if err != nil {
		return false
	}
	for _, sub := range t.Templates() {
		if sub.Tree != nil && !closedIn(sub.Tree.Root, true) {
			return false
		}
	}
	return true
}

func closedIn(n parse.Node, rootDot bool) bool {
	switch n := n.(type) {
	case *parse.ListNode:
		if n == nil {
			return true
		}
		for _, c := range n.Nodes {
			if !closedIn(c, rootDot) {
				return false
			}
		}
	case *parse.ActionNode:
		return closedIn(n.Pipe, rootDot)
	case *parse.PipeNode:
		if n == nil {
			return true
		}
		for _, c := range n.Cmds {
			if !closedIn(c, rootDot) {
				return false
			}
		}
	case *parse.CommandNode:
		for _, a := range n.Args {
			if !closedIn(a, rootDot) {
				return false
			}
		}
	case *parse.DotNode:
		return !rootDot
	case *parse.VariableNode:
		return len(n.Ident) != 1 || n.Ident[0] != "$"
	case *parse.IdentifierNode:
		return !volatileFunc.MatchString(n.Ident)
	case *parse.ChainNode:
		return closedIn(n.Node, rootDot)
	case *parse.IfNode:
		return closedIn(n.Pipe, rootDot) && closedIn(n.List, rootDot) && closedIn(n.ElseList, rootDot)
	case *parse.RangeNode:
		return closedIn(n.Pipe, rootDot) && closedIn(n.List, false) && closedIn(n.ElseList, rootDot)
	case *parse.WithNode:
		return closedIn(n.Pipe, rootDot) && closedIn(n.List, false) && closedIn(n.ElseList, rootDot)
	case *parse.TemplateNode:
		return closedIn(n.Pipe, rootDot)
	}
	return true
}
