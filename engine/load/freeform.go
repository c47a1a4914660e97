package load

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/mensylisir/kubexm/engine/step"
)

// Ansible reads `name=value` words in a module's free-form string as
// arguments: `command: ls chdir=/srv` runs ls in /srv, `debug: var=x`
// prints x. Passed through as text they would silently do something else
// (ls of a directory named chdir=/srv), so they are read as Ansible reads
// them, and a name kubexm has no argument for is refused at load.

// commandKV are the words Ansible takes out of a command or shell line:
// those kubexm has the argument of (no hint), and those it refuses with a
// hint.
func commandKV() map[string]string {
	return map[string]string{
		"chdir": "", "creates": "", "removes": "", "stdin": "",
		"executable":        "kubexm's shell is /bin/sh; run another shell explicitly (shell: bash -c '...', or command with argv)",
		"warn":              "kubexm has no command warnings to turn off; remove it",
		"stdin_add_newline": "kubexm feeds stdin as written; end the stdin text with a newline if it needs one",
		"strip_empty_ends":  "kubexm keeps stdout and stderr as the command wrote them; remove it",
	}
}

// word is a whitespace-separated word of a free-form string, with its byte
// span, quotes and {{ }} templates kept whole.
type word struct {
	text       string
	start, end int
}

// freeFormWords splits s on whitespace outside quotes and {{ }}, as
// Ansible's split_args does.
func freeFormWords(s string) ([]word, error) {
	var out []word
	start, quote, depth := -1, byte(0), 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case quote != 0:
			if c == '\\' && quote == '"' {
				i++
			} else if c == quote {
				quote = 0
			}
		case strings.HasPrefix(s[i:], "{{"):
			depth++
			i++
		case depth > 0 && strings.HasPrefix(s[i:], "}}"):
			depth--
			i++
		case depth > 0:
		case c == '\'' || c == '"':
			quote = c
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			if start >= 0 {
				out = append(out, word{s[start:i], start, i})
				start = -1
			}
			continue
		}
		if start < 0 {
			start = i
		}
	}
	if quote != 0 {
		return nil, fmt.Errorf("unclosed %c quote", quote)
	}
	if start >= 0 {
		out = append(out, word{s[start:], start, len(s)})
	}
	return out, nil
}

// unquote strips one pair of matching quotes around a value.
func unquote(v string) string {
	if len(v) >= 2 && (v[0] == '"' || v[0] == '\'') && v[len(v)-1] == v[0] {
		return v[1 : len(v)-1]
	}
	return v
}

// FreeFormArgs reads a free-form string of builtin spec. For command and
// shell (whose free-form argument is the command line) the words of
// commandKV become arguments and the rest, byte for byte, is the command.
// For the others the string is either all name=value words of the
// builtin's arguments, or none (the whole string is the free-form
// argument, kubexm's short form: `debug: hello`).
//
// A string of several lines is a script (shell: |), whose comments and
// quoting are the shell's, not Ansible's words: it is taken as written.
func FreeFormArgs(spec step.Spec, s string) (map[string]any, error) {
	if strings.Contains(strings.TrimRight(s, "\n"), "\n") {
		return map[string]any{spec.FreeForm: s}, nil
	}
	words, err := freeFormWords(s)
	if err != nil {
		return nil, err
	}
	args := map[string]any{}
	if spec.FreeForm == "cmd" {
		kvs := commandKV()
		var b strings.Builder
		last := 0
		for _, w := range words {
			name, val, ok := strings.Cut(w.text, "=")
			hint, known := kvs[name]
			if !ok || !known {
				continue
			}
			if hint != "" {
				return nil, fmt.Errorf("%s=: Ansible's %s argument %s has no kubexm equivalent: %s", name, spec.Name, name, hint)
			}
			if _, dup := args[name]; dup {
				return nil, fmt.Errorf("%s= given twice", name)
			}
			args[name] = unquote(val)
			b.WriteString(s[last:w.start])
			last = w.end
		}
		b.WriteString(s[last:])
		args["cmd"] = strings.TrimSpace(b.String())
		if len(args) > 1 && args["cmd"] == "" {
			return nil, fmt.Errorf("no command left after %s", strings.Join(mapKeys(args, "cmd"), ", "))
		}
		return args, nil
	}
	names := map[string]step.Arg{}
	for _, a := range spec.Args {
		names[a.Name] = a
		for _, al := range a.Aliases {
			names[al] = a
		}
	}
	var kv, other []string
	for _, w := range words {
		name, _, ok := strings.Cut(w.text, "=")
		if _, known := names[name]; ok && known {
			kv = append(kv, w.text)
		} else {
			other = append(other, w.text)
		}
	}
	if len(kv) == 0 {
		args[spec.FreeForm] = s
		return args, nil
	}
	if len(other) > 0 {
		return nil, fmt.Errorf("%q mixes name=value arguments (%s) with other text (%s); write the arguments as a mapping, e.g. %s: {%s: ...}",
			s, strings.Join(kv, " "), strings.Join(other, " "), spec.Name, spec.FreeForm)
	}
	for _, w := range kv {
		name, val, _ := strings.Cut(w, "=")
		v, err := typedKV(names[name], unquote(val))
		if err != nil {
			return nil, fmt.Errorf("%s=%s: %w", name, val, err)
		}
		args[name] = v
	}
	return args, nil
}

// typedKV gives a name=value word's text the argument's type, as Ansible
// converts its module arguments.
func typedKV(a step.Arg, v string) (any, error) {
	switch a.Type {
	case step.Int:
		n, err := strconv.Atoi(v)
		if err != nil {
			return nil, fmt.Errorf("%s is a number", a.Name)
		}
		return n, nil
	case step.Bool:
		b, err := strconv.ParseBool(v)
		if err != nil {
			return nil, fmt.Errorf("%s is true or false", a.Name)
		}
		return b, nil
	case step.List:
		return []any{v}, nil
	}
	return v, nil
}

func mapKeys(m map[string]any, except string) []string {
	var out []string
	for k := range m {
		if k != except {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}
