package files

import (
	"context"
	"fmt"
	"regexp"
	"strings"

	"github.com/mensylisir/kubexm/builtins/onhost"
	"github.com/mensylisir/kubexm/engine/step"
)

// textFileArgs are shared by lineinfile and blockinfile.
func textFileArgs() []step.Arg {
	return append([]step.Arg{
		{Name: "path", Type: step.String, Required: true, Aliases: []string{"dest", "name"}, Doc: "File on the host."},
		{Name: "state", Type: step.String, Default: "present", Choices: []string{"present", "absent"}, Doc: "Whether the text should be there."},
		{Name: "insertafter", Type: step.String, Doc: "`EOF` (default) or a regular expression: insert after the last matching line (EOF when none matches)."},
		{Name: "insertbefore", Type: step.String, Doc: "`BOF` or a regular expression: insert before the last matching line (EOF when none matches)."},
		{Name: "create", Type: step.Bool, Default: false, Doc: "Create the file when it is missing (otherwise a missing file is an error for state: present)."},
		{Name: "backup", Type: step.Bool, Default: false, Doc: "Keep the replaced file as path.<timestamp>~."},
	}, onhost.AttrArgs()...)
}

// EditFile applies edit to a text file on the host and writes the result
// through writeContent (check mode, diff, attributes).
func EditFile(ctx context.Context, env *step.Env, args step.Args, edit func(lines []string) ([]string, error)) (step.Result, error) {
	p := args.String("path")
	old, exists, err := onhost.ReadFile(ctx, env, p)
	if err != nil {
		return step.Result{}, err
	}
	if !exists {
		if args.String("state") == "absent" {
			return step.Result{Data: map[string]any{"path": p}}, nil
		}
		if !args.Bool("create") {
			return step.Result{}, fmt.Errorf("%s: %s does not exist (create: true creates it)", env.Target.Host(), p)
		}
	}
	lines := onhost.SplitLines(old)
	out, err := edit(lines)
	if err != nil {
		return step.Result{}, err
	}
	content := ""
	if len(out) > 0 {
		content = strings.Join(out, "\n") + "\n"
	}
	if exists && equalLines(lines, out) {
		// Keep the file byte for byte (a missing final newline included).
		content = string(old)
	}
	return onhost.WriteContent(ctx, env, p, []byte(content), onhost.WriteOpts{Attrs: onhost.AttrsFrom(args), Backup: args.Bool("backup")})
}

func equalLines(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// insertAt returns the index where new text goes according to insertafter
// and insertbefore.
func insertAt(lines []string, after, before string) (int, error) {
	switch {
	case before == "BOF":
		return 0, nil
	case before != "":
		re, err := regexp.Compile(before)
		if err != nil {
			return 0, fmt.Errorf("insertbefore: %w", err)
		}
		for i := len(lines) - 1; i >= 0; i-- {
			if re.MatchString(lines[i]) {
				return i, nil
			}
		}
	case after != "" && after != "EOF":
		re, err := regexp.Compile(after)
		if err != nil {
			return 0, fmt.Errorf("insertafter: %w", err)
		}
		for i := len(lines) - 1; i >= 0; i-- {
			if re.MatchString(lines[i]) {
				return i + 1, nil
			}
		}
	}
	return len(lines), nil
}

func insertLines(lines []string, at int, add ...string) []string {
	out := make([]string, 0, len(lines)+len(add))
	out = append(out, lines[:at]...)
	out = append(out, add...)
	return append(out, lines[at:]...)
}

// LineInFile is the lineinfile builtin: one line of a text file present or
// absent.
type LineInFile struct{}

func (LineInFile) Spec() step.Spec {
	return step.Spec{
		Name:    "lineinfile",
		Summary: "Ensure one line is in a text file (or is not), replacing the line a regexp matches.",
		Doc: "With `regexp`, the last matching line is replaced by `line`; when none matches, `line` is inserted " +
			"(unless it is already there). `state: absent` removes every line matching `regexp` (or equal to `line`).",
		Args: append([]step.Arg{
			{Name: "line", Type: step.String, Doc: "The line, without its newline. Required for state: present."},
			{Name: "regexp", Type: step.String, Aliases: []string{"regex"}, Doc: "Regular expression (Go syntax) selecting the line to replace or remove."},
		}, textFileArgs()...),
		Examples: []string{"lineinfile:\n  path: /etc/fstab\n  regexp: '^([^#].*\\sswap\\s.*)$'\n  state: absent",
			"lineinfile:\n  path: /etc/hosts\n  regexp: '\\s{{ .inventory_hostname }}$'\n  line: \"{{ .ip }} {{ .inventory_hostname }}\""},
	}
}

func (LineInFile) Run(ctx context.Context, env *step.Env, args step.Args) (step.Result, error) {
	line := args.String("line")
	var re *regexp.Regexp
	if args.Has("regexp") {
		var err error
		if re, err = regexp.Compile(args.String("regexp")); err != nil {
			return step.Result{}, fmt.Errorf("lineinfile: regexp: %w", err)
		}
	}
	absent := args.String("state") == "absent"
	if !absent && !args.Has("line") {
		return step.Result{}, fmt.Errorf("lineinfile: line is required for state: present")
	}
	if absent && re == nil && !args.Has("line") {
		return step.Result{}, fmt.Errorf("lineinfile: state absent needs regexp or line")
	}
	if strings.Contains(line, "\n") {
		return step.Result{}, fmt.Errorf("lineinfile: line must be one line; use blockinfile for several")
	}
	return EditFile(ctx, env, args, func(lines []string) ([]string, error) {
		return EditLine(lines, line, re, absent, args.String("insertafter"), args.String("insertbefore"))
	})
}

// EditLine puts line in lines (replacing the last match of re) or removes
// the matches when absent.
func EditLine(lines []string, line string, re *regexp.Regexp, absent bool, after, before string) ([]string, error) {
	matches := func(l string) bool {
		if re != nil {
			return re.MatchString(l)
		}
		return l == line
	}
	if absent {
		out := lines[:0:0]
		for _, l := range lines {
			if !matches(l) {
				out = append(out, l)
			}
		}
		return out, nil
	}
	for i := len(lines) - 1; i >= 0; i-- {
		if matches(lines[i]) {
			out := append([]string(nil), lines...)
			out[i] = line
			return out, nil
		}
	}
	for _, l := range lines {
		if l == line {
			return lines, nil
		}
	}
	at, err := insertAt(lines, after, before)
	if err != nil {
		return nil, err
	}
	return insertLines(lines, at, line), nil
}

type blockinfileBuiltin struct{}

func (blockinfileBuiltin) Spec() step.Spec {
	return step.Spec{
		Name:    "blockinfile",
		Summary: "Ensure a block of lines between marker comments is in a text file (or is not).",
		Doc: "The block is delimited by `marker` with `{mark}` replaced by `marker_begin` and `marker_end`, so a " +
			"second run finds and replaces it. `state: absent` (or an empty block) removes the block and its " +
			"markers and nothing else. Use a distinct marker per block when a file holds several.",
		Args: append([]step.Arg{
			{Name: "block", Type: step.String, Default: "", Aliases: []string{"content"}, Doc: "The lines to keep between the markers."},
			{Name: "marker", Type: step.String, Default: "# {mark} kubexm managed block", Doc: "Marker line template; {mark} becomes marker_begin or marker_end."},
			{Name: "marker_begin", Type: step.String, Default: "BEGIN", Doc: "Replaces {mark} in the first marker."},
			{Name: "marker_end", Type: step.String, Default: "END", Doc: "Replaces {mark} in the last marker."},
		}, textFileArgs()...),
		Examples: []string{"blockinfile:\n  path: /etc/hosts\n  block: |\n    10.0.0.11 node1\n    10.0.0.12 node2"},
	}
}

func (blockinfileBuiltin) Run(ctx context.Context, env *step.Env, args step.Args) (step.Result, error) {
	marker := args.String("marker")
	if !strings.Contains(marker, "{mark}") {
		return step.Result{}, fmt.Errorf("blockinfile: marker %q must contain {mark}", marker)
	}
	mb, me := args.String("marker_begin"), args.String("marker_end")
	begin, end := strings.ReplaceAll(marker, "{mark}", mb), strings.ReplaceAll(marker, "{mark}", me)
	if begin == end {
		return step.Result{}, fmt.Errorf("blockinfile: marker_begin and marker_end must differ")
	}
	block := onhost.SplitLines([]byte(args.String("block")))
	absent := args.String("state") == "absent" || len(block) == 0
	return EditFile(ctx, env, args, func(lines []string) ([]string, error) {
		return editBlock(lines, begin, end, block, absent, args.String("insertafter"), args.String("insertbefore"))
	})
}

func editBlock(lines []string, begin, end string, block []string, absent bool, after, before string) ([]string, error) {
	bi, ei := -1, -1
	for i, l := range lines {
		if l == begin && bi < 0 {
			bi = i
		}
		if l == end && bi >= 0 && i > bi {
			ei = i
			break
		}
	}
	if bi >= 0 && ei < 0 {
		return nil, fmt.Errorf("blockinfile: found %q without a matching %q; fix the file by hand", begin, end)
	}
	if absent {
		if bi < 0 {
			return lines, nil
		}
		return append(append([]string(nil), lines[:bi]...), lines[ei+1:]...), nil
	}
	want := append(append([]string{begin}, block...), end)
	if bi >= 0 {
		out := append([]string(nil), lines[:bi]...)
		out = append(out, want...)
		return append(out, lines[ei+1:]...), nil
	}
	at, err := insertAt(lines, after, before)
	if err != nil {
		return nil, err
	}
	return insertLines(lines, at, want...), nil
}
