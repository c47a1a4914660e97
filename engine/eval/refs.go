package eval

import (
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
