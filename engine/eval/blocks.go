package eval

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"text/template"
	"text/template/parse"

	"github.com/mensylisir/kubexm/engine/eval/funcs"
)

// Named blocks: a template file names the parts a site may change
// ({{ block "name" . }}...{{ end }}, or {{ define "name" }} called with
// {{ template }} or include), and an overlay file holding only
// {{ define "name" }}...{{ end }} replaces those parts one at a time,
// keeping the rest of the file the role ships (text/template's own
// redefinition, as Hugo's and Helm's base templates are overridden).

// Block is a named template of a template text and the line it starts on.
type Block struct {
	Name string
	Line int
}

// BlockFile is an overlay file of blocks: its text and its name for
// messages.
type BlockFile struct {
	File, Text string
}

// TemplateBlocks parses a template's text, without checking the functions
// it calls, for its named blocks in the order they appear; blocksOnly says
// whether it has no text of its own outside {{ define }} (white space and
// comments aside): what an overlay file that replaces blocks holds.
func TemplateBlocks(text string) (blocks []Block, blocksOnly bool, err error) {
	tr := parse.New(templateName)
	tr.Mode = parse.SkipFuncCheck
	set := map[string]*parse.Tree{}
	if _, err := tr.Parse(text, "", "", set); err != nil {
		return nil, false, err
	}
	main := set[templateName]
	for name := range set {
		if name != templateName {
			blocks = append(blocks, Block{Name: name, Line: blockLine(text, name, set[name])})
		}
	}
	// By line, then name: blocks on one line would otherwise come in the
	// map's order.
	slices.SortFunc(blocks, func(a, b Block) int {
		if a.Line != b.Line {
			return a.Line - b.Line
		}
		return strings.Compare(a.Name, b.Name)
	})
	return blocks, len(blocks) > 0 && (main == nil || parse.IsEmptyTree(main.Root)), nil
}

// blockLine is the line of the {{ define }} or {{ block }} that names the
// block, else of its body.
func blockLine(text, name string, t *parse.Tree) int {
	re := regexp.MustCompile(`\{\{-?\s*(?:define|block)\s+` + regexp.QuoteMeta(`"`+name+`"`))
	if loc := re.FindStringIndex(text); loc != nil {
		return 1 + strings.Count(text[:loc[0]], "\n")
	}
	if t != nil && t.Root != nil {
		return 1 + strings.Count(text[:min(int(t.Root.Pos), len(text))], "\n")
	}
	return 0
}

// BlockNames lists the names of blocks, for messages.
func BlockNames(blocks []Block) string {
	if len(blocks) == 0 {
		return "it names no block"
	}
	names := make([]string, len(blocks))
	for i, b := range blocks {
		names[i] = b.Name
	}
	return "its blocks are " + strings.Join(names, ", ")
}

// RenderBlocks renders a template file's text with the blocks the files
// replace, each file over the ones before it (the last is the overlay of
// highest precedence). A file that names a block the template does not
// have is an error: the replacement would be silently ignored.
func (e *Evaluator) RenderBlocks(base string, files []BlockFile, vars map[string]any) (string, error) {
	if len(files) == 0 || !strings.Contains(base, "{{") {
		return e.RenderString(base, vars)
	}
	ct := e.template(base)
	if ct.err != nil {
		return "", ct.err
	}
	t, err := ct.tmpl.Clone()
	if err != nil {
		return "", err
	}
	known, _, _ := TemplateBlocks(base)
	for _, f := range files {
		if err := e.replaceBlocks(t, f, known); err != nil {
			return "", err
		}
	}
	if err := checkRecursion(t); err != nil {
		return "", &Error{Kind: "template", Source: base, Err: err}
	}
	t.Funcs(template.FuncMap{"include": includeFunc(t)})
	var b funcs.Writer
	b.Grow(len(base))
	if err := t.Execute(&b, vars); err != nil {
		return "", e.templateError(base, err)
	}
	if !ct.single {
		return b.String(), nil
	}
	switch v := e.takeCapture(b.String()).(type) {
	case string:
		return v, nil
	case nil:
		return "", nil
	default:
		return fmt.Sprint(v), nil
	}
}

// replaceBlocks puts the blocks of one overlay file into t.
func (e *Evaluator) replaceBlocks(t *template.Template, f BlockFile, known []Block) error {
	blocks, only, err := TemplateBlocks(f.Text)
	if err != nil {
		return fmt.Errorf("%s: %w", f.File, err)
	}
	if !only {
		return fmt.Errorf("%s: a file of blocks holds only {{ define \"name\" }}...{{ end }}", f.File)
	}
	ot := e.template(f.Text)
	if ot.err != nil {
		return fmt.Errorf("%s: %w", f.File, ot.err)
	}
	for _, b := range blocks {
		if !slices.ContainsFunc(known, func(k Block) bool { return k.Name == b.Name }) {
			return fmt.Errorf("%s:%d: block %q is not in the template; %s", f.File, b.Line, b.Name, BlockNames(known))
		}
		if sub := ot.tmpl.Lookup(b.Name); sub != nil && sub.Tree != nil {
			if _, err := t.AddParseTree(b.Name, sub.Tree); err != nil {
				return fmt.Errorf("%s:%d: %w", f.File, b.Line, err)
			}
		}
	}
	return nil
}

// includeFunc is include for the templates of t: the text a named template
// renders to, so that a block's output can be a value
// ({{ include "runtime" . | fromYaml }}), as Helm's include.
func includeFunc(t *template.Template) func(name string, data any) (string, error) {
	return func(name string, data any) (string, error) {
		var b funcs.Writer
		if err := t.ExecuteTemplate(&b, name, data); err != nil {
			return "", err
		}
		return b.String(), nil
	}
}
