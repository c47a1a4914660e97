package eval

import (
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"text/template"

	"github.com/mensylisir/kubexm/internal/suggest"
)

// missingError reports a variable path that does not exist. Templates and
// expressions both resolve variable references through lookup, so the path
// in the message is the same whichever language the user wrote.
type missingError struct {
	path    string
	suggest string // a close existing path, when there is one
	reason  string // why a variable the inventory sets is not here (Unrendered)
}

func (e *missingError) Error() string {
	return fmt.Sprintf("undefined variable %q%s", e.path, e.hint())
}

func (e *missingError) hint() string {
	if e.reason != "" {
		return fmt.Sprintf(" (the inventory sets it, but its template could not be rendered here: %s)", e.reason)
	}
	return didYouMean(e.suggest)
}

// Unrendered is the key, in the variables, of a map[string]string from the
// name of an inventory variable whose template could not be rendered for
// the task to why: the variable is left out (so `x ?? y` and defined("x")
// see it undefined) and a use of it says why.
const Unrendered = "kubexm:unrendered"

func didYouMean(path string) string {
	if path == "" {
		return ""
	}
	return fmt.Sprintf(" (did you mean %q?)", path)
}

// newMissing builds the error for keys[len(keys)-1] missing from container.
func newMissing(label string, container any, keys []any) *missingError {
	m := &missingError{path: formatPath(label, keys)}
	last, ok := keys[len(keys)-1].(string)
	if !ok {
		return m
	}
	if vars, isMap := container.(map[string]any); isMap && label == "" && len(keys) == 1 {
		if why, found := vars[Unrendered].(map[string]string); found && why[last] != "" {
			m.reason = why[last]
			return m
		}
	}
	if alt := closestKey(container, last); alt != "" {
		fixed := append(append([]any{}, keys[:len(keys)-1]...), alt)
		m.suggest = formatPath(label, fixed)
	}
	return m
}

// closestKey finds a key of a map that is a likely typo of key: within an
// edit distance of a third of its length (at least 1): "nope" must not
// suggest "role".
func closestKey(container any, key string) string {
	var m map[string]any
	switch c := container.(type) {
	case map[string]any:
		m = c
	case template.FuncMap:
		m = c
	default:
		return ""
	}
	limit := max(len(key)/3, 1)
	best, bestD := "", limit+1
	for k := range m {
		d := suggest.Distance(key, k)
		if d < bestD || (d == bestD && k < best) {
			best, bestD = k, d
		}
	}
	return best
}

// lookup resolves keys one after the other starting at base. label names base
// in messages ("" when base is the variables themselves). A key that does not
// exist, an index out of range or a nil value in the middle of the path is a
// *missingError, or nil without error when lenient. Indexing something that
// cannot be indexed is an error in both modes: it is a mistake, not an
// optional value.
func lookup(label string, base any, keys []any, lenient bool) (any, error) {
	cur := base
	for i, key := range keys {
		next, found, err := step(cur, key)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", formatPath(label, keys[:i+1]), err)
		}
		if !found {
			if lenient {
				return nil, nil
			}
			return nil, newMissing(label, cur, keys[:i+1])
		}
		cur = next
	}
	return cur, nil
}

// step indexes v with one key. found is false when the key is absent or v is
// nil.
func step(v, key any) (next any, found bool, err error) {
	switch c := v.(type) {
	case nil:
		return nil, false, nil
	case map[string]any:
		k, ok := key.(string)
		if !ok {
			return nil, false, fmt.Errorf("cannot index a map with %T %v", key, key)
		}
		next, found = c[k]
		return next, found, nil
	case []any:
		idx, ok := toIndex(key)
		if !ok {
			return nil, false, fmt.Errorf("cannot index a list with %T %v", key, key)
		}
		if idx < 0 {
			idx += len(c)
		}
		if idx < 0 || idx >= len(c) {
			return nil, false, nil
		}
		return c[idx], true, nil
	}
	return stepReflect(reflect.ValueOf(v), key)
}

// stepReflect covers typed maps, slices and structs that Go code (facts,
// registered results) may put into the variables.
func stepReflect(rv reflect.Value, key any) (any, bool, error) {
	for rv.Kind() == reflect.Pointer || rv.Kind() == reflect.Interface {
		if rv.IsNil() {
			return nil, false, nil
		}
		rv = rv.Elem()
	}
	switch rv.Kind() {
	case reflect.Map:
		kv := reflect.ValueOf(key)
		if !kv.IsValid() || !kv.Type().ConvertibleTo(rv.Type().Key()) ||
			kv.Kind() != rv.Type().Key().Kind() {
			return nil, false, fmt.Errorf("cannot index a map with %T %v", key, key)
		}
		got := rv.MapIndex(kv.Convert(rv.Type().Key()))
		if !got.IsValid() {
			return nil, false, nil
		}
		return got.Interface(), true, nil
	case reflect.Slice, reflect.Array:
		idx, ok := toIndex(key)
		if !ok {
			return nil, false, fmt.Errorf("cannot index a list with %T %v", key, key)
		}
		if idx < 0 {
			idx += rv.Len()
		}
		if idx < 0 || idx >= rv.Len() {
			return nil, false, nil
		}
		return rv.Index(idx).Interface(), true, nil
	case reflect.Struct:
		name, ok := key.(string)
		if !ok {
			return nil, false, fmt.Errorf("cannot index a %s with %T %v", rv.Type(), key, key)
		}
		f, ok := rv.Type().FieldByName(name)
		if !ok || !f.IsExported() {
			return nil, false, nil
		}
		return rv.FieldByIndex(f.Index).Interface(), true, nil
	}
	return nil, false, fmt.Errorf("cannot read %v from a value of type %T", key, rv.Interface())
}

// toIndex accepts every integer kind: YAML decoders produce uint64 and int64,
// templates and expressions produce int.
func toIndex(key any) (int, bool) {
	rv := reflect.ValueOf(key)
	switch rv.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return int(rv.Int()), true
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		u := rv.Uint()
		if u > uint64(^uint(0)>>1) {
			return 0, false
		}
		return int(u), true
	}
	return 0, false
}

// formatPath writes a path the way a user would: a.b[0]["odd key"].
func formatPath(label string, keys []any) string {
	var b strings.Builder
	b.WriteString(label)
	for _, k := range keys {
		if s, ok := k.(string); ok {
			if isIdent(s) {
				if b.Len() > 0 {
					b.WriteByte('.')
				}
				b.WriteString(s)
				continue
			}
			b.WriteString("[" + strconv.Quote(s) + "]")
			continue
		}
		fmt.Fprintf(&b, "[%v]", k)
	}
	return b.String()
}

func isIdent(s string) bool {
	if s == "" {
		return false
	}
	for i, r := range s {
		switch {
		case r == '_', r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z':
		case i > 0 && (r >= '0' && r <= '9' || r == '-'):
		default:
			return false
		}
	}
	return true
}

// pathDefined reports whether a dotted path ("spec.etcd.dataDir",
// "groups.etcd.0") exists in vars. Numeric segments index lists.
func pathDefined(vars any, segments []any) bool {
	cur := vars
	for _, seg := range segments {
		if s, ok := seg.(string); ok {
			if _, isList := cur.([]any); isList {
				if n, err := strconv.Atoi(s); err == nil {
					seg = n
				}
			}
		}
		next, found, err := step(cur, seg)
		if err != nil || !found {
			return false
		}
		cur = next
	}
	return true
}
