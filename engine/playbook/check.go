package playbook

// The rules a keyword value must follow, which the loader checks where it
// can and the run checks again once a template has rendered the value.

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"

	"github.com/mensylisir/kubexm/engine/step"
)

func CheckStrategy(s string) error {
	if s != "linear" && s != "free" {
		return fmt.Errorf("strategy must be linear or free, not %q", s)
	}
	return nil
}

func Percent(v any) (float64, error) {
	switch x := v.(type) {
	case int:
		if x < 0 || x > 100 {
			return 0, fmt.Errorf("%d is not between 0 and 100", x)
		}
		return float64(x), nil
	case float64:
		if x < 0 || x > 100 {
			return 0, fmt.Errorf("%v is not between 0 and 100", x)
		}
		return x, nil
	case string:
		var f float64
		if _, err := fmt.Sscanf(strings.TrimSuffix(x, "%"), "%g", &f); err != nil || f < 0 || f > 100 {
			return 0, fmt.Errorf("%q is not a percentage", x)
		}
		return f, nil
	}
	return 0, fmt.Errorf("%v is not a percentage", v)
}

// BatchSize turns a serial entry into a number of hosts out of total.
func BatchSize(v any, total int) (int, error) {
	switch x := v.(type) {
	case int:
		if x < 1 {
			return 0, fmt.Errorf("%d: a batch needs at least one host", x)
		}
		return x, nil
	case string:
		if strings.HasSuffix(x, "%") {
			f, err := Percent(x)
			if err != nil || f <= 0 {
				return 0, fmt.Errorf("%q is not a percentage above 0", x)
			}
			n := int(float64(total) * f / 100)
			if n < 1 {
				n = 1
			}
			return n, nil
		}
		n, err := step.ToInt(x)
		if err != nil || n < 1 {
			return 0, fmt.Errorf("%q is not a number of hosts or a percentage", x)
		}
		return n, nil
	}
	return 0, fmt.Errorf("%v is not a number of hosts or a percentage", v)
}

var IdentRe = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

func TypeName(v any) string {
	switch v.(type) {
	case map[string]any:
		return "a mapping"
	case []any:
		return "a list"
	case string:
		return "a string"
	case bool:
		return "a boolean"
	case int, int64, float64:
		return "a number"
	}
	return fmt.Sprintf("%T", v)
}

// CheckArgType checks a literal argument value; templated strings are
// checked after rendering, at run time.
func CheckArgType(a step.Arg, v any) error {
	if s, ok := v.(string); ok && strings.Contains(s, "{{") {
		return nil
	}
	if v == nil {
		return nil
	}
	var err error
	switch a.Type {
	case step.String:
		switch v.(type) {
		case map[string]any, []any:
			err = fmt.Errorf("want a string, got %s", TypeName(v))
		}
	case step.Int:
		_, err = step.ToInt(v)
	case step.Bool:
		_, err = step.ToBool(v)
	case step.List:
		// A single value is taken as a list of one (Args.List).
		if _, isMap := v.(map[string]any); isMap {
			err = fmt.Errorf("want a list, got a mapping")
		}
	case step.Map:
		if _, ok := v.(map[string]any); !ok {
			err = fmt.Errorf("want a mapping, got %s", TypeName(v))
		}
	case step.Mode:
		_, err = step.ToMode(v)
	case step.Duration:
		_, err = step.ToDuration(v)
	}
	if err != nil {
		return err
	}
	if len(a.Choices) > 0 {
		s := fmt.Sprint(v)
		if !slices.Contains(a.Choices, s) {
			return fmt.Errorf("%q is not one of %s%s", s, strings.Join(a.Choices, ", "), DidYouMean(s, a.Choices))
		}
	}
	return nil
}

// AppendTemplateRefs adds to refs the names that the templates in v read,
// as refsOf finds them in one string.
func AppendTemplateRefs(refsOf func(string) []string, v any, refs []string) []string {
	switch x := v.(type) {
	case string:
		for _, name := range refsOf(x) {
			if !slices.Contains(refs, name) {
				refs = append(refs, name)
			}
		}
	case []any:
		for _, e := range x {
			refs = AppendTemplateRefs(refsOf, e, refs)
		}
	case map[string]any:
		for _, k := range slices.Sorted(maps.Keys(x)) {
			refs = AppendTemplateRefs(refsOf, x[k], refs)
		}
	}
	return refs
}
