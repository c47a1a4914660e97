package step

import (
	"fmt"
	"io/fs"
	"strconv"
	"time"
)

// Args are a task's arguments after templating, with defaults applied.
type Args map[string]any

// Has reports whether name was given (or defaulted).
func (a Args) Has(name string) bool {
	v, ok := a[name]
	return ok && v != nil
}

// String returns a string argument; numbers and bools are formatted.
func (a Args) String(name string) string {
	switch v := a[name].(type) {
	case nil:
		return ""
	case string:
		return v
	default:
		return fmt.Sprint(v)
	}
}

// Bool returns a bool argument; "yes", "true", "1" and their opposites count.
func (a Args) Bool(name string) bool {
	b, _ := ToBool(a[name])
	return b
}

// Int returns an int argument.
func (a Args) Int(name string) int {
	n, _ := ToInt(a[name])
	return n
}

// List returns a list argument; a single value becomes a list of one.
func (a Args) List(name string) []any {
	switch v := a[name].(type) {
	case nil:
		return nil
	case []any:
		return v
	case []string:
		out := make([]any, len(v))
		for i, s := range v {
			out[i] = s
		}
		return out
	default:
		return []any{v}
	}
}

// Strings returns a list argument as strings.
func (a Args) Strings(name string) []string {
	l := a.List(name)
	out := make([]string, len(l))
	for i, v := range l {
		out[i] = fmt.Sprint(v)
	}
	return out
}

// Map returns a map argument.
func (a Args) Map(name string) map[string]any {
	m, _ := a[name].(map[string]any)
	return m
}

// Mode returns a file mode argument, or 0 when it is absent.
func (a Args) Mode(name string) fs.FileMode {
	m, _ := ToMode(a[name])
	return m
}

// Duration returns a duration argument, or 0 when it is absent.
func (a Args) Duration(name string) time.Duration {
	d, _ := ToDuration(a[name])
	return d
}

// ToBool converts a YAML-ish value to bool.
func ToBool(v any) (bool, error) {
	switch x := v.(type) {
	case nil:
		return false, nil
	case bool:
		return x, nil
	case int, int64, uint64, float64:
		n, _ := ToInt(x)
		return n != 0, nil
	case string:
		switch x {
		case "true", "True", "TRUE", "yes", "Yes", "YES", "on", "1":
			return true, nil
		case "false", "False", "FALSE", "no", "No", "NO", "off", "0", "":
			return false, nil
		}
	}
	return false, fmt.Errorf("%v is not a boolean", v)
}

// ToInt converts a YAML-ish value to int.
func ToInt(v any) (int, error) {
	switch x := v.(type) {
	case nil:
		return 0, nil
	case int:
		return x, nil
	case int64:
		return int(x), nil
	case uint64:
		return int(x), nil
	case float64:
		if x != float64(int(x)) {
			return 0, fmt.Errorf("%v is not a whole number", x)
		}
		return int(x), nil
	case string:
		n, err := strconv.Atoi(x)
		if err != nil {
			return 0, fmt.Errorf("%q is not a number", x)
		}
		return n, nil
	}
	return 0, fmt.Errorf("%v is not a number", v)
}

// ToMode converts "0644", "644" or the number 420 to a file mode. A YAML
// number written 0644 arrives as 420 and is taken as it is.
func ToMode(v any) (fs.FileMode, error) {
	switch x := v.(type) {
	case nil:
		return 0, nil
	case string:
		n, err := strconv.ParseUint(x, 8, 32)
		if err != nil || n > 07777 {
			return 0, fmt.Errorf("%q is not an octal file mode such as \"0644\"", x)
		}
		return fs.FileMode(n), nil
	default:
		n, err := ToInt(x)
		if err != nil || n < 0 || n > 07777 {
			return 0, fmt.Errorf("%v is not a file mode; write it quoted in octal, such as \"0644\"", v)
		}
		return fs.FileMode(n), nil
	}
}

// ToDuration converts "30s", "5m" or a number of seconds to a duration.
func ToDuration(v any) (time.Duration, error) {
	switch x := v.(type) {
	case nil:
		return 0, nil
	case string:
		if d, err := time.ParseDuration(x); err == nil {
			return d, nil
		}
		n, err := strconv.ParseFloat(x, 64)
		if err != nil {
			return 0, fmt.Errorf("%q is not a duration such as \"30s\" or \"5m\"", x)
		}
		return time.Duration(n * float64(time.Second)), nil
	default:
		n, err := ToInt(x)
		if err != nil {
			if f, ok := x.(float64); ok {
				return time.Duration(f * float64(time.Second)), nil
			}
			return 0, fmt.Errorf("%v is not a duration", v)
		}
		return time.Duration(n) * time.Second, nil
	}
}

// WithDefaults returns a copy of args in which every argument the Spec gives
// a default and that is missing, null, an empty string or an empty list
// holds that default: a template that rendered to nothing asks for the
// default, as a missing argument does. The engine calls it after
// templating, before every Run, so a builtin reads its defaults from its
// Spec and never states them again.
func (s Spec) WithDefaults(args Args) Args {
	out := make(Args, len(args)+len(s.Args))
	for k, v := range args {
		out[k] = v
	}
	for _, a := range s.Args {
		if a.Default == nil {
			continue
		}
		switch v := out[a.Name].(type) {
		case nil:
		case string:
			if v != "" {
				continue
			}
		case []any:
			if len(v) > 0 {
				continue
			}
		default:
			continue
		}
		out[a.Name] = a.Default
	}
	return out
}
