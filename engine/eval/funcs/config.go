package funcs

import (
	"bytes"
	"fmt"
	"math"
	"strconv"
	"strings"

	toml "github.com/pelletier/go-toml/v2"
)

// Template functions for the *_extra_config variables of roles: a site's
// settings are merged into the configuration a role renders (a mapping, then
// written as YAML, TOML or command-line flags), so a key the site sets
// replaces the role's instead of being written twice.

// mergeConfig returns a copy of base with extra merged over it: a key of
// extra replaces base's, except that when both values are mappings they are
// merged the same way, key by key, at any depth; a null value removes the
// key. Lists and scalars replace. name is the variable extra came from, for
// the error when it is not a mapping. base and extra are not modified.
func mergeConfig(name string, base, extra any) (map[string]any, error) {
	b, ok := base.(map[string]any)
	if !ok && base != nil {
		return nil, fmt.Errorf("mergeConfig: the base configuration is %s, not a mapping", kindOf(base))
	}
	e, err := configMap(name, extra)
	if err != nil {
		return nil, err
	}
	out := deepCopyMap(b)
	mergeInto(out, e)
	return out, nil
}

// configMap checks that an *_extra_config value is a mapping (nil and an
// empty string, an unset variable's forms, are an empty one).
func configMap(name string, v any) (map[string]any, error) {
	switch x := v.(type) {
	case nil:
		return nil, nil
	case map[string]any:
		return x, nil
	case string:
		if strings.TrimSpace(x) == "" {
			return nil, nil
		}
	}
	return nil, fmt.Errorf("%s must be a mapping of settings (key: value), not %s", name, kindOf(v))
}

func kindOf(v any) string {
	switch x := v.(type) {
	case []any, []string:
		return "a list"
	case string:
		return fmt.Sprintf("the string %q", x)
	case bool:
		return "a boolean"
	case int, int64, uint64, float64:
		return "a number"
	}
	return fmt.Sprintf("%T", v)
}

func mergeInto(dst, src map[string]any) {
	for k, v := range src {
		if v == nil {
			delete(dst, k)
			continue
		}
		if sm, ok := v.(map[string]any); ok {
			if dm, ok := dst[k].(map[string]any); ok {
				mergeInto(dm, sm)
				continue
			}
		}
		dst[k] = deepCopyValue(v)
	}
}

func deepCopyMap(m map[string]any) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = deepCopyValue(v)
	}
	return out
}

func deepCopyValue(v any) any {
	switch x := v.(type) {
	case map[string]any:
		return deepCopyMap(x)
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = deepCopyValue(e)
		}
		return out
	}
	return v
}

// mergeFlags merges extra (flag name without dashes: value) over a role's
// default flags and returns each flag's value as text, for a systemd unit's
// command line or kubeadm's extraArgs: a flag the site sets replaces the
// default, null removes it, a list is joined with commas (as
// --tls-cipher-suites takes it). A mapping has no flag form and is an error
// naming the variable and the flag.
func mergeFlags(name string, base, extra any) (map[string]string, error) {
	merged, err := mergeConfig(name, base, extra)
	if err != nil {
		return nil, err
	}
	out := make(map[string]string, len(merged))
	for k, v := range merged {
		if strings.HasPrefix(k, "-") {
			return nil, fmt.Errorf("%s: flag %q: write the flag's name without its leading dashes (%s)", name, k, strings.TrimLeft(k, "-"))
		}
		s, err := flagValue(v)
		if err != nil {
			return nil, fmt.Errorf("%s: flag %q: %w", name, k, err)
		}
		out[k] = s
	}
	return out, nil
}

func flagValue(v any) (string, error) {
	switch x := v.(type) {
	case map[string]any:
		return "", fmt.Errorf("a mapping has no command-line form; write it as the flag's text (e.g. \"a=1,b=2\")")
	case []any:
		parts := make([]string, len(x))
		for i, e := range x {
			s, err := flagValue(e)
			if err != nil {
				return "", err
			}
			parts[i] = s
		}
		return strings.Join(parts, ","), nil
	case float64:
		return strconv.FormatFloat(x, 'f', -1, 64), nil
	}
	return fmt.Sprint(v), nil
}

// systemdArg writes one word of a systemd ExecStart= line: as is when it
// needs no quoting, else double-quoted with \ and " escaped. % and $ are
// doubled either way, so systemd expands neither a specifier nor a variable.
func systemdArg(v any) (string, error) {
	s := fmt.Sprint(v)
	if strings.ContainsAny(s, "\x00\n\r") {
		return "", fmt.Errorf("systemdArg: %q holds a NUL or line break, which a unit's command line cannot carry", s)
	}
	s = strings.NewReplacer("%", "%%", "$", "$$").Replace(s)
	if s != "" && !strings.ContainsAny(s, " \t\"'\\;") {
		return s, nil
	}
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(s) + `"`, nil
}

// toTOML renders a mapping as a TOML document (keys sorted, tables after
// the plain keys of each table). A number that came from JSON or YAML as a
// whole float (100.0) is written as an integer, since the configurations
// rendered this way (containerd's) take integers where they take numbers.
func toTOML(v any) (string, error) {
	m, ok := v.(map[string]any)
	if !ok {
		return "", fmt.Errorf("toToml: a TOML document is a mapping, not %s", kindOf(v))
	}
	var buf bytes.Buffer
	enc := toml.NewEncoder(&buf)
	enc.SetIndentTables(true)
	if err := enc.Encode(tomlValues(m)); err != nil {
		return "", fmt.Errorf("toToml: %w", err)
	}
	return strings.TrimSuffix(buf.String(), "\n"), nil
}

func tomlValues(v any) any {
	switch x := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			if e != nil {
				out[k] = tomlValues(e)
			}
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = tomlValues(e)
		}
		return out
	case float64:
		if x == math.Trunc(x) && math.Abs(x) < 1<<53 {
			return int64(x)
		}
	}
	return v
}
