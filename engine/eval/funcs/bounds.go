package funcs

import (
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"strings"
	"text/template"
	"unicode/utf8"
)

// Templates come from cluster.yaml and -e values too, which kubexm does not
// trust (docs/security.md): `{{ repeat 2000000000 "x" }}` in a host variable
// once took a run to 2 GB and a fatal out-of-memory. These bounds make such a
// template an error naming its function and the limit, checked before the
// function allocates, so it costs nothing whether the variable is used or not.
const (
	// MaxOutput bounds the text of one rendered template and the string a
	// function returns: far above any configuration file a role renders.
	MaxOutput = 16 << 20
	// maxItems bounds the lists and maps a function builds and the values a
	// function that prints its arguments walks.
	maxItems = 1 << 20
	// maxDepth bounds the nesting of a value a function prints: YAML input is
	// refused beyond about 100 levels, so deeper values were built by a
	// template, possibly in a loop (or holding themselves, through set).
	maxDepth = 1000
)

// ErrLimit is matched (errors.Is) by every error of a bound above, so that
// the engine can tell a template bomb from a mistake.
var ErrLimit = errors.New("template size limit")

type limitErr struct{ msg string }

func (e *limitErr) Error() string        { return e.msg }
func (e *limitErr) Is(target error) bool { return target == ErrLimit }

func limitError(format string, args ...any) error {
	return &limitErr{msg: fmt.Sprintf(format, args...)}
}

// Both messages start with the function's name, which is how
// cleanTemplateError knows to drop text/template's "error calling".
func tooLong(name string, n int64) error {
	return limitError("%s: would make %d bytes, more than the %d MiB a template may produce", name, n, MaxOutput>>20)
}

func tooMany(name string, n int64) error {
	return limitError("%s: would make %d items, more than the %d a template may build", name, n, maxItems)
}

// Writer is the output of one Execute: text/template stops at the
// first write error, so a template stops growing at the bound.
type Writer struct {
	strings.Builder
}

func (w *Writer) Write(p []byte) (int, error) {
	if int64(w.Len())+int64(len(p)) > MaxOutput {
		return 0, OutputTooLong()
	}
	return w.Builder.Write(p)
}

// OutputTooLong is the error of a rendered text beyond MaxOutput.
func OutputTooLong() error {
	return limitError("the rendered text would exceed %d MiB", MaxOutput>>20)
}

// measure estimates the printed size of v (fmt, JSON and YAML all print
// every string and every element), stopping once it exceeds MaxOutput bytes
// or maxItems values. A list holding the same string many times counts it
// each time: that is what printing it costs.
type measure struct {
	size, items int64
}

func (m *measure) add(v any, depth int) error {
	if depth > maxDepth {
		return limitError("a value nested deeper than %d levels (or holding itself) cannot be printed", maxDepth)
	}
	m.items++
	if m.items > maxItems {
		return limitError("a value of more than %d items cannot be printed", maxItems)
	}
	switch x := v.(type) {
	case nil, bool, int, int64, uint64, float64, int32, uint32, float32:
		m.size += 24
	case string:
		m.size += int64(len(x)) + 2
	case []any:
		for _, e := range x {
			if err := m.add(e, depth+1); err != nil {
				return err
			}
		}
	case map[string]any:
		for k, e := range x {
			m.size += int64(len(k)) + 4
			if err := m.add(e, depth+1); err != nil {
				return err
			}
		}
	case []string:
		for _, e := range x {
			m.size += int64(len(e)) + 2
		}
		m.items += int64(len(x))
	default:
		rv := reflect.ValueOf(v)
		switch rv.Kind() {
		case reflect.Slice, reflect.Array:
			for i := 0; i < rv.Len(); i++ {
				if err := m.add(rv.Index(i).Interface(), depth+1); err != nil {
					return err
				}
			}
		case reflect.Map:
			for it := rv.MapRange(); it.Next(); {
				if err := m.add(it.Key().Interface(), depth+1); err != nil {
					return err
				}
				if err := m.add(it.Value().Interface(), depth+1); err != nil {
					return err
				}
			}
		default:
			m.size += 64
		}
	}
	if m.items > maxItems {
		return limitError("a value of more than %d items cannot be printed", maxItems)
	}
	if m.size > MaxOutput {
		return limitError("its text would exceed %d MiB", MaxOutput>>20)
	}
	return nil
}

// CheckPrintable refuses arguments whose printed form would pass the bound,
// before a function that prints them allocates it. Strings and numbers, the
// usual arguments, need no walk.
func CheckPrintable(name string, args ...any) error {
	var m measure
	for _, a := range args {
		if err := m.add(a, 0); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
	}
	return nil
}

func checkText(name, s string) (string, error) {
	if len(s) > MaxOutput {
		return "", tooLong(name, int64(len(s)))
	}
	return s, nil
}

// stepCount is how many numbers sprig's untilStep(start, stop, step) makes.
func stepCount(start, stop, step int) int64 {
	a, b, s := int64(start), int64(stop), int64(step)
	switch {
	case b < a && s < 0:
		return (a - b + (-s) - 1) / (-s)
	case b > a && s > 0:
		return (b - a + s - 1) / s
	}
	return 0
}

// seqArgs mirrors sprig's seq: the untilStep arguments it uses.
func seqArgs(params []int) (start, stop, step int, ok bool) {
	switch len(params) {
	case 1:
		inc := 1
		if params[0] < 1 {
			inc = -1
		}
		return 1, params[0] + inc, inc, true
	case 2:
		inc := 1
		if params[1] < params[0] {
			inc = -1
		}
		return params[0], params[1] + inc, inc, true
	case 3:
		inc := 1
		if params[2] < params[0] {
			inc = -1
		}
		return params[0], params[2] + inc, params[1], true
	}
	return 0, 0, 0, false
}

// printfSize is an upper bound of fmt.Sprintf(format, args...)'s length: the
// format, every argument printed, and each width and precision, which fmt
// itself caps at 1e6 (a larger one is a %!(BADWIDTH)).
func printfSize(format string, args []any) (int64, error) {
	var m measure
	for _, a := range args {
		if err := m.add(a, 0); err != nil {
			return 0, err
		}
	}
	const fmtMax = 1e6
	n := int64(len(format)) + m.size
	for i := 0; i < len(format); i++ {
		if format[i] != '%' {
			continue
		}
		num := int64(0)
		for i++; i < len(format); i++ {
			c := format[i]
			switch {
			case c >= '0' && c <= '9':
				num = min(num*10+int64(c-'0'), fmtMax)
				continue
			case c == '*':
				num = fmtMax
				continue
			case c == '.' || c == '+' || c == '-' || c == '#' || c == ' ' || c == '[' || c == ']':
				n += num
				num = 0
				continue
			}
			break
		}
		n += num
	}
	return n, nil
}

// boundedFuncs replaces, in fm, the functions that can make much more than
// they are given by versions that refuse to pass the bounds first.
func boundedFuncs(fm template.FuncMap) {
	fm["repeat"] = func(count int, str string) (string, error) {
		if count < 0 {
			return "", fmt.Errorf("repeat: negative count %d", count)
		}
		if n := int64(count) * int64(len(str)); n > MaxOutput || (len(str) > 0 && int64(count) > MaxOutput) {
			return "", tooLong("repeat", n)
		}
		return strings.Repeat(str, count), nil
	}
	fm["indent"] = boundedIndent("indent", "")
	fm["nindent"] = boundedIndent("nindent", "\n")
	fm["until"] = func(count int) ([]int, error) {
		step := 1
		if count < 0 {
			step = -1
		}
		return untilStep("until", 0, count, step)
	}
	fm["untilStep"] = func(start, stop, step int) ([]int, error) {
		return untilStep("untilStep", start, stop, step)
	}
	fm["seq"] = boundedSeq
	fm["replace"] = func(old, replacement, src string) (string, error) {
		count := int64(strings.Count(src, old))
		if n := int64(len(src)) + count*(int64(len(replacement))-int64(len(old))); n > MaxOutput {
			return "", tooLong("replace", n)
		}
		return strings.ReplaceAll(src, old, replacement), nil
	}
	if wrapWith, ok := fm["wrapWith"].(func(int, string, string) string); ok {
		fm["wrapWith"] = func(l int, sep, str string) (string, error) {
			if n := int64(len(str)) + (int64(len(str))/int64(max(l, 1))+1)*int64(len(sep)); n > MaxOutput {
				return "", tooLong("wrapWith", n)
			}
			return wrapWith(l, sep, str), nil
		}
	}
	boundedRandFuncs(fm)
	boundedRegexFuncs(fm)
	boundedListFuncs(fm)
	boundedPrintFuncs(fm)
	boundedEncodeFuncs(fm)
}

// boundedIndent is sprig's indent (lead "") or nindent (lead "\n"),
// refusing to pass MaxOutput.
func boundedIndent(name string, lead string) func(int, string) (string, error) {
	return func(spaces int, v string) (string, error) {
		if spaces < 0 {
			return "", fmt.Errorf("%s: negative count %d", name, spaces)
		}
		lines := int64(strings.Count(v, "\n")) + 1
		if n := int64(len(v)) + int64(len(lead)) + int64(spaces)*lines; n > MaxOutput || int64(spaces) > MaxOutput {
			return "", tooLong(name, n)
		}
		pad := strings.Repeat(" ", spaces)
		return lead + pad + strings.ReplaceAll(v, "\n", "\n"+pad), nil
	}
}

// boundedSeq is sprig's seq, refusing more than maxItems numbers.
func boundedSeq(params ...int) (string, error) {
	start, stop, step, ok := seqArgs(params)
	if !ok {
		return "", nil
	}
	if len(params) == 3 && params[2] < params[0] && step > 0 {
		return "", nil
	}
	l, err := untilStep("seq", start, stop, step)
	if err != nil {
		return "", err
	}
	parts := make([]string, len(l))
	for i, x := range l {
		parts[i] = fmt.Sprint(x)
	}
	return strings.Join(parts, " "), nil
}

// boundedRandFuncs bounds the random strings' length.
func boundedRandFuncs(fm template.FuncMap) {
	for _, name := range []string{"randAlphaNum", "randAlpha", "randAscii", "randNumeric"} {
		if f, ok := fm[name].(func(int) string); ok {
			fm[name] = func(count int) (string, error) {
				if count > MaxOutput {
					return "", tooLong(name, int64(count))
				}
				return f(count), nil
			}
		}
	}
	if f, ok := fm["randBytes"].(func(int) (string, error)); ok {
		fm["randBytes"] = func(count int) (string, error) {
			if count > MaxOutput/2 {
				return "", tooLong("randBytes", int64(count)*4/3)
			}
			return f(count)
		}
	}
}

func untilStep(name string, start, stop, step int) ([]int, error) {
	n := stepCount(start, stop, step)
	if n > maxItems {
		return nil, tooMany(name, n)
	}
	out := make([]int, 0, n)
	for i := int64(0); i < n; i++ {
		out = append(out, start+int(i)*step)
	}
	return out, nil
}

// boundedRegexFuncs: a replacement is written at every match, and a
// pattern can match at every byte.
func boundedRegexFuncs(fm template.FuncMap) {
	replaceSize := func(name, regex, s, repl string, literal bool) error {
		// Each $n expands to at most its match, and matches do not overlap.
		dollars := int64(0)
		if !literal {
			dollars = int64(strings.Count(repl, "$"))
		}
		bound := func(matches int64) int64 {
			return int64(len(s)) + matches*int64(len(repl)) + dollars*int64(len(s))
		}
		if bound(int64(len(s))+1) <= MaxOutput {
			return nil
		}
		re, err := regexp.Compile(regex)
		if err != nil {
			return nil // the function reports it
		}
		matches := int64(len(re.FindAllStringIndex(s, maxItems+1)))
		if matches > maxItems {
			return tooMany(name, matches)
		}
		if n := bound(matches); n > MaxOutput {
			return tooLong(name, n)
		}
		return nil
	}
	for _, name := range []string{"regexReplaceAll", "regexReplaceAllLiteral"} {
		literal := strings.HasSuffix(name, "Literal")
		if f, ok := fm[name].(func(string, string, string) string); ok {
			fm[name] = func(regex, s, repl string) (string, error) {
				if err := replaceSize(name, regex, s, repl, literal); err != nil {
					return "", err
				}
				return f(regex, s, repl), nil
			}
		}
		must := "must" + strings.ToUpper(name[:1]) + name[1:]
		if f, ok := fm[must].(func(string, string, string) (string, error)); ok {
			fm[must] = func(regex, s, repl string) (string, error) {
				if err := replaceSize(must, regex, s, repl, literal); err != nil {
					return "", err
				}
				return f(regex, s, repl)
			}
		}
	}
	// n < 0 is every match; a string shorter than maxItems has fewer.
	matchCount := func(name, regex, s string, n int) error {
		if len(s) < maxItems || (n >= 0 && n <= maxItems) {
			return nil
		}
		re, err := regexp.Compile(regex)
		if err != nil {
			return nil
		}
		if got := len(re.FindAllStringIndex(s, maxItems+1)); got > maxItems {
			return tooMany(name, int64(got))
		}
		return nil
	}
	for _, name := range []string{"regexSplit", "regexFindAll"} {
		if f, ok := fm[name].(func(string, string, int) []string); ok {
			fm[name] = func(regex, s string, n int) ([]string, error) {
				if err := matchCount(name, regex, s, n); err != nil {
					return nil, err
				}
				return f(regex, s, n), nil
			}
		}
		must := "must" + strings.ToUpper(name[:1]) + name[1:]
		if f, ok := fm[must].(func(string, string, int) ([]string, error)); ok {
			fm[must] = func(regex, s string, n int) ([]string, error) {
				if err := matchCount(must, regex, s, n); err != nil {
					return nil, err
				}
				return f(regex, s, n)
			}
		}
	}
}

// splitCount is how many parts strings.Split(s, sep) makes, counted only
// when it could pass the bound.
func splitCount(name, sep, s string) error {
	if len(s) < maxItems {
		return nil
	}
	n := int64(strings.Count(s, sep)) + 1
	if sep == "" {
		n = int64(utf8.RuneCountInString(s))
	}
	if n > maxItems {
		return tooMany(name, n)
	}
	return nil
}

func listLen(v any) int64 {
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.Slice, reflect.Array:
		return int64(rv.Len())
	}
	return 0
}

// boundedListFuncs bounds the lists and maps a loop can grow one call at a
// time: `{{ range until 1000 }}{{ $l = concat $l $l }}{{ end }}` doubles.
func boundedListFuncs(fm template.FuncMap) {
	fm["splitList"] = func(sep, orig string) ([]string, error) {
		if err := splitCount("splitList", sep, orig); err != nil {
			return nil, err
		}
		return strings.Split(orig, sep), nil
	}
	for _, name := range []string{"split"} {
		if f, ok := fm[name].(func(string, string) map[string]string); ok {
			fm[name] = func(sep, orig string) (map[string]string, error) {
				if err := splitCount(name, sep, orig); err != nil {
					return nil, err
				}
				return f(sep, orig), nil
			}
		}
	}
	for _, name := range []string{"append", "push", "prepend"} {
		if f, ok := fm[name].(func(any, any) []any); ok {
			fm[name] = func(list, v any) ([]any, error) {
				if n := listLen(list) + 1; n > maxItems {
					return nil, tooMany(name, n)
				}
				return f(list, v), nil
			}
		}
	}
	for _, name := range []string{"mustAppend", "mustPush", "mustPrepend"} {
		if f, ok := fm[name].(func(any, any) ([]any, error)); ok {
			fm[name] = func(list, v any) ([]any, error) {
				if n := listLen(list) + 1; n > maxItems {
					return nil, tooMany(name, n)
				}
				return f(list, v)
			}
		}
	}
	if f, ok := fm["concat"].(func(...any) any); ok {
		fm["concat"] = func(lists ...any) (any, error) {
			n := int64(0)
			for _, l := range lists {
				n += listLen(l)
			}
			if n > maxItems {
				return nil, tooMany("concat", n)
			}
			return f(lists...), nil
		}
	}
	fm["set"] = func(d map[string]any, key string, value any) (map[string]any, error) {
		if _, ok := d[key]; !ok && len(d) >= maxItems {
			return nil, tooMany("set", int64(len(d))+1)
		}
		d[key] = value
		return d, nil
	}
}

// boundedPrintFuncs checks the arguments of the functions that print whole
// values before they do: a list of a million references to one long string
// is small in memory and huge in print.
func boundedPrintFuncs(fm template.FuncMap) {
	fm["print"] = func(args ...any) (string, error) {
		if err := CheckPrintable("print", args...); err != nil {
			return "", err
		}
		return checkText("print", fmt.Sprint(args...))
	}
	fm["println"] = func(args ...any) (string, error) {
		if err := CheckPrintable("println", args...); err != nil {
			return "", err
		}
		return checkText("println", fmt.Sprintln(args...))
	}
	fm["printf"] = func(format string, args ...any) (string, error) {
		n, err := printfSize(format, args)
		if err != nil {
			return "", fmt.Errorf("printf: %w", err)
		}
		if n > MaxOutput {
			return "", tooLong("printf", n)
		}
		return fmt.Sprintf(format, args...), nil
	}
	for name, f := range map[string]func(...any) string{
		"html": template.HTMLEscaper, "js": template.JSEscaper, "urlquery": template.URLQueryEscaper,
	} {
		fm[name] = boundedPrint(name, f)
	}
	for _, name := range []string{"cat", "quote", "squote"} {
		if f, ok := fm[name].(func(...any) string); ok {
			fm[name] = boundedPrint(name, f)
		}
	}
}

// boundedPrint is f, refusing what cannot be printed or is too long.
func boundedPrint(name string, f func(...any) string) func(...any) (string, error) {
	return func(args ...any) (string, error) {
		if err := CheckPrintable(name, args...); err != nil {
			return "", err
		}
		return checkText(name, f(args...))
	}
}

// boundedEncodeFuncs replaces, in fm, the functions that encode or copy a
// value by versions that refuse what cannot be printed or is too long.
func boundedEncodeFuncs(fm template.FuncMap) {
	for _, name := range []string{"toString", "toJson", "toPrettyJson", "toRawJson", "deepCopy"} {
		switch f := fm[name].(type) {
		case func(any) string:
			fm[name] = func(v any) (string, error) {
				if err := CheckPrintable(name, v); err != nil {
					return "", err
				}
				return checkText(name, f(v))
			}
		case func(any) any:
			fm[name] = func(v any) (any, error) {
				if err := CheckPrintable(name, v); err != nil {
					return nil, err
				}
				return f(v), nil
			}
		}
	}
	for _, name := range []string{"mustToJson", "mustToPrettyJson", "mustToRawJson"} {
		if f, ok := fm[name].(func(any) (string, error)); ok {
			fm[name] = func(v any) (string, error) {
				if err := CheckPrintable(name, v); err != nil {
					return "", err
				}
				s, err := f(v)
				if err != nil {
					return "", err
				}
				return checkText(name, s)
			}
		}
	}
	if f, ok := fm["mustDeepCopy"].(func(any) (any, error)); ok {
		fm["mustDeepCopy"] = func(v any) (any, error) {
			if err := CheckPrintable("mustDeepCopy", v); err != nil {
				return nil, err
			}
			return f(v)
		}
	}
	if f, ok := fm["join"].(func(string, any) string); ok {
		fm["join"] = func(sep string, v any) (string, error) {
			if err := CheckPrintable("join", v); err != nil {
				return "", err
			}
			if n := listLen(v) * int64(len(sep)); n > MaxOutput {
				return "", tooLong("join", n)
			}
			return checkText("join", f(sep, v))
		}
	}
	for _, name := range []string{"toYaml", "toToml", "shquote", "systemdArg", "mergeConfig", "mergeFlags"} {
		wrapPrinting(fm, name)
	}
}

// wrapPrinting checks the arguments of a kubexm function that prints or
// copies them.
func wrapPrinting(fm template.FuncMap, name string) {
	switch f := fm[name].(type) {
	case func(any) (string, error):
		fm[name] = func(v any) (string, error) {
			if err := CheckPrintable(name, v); err != nil {
				return "", err
			}
			return f(v)
		}
	case func(...any) (string, error):
		fm[name] = func(v ...any) (string, error) {
			if err := CheckPrintable(name, v...); err != nil {
				return "", err
			}
			return f(v...)
		}
	case func(string, any, any) (map[string]any, error):
		fm[name] = func(n string, base, extra any) (map[string]any, error) {
			if err := CheckPrintable(name, base, extra); err != nil {
				return nil, err
			}
			return f(n, base, extra)
		}
	case func(string, any, any) (map[string]string, error):
		fm[name] = func(n string, base, extra any) (map[string]string, error) {
			if err := CheckPrintable(name, base, extra); err != nil {
				return nil, err
			}
			return f(n, base, extra)
		}
	}
}
